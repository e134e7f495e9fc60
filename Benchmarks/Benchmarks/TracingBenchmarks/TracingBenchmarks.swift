// What a span costs a decision when no tracer is bootstrapped (issue 42, "Traces"): each
// decision alone, then the same decision inside the span code the server modules wrap it in,
// side by side in one run. No tracer is bootstrapped, so `InstrumentationSystem.tracer` is the
// no-op tracer, as in a server that does not trace.
//
// The wrappers are those of the sources, line for line, each first checking that an instrument is
// bootstrapped (one more benchmark shows what the span code costs without that check): the middleware's decision in memory
// (PaceHTTPServer's `GateTracing.tracedAtOnce`: a span started, its `isRecording` read, ended),
// and awaited (`GateTracing.traced`: `withSpan`, which makes the span's context the task's
// current one), and the store's decision (PacePostgres's `tryAcquire`: a span started, ended on
// return, never current). The decision is `KeyedRateLimiter`'s in memory, on 1,000 keys, so that
// the figure is the span code's beside a real call of about 100 ns.

import Benchmark
import Pace
import Tracing

let keys = (0..<1_000).map { "key-\($0)" }

/// A limiter that never refuses: the call measured is a grant.
func makeLimiter() -> KeyedRateLimiter<String> {
  KeyedRateLimiter<String>(limit: RateLimit(permits: 1_000_000_000, per: .seconds(1)))
}

/// Whether an instrument is bootstrapped: the check every wrapper makes first, as the sources do.
var isOn: Bool { type(of: InstrumentationSystem.instrument) != NoOpInstrument.self }

/// The span code without that check, as first written: what the check saves.
@inline(never)
func tracedAtOnceUnchecked(_ decide: () -> RateLimitDecision) -> RateLimitDecision {
  let span = InstrumentationSystem.tracer.startSpan("pace.rate_limit.decide", ofKind: .internal)
  defer { span.end() }
  guard span.isRecording else { return decide() }
  span.attributes["pace.rate_limit.policy"] = "default"
  return decide()
}

/// The middleware's decision in memory, as `GateTracing.tracedAtOnce` wraps it.
@inline(never)
func tracedAtOnce(_ decide: () -> RateLimitDecision) -> RateLimitDecision {
  guard isOn else { return decide() }
  let span = InstrumentationSystem.tracer.startSpan("pace.rate_limit.decide", ofKind: .internal)
  defer { span.end() }
  guard span.isRecording else { return decide() }
  span.attributes["pace.rate_limit.policy"] = "default"
  return decide()
}

/// An awaited decision, as `GateTracing.traced` wraps it: the span is the task's current one.
@inline(never)
func traced(_ decide: () async throws -> RateLimitDecision) async throws -> RateLimitDecision {
  guard isOn else { return try await decide() }
  return try await withSpan("pace.rate_limit.decide", ofKind: .internal) { span in
    guard span.isRecording else { return try await decide() }
    span.attributes["pace.rate_limit.policy"] = "default"
    return try await decide()
  }
}

/// The store's decision, as `PostgresRateLimitStore.tryAcquire` wraps it: started, ended on return.
@inline(never)
func storeTraced(_ decide: () async throws -> RateLimitDecision) async throws -> RateLimitDecision {
  guard isOn else { return try await decide() }
  let span = InstrumentationSystem.tracer.startSpan("pace.rate_limit.store.decide", ofKind: .internal)
  defer { span.end() }
  let recording = span.isRecording
  let decision = try await decide()
  if recording { span.attributes["pace.rate_limit.decision"] = "allowed" }
  return decision
}

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .cpuTotal, .mallocCountTotal],
    warmupIterations: 1,
    scalingFactor: .mega,
    maxDuration: .seconds(5),
    maxIterations: 5
  )

  Benchmark("The check alone: is an instrument bootstrapped") { benchmark in
    for _ in benchmark.scaledIterations { blackHole(isOn) }
  }

  Benchmark("In memory: tryAcquire, untraced") { benchmark in
    let limiter = makeLimiter()
    for call in benchmark.scaledIterations { blackHole(limiter.tryAcquire(keys[call % 1_000]).isAllowed) }
  }

  Benchmark("In memory: tryAcquire in the middleware's span, no tracer") { benchmark in
    let limiter = makeLimiter()
    for call in benchmark.scaledIterations {
      blackHole(tracedAtOnce { limiter.tryAcquire(keys[call % 1_000]) }.isAllowed)
    }
  }

  Benchmark("In memory: tryAcquire in a span without the check, no tracer") { benchmark in
    let limiter = makeLimiter()
    for call in benchmark.scaledIterations {
      blackHole(tracedAtOnceUnchecked { limiter.tryAcquire(keys[call % 1_000]) }.isAllowed)
    }
  }

  Benchmark("Awaited: decide, untraced") { benchmark in
    let limiter = makeLimiter()
    for call in benchmark.scaledIterations { blackHole(try await limiter.decide(keys[call % 1_000]).isAllowed) }
  }

  Benchmark("Awaited: decide in the middleware's span, no tracer") { benchmark in
    let limiter = makeLimiter()
    for call in benchmark.scaledIterations {
      blackHole(try await traced { try await limiter.decide(keys[call % 1_000]) }.isAllowed)
    }
  }

  Benchmark("Awaited: decide in the store's span, no tracer") { benchmark in
    let limiter = makeLimiter()
    for call in benchmark.scaledIterations {
      blackHole(try await storeTraced { try await limiter.decide(keys[call % 1_000]) }.isAllowed)
    }
  }
}
