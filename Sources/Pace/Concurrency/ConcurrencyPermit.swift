/// A place among a concurrency limiter's calls in flight, held from ``ConcurrencyLimiter/acquire(priority:isolation:)``
/// (or its keyed and non-waiting forms) until ``release()``: for work whose end is not the end of
/// a scope, such as a response whose body is written after the handler returns.
///
/// Release it once the work is over, on every path (written, failed, connection dropped).
/// Releasing it again does nothing, so every path may release it. A permit that is never released
/// is released when it is deallocated, and counted in the limiter's `forgottenPermitCount`: until
/// then its place is taken, and a count above zero is a bug in the caller to find.
///
/// Where the work is one scope, prefer the limiter's `withPermit`, which cannot leak a permit.
public class ConcurrencyPermit: @unchecked Sendable {
  // @unchecked Sendable: `isReleased` is read and written only under the issuing limiter's lock.
  /// The class the permit was admitted as.
  public let priority: AdmissionPriority
  /// Whether the permit has been released; under the issuing limiter's lock.
  var isReleased = false

  init(priority: AdmissionPriority) {
    self.priority = priority
  }

  /// Gives the place back: the next waiting call may be admitted. Idempotent: a second release
  /// does nothing.
  public func release() {
    // Every permit is a `LimiterPermit`, which releases to its limiter.
  }
}

/// A permit of one ``ConcurrencyLimiterEngine``, for one key.
final class LimiterPermit<Key: Hashable & Sendable>: ConcurrencyPermit, @unchecked Sendable {
  // @unchecked Sendable: as its superclass; `engine` and `key` are constants.
  let engine: ConcurrencyLimiterEngine<Key>
  let key: Key

  init(engine: ConcurrencyLimiterEngine<Key>, key: Key, priority: AdmissionPriority) {
    self.engine = engine
    self.key = key
    super.init(priority: priority)
  }

  override func release() {
    engine.release(self, forgotten: false)
  }

  deinit {
    engine.release(self, forgotten: true)
  }
}
