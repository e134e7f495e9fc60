import Foundation
import Pace

/// Something a marble diagram can drive: a Pace primitive, or your own code behind
/// ``MarbleInput/calls(_:)``.
///
/// The runner hands it every input event at the event's instant, after the scheduler has run
/// the work due then. `Debouncer`, `Throttler` and `Coalescer` conform when their value is
/// `LosslessStringConvertible` (`String`, `Int`, ...):
///
/// | Input token | Pace primitive |
/// | ----------- | -------------- |
/// | a value | `call(value)` (`signal` for a coalescer) |
/// | `\|` | `flush()`; then the output finishes |
/// | `^` | `cancel()`; then the output fails |
/// | `;` | `cancel()` |
public protocol MarbleInput {
  /// Handles one input event. Throwing stops the run with ``MarbleRunError/inputRejected(step:event:reason:)``.
  func receive(_ event: MarbleEvent) throws
}

/// An input that hands each value to a closure: your own code under test.
public struct MarbleCalls: MarbleInput {
  private let onValue: (String) -> Void
  private let onCancel: () -> Void

  /// An input that calls `onValue` with each value and `onCancel` on `;` and `^`.
  public init(_ onValue: @escaping (String) -> Void, onCancel: @escaping () -> Void = {}) {
    self.onValue = onValue
    self.onCancel = onCancel
  }

  public func receive(_ event: MarbleEvent) {
    switch event {
    case .value(let value): onValue(value)
    case .cancel, .failure: onCancel()
    case .finish: break
    }
  }
}

extension MarbleInput where Self == MarbleCalls {
  /// An input that calls `body` with each value of the diagram:
  /// `.calls { model.queryChanged($0) }` where the type is known, or `MarbleCalls { ... }`.
  public static func calls(_ body: @escaping (String) -> Void) -> MarbleCalls {
    MarbleCalls(body)
  }
}

/// The value a marble could not be turned into.
public struct MarbleValueConversionError: Error, CustomStringConvertible {
  /// The marble value.
  public var value: String
  /// The type it should have become.
  public var type: String

  public var description: String { "'\(value)' is not a valid \(type)" }
}

private func convert<Value: LosslessStringConvertible>(_ text: String, to: Value.Type) throws -> Value {
  guard let value = Value(text) else { throw MarbleValueConversionError(value: text, type: "\(Value.self)") }
  return value
}

/// What Pace's primitives do with each event: a value goes to `deliver` (`call` or `signal`),
/// `|` flushes, `^` and `;` cancel.
private func drive<Value: LosslessStringConvertible>(
  _ event: MarbleEvent, deliver: (Value) -> Void, flush: () -> Void, cancel: () -> Void
) throws {
  switch event {
  case .value(let text): deliver(try convert(text, to: Value.self))
  case .finish: flush()
  case .failure, .cancel: cancel()
  }
}

extension Debouncer: MarbleInput where Value: LosslessStringConvertible {
  /// A value calls, `|` flushes, `^` and `;` cancel.
  public func receive(_ event: MarbleEvent) throws { try drive(event, deliver: call, flush: flush, cancel: cancel) }
}

extension Throttler: MarbleInput where Value: LosslessStringConvertible {
  /// A value calls, `|` flushes, `^` and `;` cancel.
  public func receive(_ event: MarbleEvent) throws { try drive(event, deliver: call, flush: flush, cancel: cancel) }
}

extension Coalescer: MarbleInput where Value: LosslessStringConvertible {
  /// A value signals, `|` flushes, `^` and `;` cancel.
  public func receive(_ event: MarbleEvent) throws { try drive(event, deliver: signal, flush: flush, cancel: cancel) }
}

/// What the code under test gets from the runner: a `TestScheduler` to run on and
/// ``emit(_:)`` to record its output.
///
/// ```swift
/// let run = try MarbleRunner.run("a-b-c------d", stepLength: .milliseconds(100)) { marbles in
///   Debouncer<String>(for: .milliseconds(300), scheduler: marbles.scheduler) { marbles.emit($0) }
/// }
/// // or, for the primitives: { $0.debouncer(for: .milliseconds(300)) }
/// ```
public final class MarbleHarness: Sendable {
  /// The virtual-time scheduler the run advances; hand it to the code under test.
  public let scheduler: TestScheduler
  /// The instant of step 0.
  public let origin: PaceInstant
  /// How long a step is.
  public let stepLength: Duration
  private let recorded = MarbleRecorder()

  init(scheduler: TestScheduler, stepLength: Duration) {
    self.scheduler = scheduler
    self.origin = scheduler.now
    self.stepLength = stepLength
  }

  /// Records `value` on the output at the scheduler's current time.
  public func emit(_ value: some CustomStringConvertible) {
    recorded.append(MarbleTimeline<String>.Event(instant: scheduler.now, value: value.description))
  }

  /// The output recorded so far.
  public var output: [MarbleTimeline<String>.Event] { recorded.events }

  // The pacers below capture the runner strongly on purpose: the runner never stores them (the
  // caller holds the pacer for the run), so there is no cycle, and the output must outlive the
  // caller's last reference to the runner while the pacer still has invocations to make.

  /// A `Debouncer<String>` on this run's scheduler whose invocations are the output.
  public func debouncer(
    for interval: Duration, edges: Edges = .trailing, maximumWait: Duration? = nil, merge: Merge<String> = .latest
  ) -> Debouncer<String> {
    Debouncer(for: interval, edges: edges, maximumWait: maximumWait, merge: merge, scheduler: scheduler) {
      self.emit($0)
    }
  }

  /// As released in 0.1.0, before the glossary spelled every maximum out.
  @available(*, deprecated, renamed: "debouncer(for:edges:maximumWait:merge:)")
  public func debouncer(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<String> = .latest
  ) -> Debouncer<String> {
    debouncer(for: interval, edges: edges, maximumWait: maxWait, merge: merge)
  }

  /// A `Throttler<String>` on this run's scheduler whose invocations are the output.
  public func throttler(
    for interval: Duration, edges: Edges = [.leading, .trailing], merge: Merge<String> = .latest
  ) -> Throttler<String> {
    Throttler(for: interval, edges: edges, merge: merge, scheduler: scheduler) { self.emit($0) }
  }

  /// A `Coalescer<String>` on this run's scheduler whose runs are the output.
  public func coalescer(window: Duration = .zero, merge: Merge<String> = .latest) -> Coalescer<String> {
    Coalescer(window: window, merge: merge, scheduler: scheduler) { self.emit($0) }
  }
}

/// The recorded output; emitted from `perform`, which a thread-safe primitive may call from
/// whichever thread advances the scheduler.
private final class MarbleRecorder: Sendable {
  private let storage = LockedState<[MarbleTimeline<String>.Event]>([])

  func append(_ event: MarbleTimeline<String>.Event) {
    storage.withLock { $0.append(event) }
  }

  var events: [MarbleTimeline<String>.Event] {
    storage.withLock { $0 }
  }
}

/// The result of feeding a diagram through code on virtual time.
public struct MarbleRun: Sendable {
  /// The input diagram.
  public var input: MarbleDiagram
  /// What the code emitted, with exact instants relative to ``origin``'s timeline.
  public var output: MarbleTimeline<String>
  /// How long a step is.
  public var stepLength: Duration
  /// The instant of step 0.
  public var origin: PaceInstant

  /// The output in marble notation on the input's grid.
  ///
  /// - Parameter offGrid: What to do with an output between two steps: an error by default.
  public func outputDiagram(offGrid: OffGridHandling = .reject) throws(MarbleRenderError) -> MarbleDiagram {
    try output.diagram(stepLength: stepLength, origin: origin, offGrid: offGrid)
  }
}

/// Why a run could not happen.
public enum MarbleRunError: Error, CustomStringConvertible {
  /// The input diagram does not parse.
  case syntax(MarbleSyntaxError)
  /// Neither the diagram's `step:` header nor the `stepLength` parameter says how long a step is.
  case missingStepLength
  /// The header and the parameter disagree.
  case conflictingStepLength(header: Duration, parameter: Duration)
  /// The step length is zero or negative.
  case nonPositiveStepLength(Duration)
  /// The input threw on an event, for example a value that is not a number for a `Debouncer<Int>`.
  case inputRejected(step: Int, event: MarbleEvent, reason: any Error)
  /// The diagram reaches past the last instant a `PaceInstant` holds (`Int64.max` nanoseconds,
  /// about 292 years from the origin).
  case tooLong(steps: Int, stepLength: Duration)

  public var description: String {
    switch self {
    case .syntax(let error): "malformed marble diagram, \(error)"
    case .missingStepLength: "no step length: add a 'step: 100ms' header or pass stepLength:"
    case .conflictingStepLength(let header, let parameter):
      "the diagram's header says step: \(DurationText.format(header)) but stepLength is \(DurationText.format(parameter))"
    case .nonPositiveStepLength(let length):
      "the step length must be longer than zero (got \(DurationText.format(length)))"
    case .inputRejected(let step, let event, let reason): "step \(step) (\(event)): \(reason)"
    case .tooLong(let steps, let stepLength):
      "\(steps) steps of \(DurationText.format(stepLength)) reach past the last instant a PaceInstant holds "
        + "(\(DurationText.format(DurationText.maximum)), about 292 years): use a shorter step length"
    }
  }
}

/// Feeds marble diagrams through code on a `TestScheduler` and records what comes out.
public enum MarbleRunner {
  /// Runs `input` through the code that `build` sets up and records its output.
  ///
  /// For each step `k` with events, the runner moves the scheduler to `origin + k * stepLength`
  /// with `advance(to:)` (so timers due then fire first) and hands the step's events to the
  /// input in order, without advancing in between: a group is one turn, so work its events
  /// schedule for that instant runs after all of them. Then it keeps running scheduled work, at most `settlingSteps` steps past
  /// the input, so the last trailing invocations land. A `|` or `^` on the input ends the
  /// output at that instant, after the input has handled it (Pace's primitives flush on `|`),
  /// and nothing runs after it.
  ///
  /// ```swift
  /// let run = try MarbleRunner.run("a-b-c------d", stepLength: .milliseconds(100)) {
  ///   $0.debouncer(for: .milliseconds(300))
  /// }
  /// try run.outputDiagram().description   // "-------c------d"
  /// ```
  ///
  /// - Parameters:
  ///   - input: The input diagram; its `step:` header, if any, says how long a step is.
  ///   - stepLength: How long a step is, if the diagram has no header.
  ///   - scheduler: The scheduler to run on; step 0 is its current time.
  ///   - settlingSteps: How far past the input's last step scheduled work may still run.
  ///   - build: Sets up the code under test on the harness's scheduler and returns its input.
  public static func run<Input: MarbleInput>(
    _ input: String,
    stepLength: Duration? = nil,
    scheduler: TestScheduler = TestScheduler(),
    settlingSteps: Int = 10_000,
    through build: (MarbleHarness) throws -> Input
  ) throws -> MarbleRun {
    let diagram: MarbleDiagram
    do {
      diagram = try MarbleDiagram(input)
    } catch {
      throw MarbleRunError.syntax(error)
    }
    return try run(diagram, stepLength: stepLength, scheduler: scheduler, settlingSteps: settlingSteps, through: build)
  }

  /// Runs a parsed `input` diagram; see ``run(_:stepLength:scheduler:settlingSteps:through:)-(String,_,_,_,_)``.
  public static func run<Input: MarbleInput>(
    _ input: MarbleDiagram,
    stepLength: Duration? = nil,
    scheduler: TestScheduler = TestScheduler(),
    settlingSteps: Int = 10_000,
    through build: (MarbleHarness) throws -> Input
  ) throws -> MarbleRun {
    let length = try resolveStepLength(header: input.stepLength, parameter: stepLength)
    let origin = scheduler.now
    // Every input instant must be a real one: the last instant, Int64.max, is where saturated
    // deadlines pile up, and nothing may happen there.
    let (span, spanOverflow) = length.paceNanoseconds.multipliedReportingOverflow(by: Int64(input.length))
    let (last, lastOverflow) = origin.nanoseconds.addingReportingOverflow(span)
    guard !spanOverflow, !lastOverflow, last < .max else {
      throw MarbleRunError.tooLong(steps: input.length, stepLength: length)
    }
    let harness = MarbleHarness(scheduler: scheduler, stepLength: length)
    let target = try build(harness)

    var end: MarbleTimeline<String>.End?
    var currentStep = -1
    for entry in input.events {
      let instant = origin.advanced(by: length * entry.step)
      // One advance per step: the events of a group happen in one turn, so work they schedule
      // for this instant (a coalescer's next turn) runs after all of them.
      if entry.step != currentStep {
        scheduler.advance(to: instant)
        currentStep = entry.step
      }
      do {
        try target.receive(entry.event)
      } catch {
        throw MarbleRunError.inputRejected(step: entry.step, event: entry.event, reason: error)
      }
      if entry.event == .finish { end = .finished(at: instant) }
      if entry.event == .failure { end = .failed(at: instant) }
      if end != nil { break }
    }
    if end == nil {
      // Settling stops short of the saturated last instant: a timer armed at "never" never fires.
      let steps = Int64(input.length) + Int64(min(max(settlingSteps, 0), Int(Int32.max)))
      let (settlingSpan, spanOverflow) = length.paceNanoseconds.multipliedReportingOverflow(by: steps)
      let (end, endOverflow) = origin.nanoseconds.addingReportingOverflow(settlingSpan)
      let limit = PaceInstant(nanoseconds: spanOverflow || endOverflow ? .max - 1 : min(end, .max - 1))
      scheduler.advance(to: max(scheduler.now, origin.advanced(by: length * max(input.length - 1, 0))))
      while let next = scheduler.nextDeadline, next <= limit {
        scheduler.advance(to: max(next, scheduler.now))
      }
    }
    return MarbleRun(
      input: input, output: MarbleTimeline(harness.output, end: end), stepLength: length, origin: origin)
  }

  static func resolveStepLength(header: Duration?, parameter: Duration?) throws(MarbleRunError) -> Duration {
    let length: Duration
    switch (header, parameter) {
    case (nil, nil): throw .missingStepLength
    case (let header?, let parameter?) where header != parameter:
      throw .conflictingStepLength(header: header, parameter: parameter)
    case (let header?, _): length = header
    case (nil, let parameter?): length = parameter
    }
    guard length > .zero else { throw .nonPositiveStepLength(length) }
    return length
  }
}
