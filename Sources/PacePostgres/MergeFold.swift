#if PostgreSQL
import Pace

extension Merge {
  /// Folds `values` in order, as Pace's primitives fold the calls an invocation covers.
  ///
  /// `Merge` keeps its fold internal to Pace, so this folds through Pace's own `Coalescer` on a
  /// `TestScheduler`: each value is signalled, one synchronous `run()` delivers the merge. The policy
  /// is then applied exactly as in process, at the cost of a few allocations per execution (not per call).
  func fold(_ values: [Value]) async -> Value? {
    guard !values.isEmpty else { return nil }
    let (merged, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(1))
    let scheduler = TestScheduler()
    let coalescer = Coalescer<Value>(merge: self, scheduler: scheduler) { continuation.yield($0) }
    for value in values { coalescer.signal(value) }
    scheduler.run()
    continuation.finish()
    for await value in merged { return value }
    return nil
  }
}
#endif
