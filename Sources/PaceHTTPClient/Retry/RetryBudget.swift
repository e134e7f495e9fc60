import Pace

/// Retries at most a set fraction of recent requests, as gRPC's and Finagle's retry budgets do:
/// when a server is failing, each client's retries stay a small share of its traffic, so a fleet of
/// clients does not storm a server that is recovering.
///
/// ```swift
/// let budget = RetryBudget(ratio: 0.1, window: .seconds(10), minimumPerSecond: 1)
/// budget.recordRequest()                 // every first attempt
/// if budget.tryWithdraw() { retry() }    // every retry
/// ```
///
/// A retry is allowed while the retries counted in the last `window` are fewer than
/// `minimumPerSecond * window + ratio * requests` counted in the same window (rounded down). The
/// window is counted in ten slices of `window / 10`: a request or a retry counts from its slice's
/// start until ten slices later, so for between 0.9 and 1 `window`.
///
/// Safe from any task.
public final class RetryBudget: Sendable {
  /// One tenth of the window: what was recorded in it.
  struct Slice: Sendable {
    var index: Int64
    var requests: Int
    var retries: Int
  }

  /// The share of recent requests that may be retried.
  public let ratio: Double
  /// How long a request or a retry counts.
  public let window: Duration
  /// The retries allowed per second of the window whatever the requests: a client that sends
  /// little may still retry.
  public let minimumPerSecond: Int

  private let sliceNanoseconds: Int64
  private let now: @Sendable () -> PaceInstant
  private let slices: LockedState<[Slice]>

  /// A budget of `ratio` of recent requests, plus `minimumPerSecond`.
  ///
  /// - Parameters:
  ///   - ratio: The share of recent requests that may be retried; 0.1 by default. Not negative.
  ///   - window: How long a request or a retry counts; 10 s by default. At least 10 ns.
  ///   - minimumPerSecond: Retries allowed per second of the window whatever the requests; 1 by
  ///     default. Not negative.
  ///   - clock: The clock that measures the window: `ContinuousClock` by default, or a
  ///     `TestScheduler`.
  @inlinable
  public convenience init<C: Clock>(
    ratio: Double = 0.1, window: Duration = .seconds(10), minimumPerSecond: Int = 1, clock: C = ContinuousClock()
  ) where C.Duration == Duration {
    self.init(ratio: ratio, window: window, minimumPerSecond: minimumPerSecond, clock: AsyncClock(clock))
  }

  @usableFromInline
  init(ratio: Double, window: Duration, minimumPerSecond: Int, clock: AsyncClock) {
    precondition(ratio >= 0 && ratio.isFinite, "RetryBudget: ratio must be finite and not negative (got \(ratio))")
    precondition(window >= .nanoseconds(10), "RetryBudget: window must be 10 ns or longer (got \(window))")
    precondition(minimumPerSecond >= 0, "RetryBudget: minimumPerSecond must not be negative (got \(minimumPerSecond))")
    self.ratio = ratio
    self.window = window
    self.minimumPerSecond = minimumPerSecond
    sliceNanoseconds = window.paceNanoseconds / 10
    now = clock.now
    slices = LockedState([])
  }

  /// Counts a request's first attempt.
  public func recordRequest() {
    let index = currentSlice()
    slices.withLock { slices in
      Self.drop(&slices, before: index)
      Self.add(&slices, index, requests: 1)
    }
  }

  /// Takes one retry from the budget if it has one; whether it did.
  public func tryWithdraw() -> Bool {
    let index = currentSlice()
    return slices.withLock { slices in
      Self.drop(&slices, before: index)
      guard allowance(slices) > 0 else { return false }
      Self.add(&slices, index, retries: 1)
      return true
    }
  }

  /// How many retries the budget allows now.
  public var availableRetries: Int {
    let index = currentSlice()
    return slices.withLock { slices in
      Self.drop(&slices, before: index)
      return max(0, allowance(slices))
    }
  }

  private func currentSlice() -> Int64 {
    let nanoseconds = now().nanoseconds
    // Floor division: slices before the origin are whole too.
    let (quotient, remainder) = nanoseconds.quotientAndRemainder(dividingBy: sliceNanoseconds)
    return remainder < 0 ? quotient - 1 : quotient
  }

  /// The retries still allowed by `slices`: what the requests earn, less the retries taken.
  private func allowance(_ slices: [Slice]) -> Int {
    let requests = slices.reduce(0) { $0 &+ $1.requests }
    let retries = slices.reduce(0) { $0 &+ $1.retries }
    let seconds = Double(window.paceNanoseconds) / 1e9
    // A hair above, so that 0.1 * 30 counts as the 3 it means.
    let earned = (Double(minimumPerSecond) * seconds + ratio * Double(requests)) * (1 + 1e-12)
    let whole = earned >= 9e18 ? Int.max : Int(earned.rounded(.down))
    return whole - retries
  }

  /// Drops the slices that stopped counting at slice `index`.
  private static func drop(_ slices: inout [Slice], before index: Int64) {
    slices.removeAll {
      let (age, overflow) = index.subtractingReportingOverflow($0.index)
      return overflow || age >= 10 || age < 0
    }
  }

  /// Adds to slice `index`, made if needed.
  private static func add(_ slices: inout [Slice], _ index: Int64, requests: Int = 0, retries: Int = 0) {
    if let last = slices.indices.last, slices[last].index == index {
      slices[last].requests &+= requests
      slices[last].retries &+= retries
    } else {
      slices.append(Slice(index: index, requests: requests, retries: retries))
    }
  }
}
