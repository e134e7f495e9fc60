import Pace

#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif

extension Publisher where Output: Sendable {
  /// Republishes elements once they stop for `interval`, with `Debouncer`'s exact
  /// semantics: leading and trailing edges, `maximumWait`, merged values, on any `PaceScheduler`.
  ///
  /// ```swift
  /// $query
  ///   .debounced(for: .milliseconds(300), maximumWait: .seconds(1))
  ///   .sink { search($0) }
  /// ```
  ///
  /// Unlike Combine's `debounce(for:scheduler:)`, a value still pending when the upstream
  /// finishes or fails is delivered before the completion. An invocation that meets no demand
  /// is held, and later invocations merge into it until demand arrives, so with `.append` no
  /// element is lost. Upstream is requested `.unlimited`, so the operator sees its own timing.
  ///
  /// - Parameters:
  ///   - interval: How long elements must stop before the trailing element. Not negative.
  ///   - edges: Which edges publish: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest an element waits; `nil` (the default) for no bound.
  ///   - merge: How the covered elements combine; `.latest` by default.
  ///   - scheduler: Where time is read and timers fire; the main queue by default.
  public func debounced(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Output> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Publishers.Paced<Self> {
    let machine = PacingMachine.debounce(
      "Publisher.debounced", interval: interval, edges: edges, maximumWait: maximumWait, merge: merge
    )
    return Publishers.Paced(upstream: self, machine: machine, scheduler: scheduler)
  }

  /// Republishes at most one element per `interval`, at a steady cadence, with
  /// `Throttler`'s exact semantics.
  ///
  /// ```swift
  /// scrollOffsets
  ///   .throttled(for: .milliseconds(100))
  ///   .sink { render($0) }
  /// ```
  ///
  /// Completion, failure and demand behave as in `Publisher.debounced(for:edges:maximumWait:merge:scheduler:)`.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between elements. Not negative.
  ///   - edges: Which edges publish; both by default. Not empty.
  ///   - merge: How the elements of a window combine; `.latest` by default.
  ///   - scheduler: Where time is read and timers fire; the main queue by default.
  public func throttled(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Output> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Publishers.Paced<Self> {
    let machine = PacingMachine.throttle("Publisher.throttled", interval: interval, edges: edges, merge: merge)
    return Publishers.Paced(upstream: self, machine: machine, scheduler: scheduler)
  }
}

extension Publisher where Output: Sendable {
  /// Republishes the elements of one turn of `scheduler` as one merged element, with
  /// `Coalescer`'s semantics: several `@Published` changes made together arrive once.
  ///
  /// ```swift
  /// model.$filters.combineLatest(model.$sort)
  ///   .coalesced()                       // one reload when both change in one turn
  ///   .sink { reload($0, $1) }
  /// ```
  ///
  /// The first element schedules one delivery on the scheduler's next turn (or `window` later);
  /// the elements until then merge. Completion, failure and demand behave as in
  /// `Publisher.debounced(for:edges:maximumWait:merge:scheduler:)`.
  ///
  /// - Parameters:
  ///   - window: How long after the first element the delivery happens; `.zero` (the default)
  ///     for the scheduler's next turn. Not negative.
  ///   - merge: How the elements combine; `.latest` by default.
  ///   - scheduler: Where time is read and deliveries are scheduled; the main queue by default.
  public func coalesced(
    window: Duration = .zero,
    merge: Merge<Output> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Publishers.Paced<Self> {
    let machine = PacingMachine.coalesce("Publisher.coalesced", window: window, merge: merge)
    return Publishers.Paced(upstream: self, machine: machine, scheduler: scheduler)
  }
}

extension Publishers {
  /// A publisher that paces its upstream with one of Pace's machines: what
  /// `Publisher.debounced(for:edges:maximumWait:merge:scheduler:)`,
  /// `Publisher.throttled(for:edges:merge:scheduler:)` and
  /// `Publisher.coalesced(window:merge:scheduler:)` return.
  ///
  /// Each subscription has its own machine and timer.
  public struct Paced<Upstream: Publisher>: Publisher where Upstream.Output: Sendable {
    public typealias Output = Upstream.Output
    public typealias Failure = Upstream.Failure

    /// The publisher being paced.
    public let upstream: Upstream
    let machine: PacingMachine<Output>
    let scheduler: any PaceScheduler

    init(upstream: Upstream, machine: PacingMachine<Output>, scheduler: any PaceScheduler) {
      self.upstream = upstream
      self.machine = machine
      self.scheduler = scheduler
    }

    public func receive<Downstream: Subscriber>(subscriber: Downstream)
    where Downstream.Input == Output, Downstream.Failure == Failure {
      let subscription = PacedSubscription<Upstream, Downstream>(
        downstream: subscriber, machine: machine, scheduler: scheduler
      )
      upstream.subscribe(subscription)
    }
  }
}

extension Publisher where Output: Sendable {
  /// As released in 0.1.0, before the glossary spelled every maximum out: `maxWait:` is
  /// `maximumWait:`.
  @available(*, deprecated, renamed: "debounced(for:edges:maximumWait:merge:scheduler:)")
  public func debounced(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Output> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Publishers.Paced<Self> {
    debounced(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler)
  }
}
