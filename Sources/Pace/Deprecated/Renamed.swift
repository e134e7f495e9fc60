import Dispatch

// Names released in 0.1.0-0.3.0 that the glossary (CONTRIBUTING.md) renamed, kept so that code
// written against them compiles, each deprecated with a `renamed:` fix-it. They only forward, so
// they are written compactly, in one place. A renamed label has no default here, so a call that
// names neither label reaches the current declaration alone.

// MARK: "policy" is a named limit alone: how permits are counted is the algorithm.

extension RateLimit {
  /// How a limit counts the permits it grants.
  @available(*, deprecated, renamed: "Algorithm")
  public typealias Policy = Algorithm

  /// How the permits are counted.
  @available(*, deprecated, renamed: "algorithm")
  public var policy: Algorithm { algorithm }

  /// At most `permits` in any `window`: an exact sliding window.
  @available(*, deprecated, renamed: "slidingWindow(permits:per:)")
  public static func slidingWindow(_ permits: Int, per window: Duration) -> RateLimit {
    slidingWindow(permits: permits, per: window)
  }

  /// At most `permits` per `window`, the windows aligned to the clock.
  @available(*, deprecated, renamed: "fixedWindow(permits:per:)")
  public static func fixedWindow(_ permits: Int, per window: Duration) -> RateLimit {
    fixedWindow(permits: permits, per: window)
  }

  /// A limit from values read at run time, checked with a thrown error rather than a trap.
  @available(*, deprecated, renamed: "validated(permits:per:burst:algorithm:)")
  public static func validated(permits: Int, per interval: Duration, burst: Int? = nil, policy: Algorithm)
    throws(RateLimitError) -> RateLimit
  { try validated(permits: permits, per: interval, burst: burst, algorithm: policy) }
}

/// The rules for keys and costs that come from requests.
@available(*, deprecated, renamed: "InputRules")
public typealias KeyPolicy = InputRules

extension InputRules {
  /// The longest key accepted, in bytes of UTF-8.
  @available(*, deprecated, renamed: "maximumKeyBytes")
  public static var maximumBytes: Int { maximumKeyBytes }
}

// MARK: Maximums are spelled out: a debounce's `maxWait:` (lodash's name) is `maximumWait:`.

extension Debouncer {
  /// A debouncer that invokes `perform` on `scheduler`.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:perform:)")
  @_disfavoredOverload
  public convenience init(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main, perform: @escaping @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler, perform: perform)
  }

  /// A debouncer that invokes `perform` on the main actor.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:perform:)")
  public convenience init(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Value> = .latest,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) { self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, perform: perform) }

  /// A debouncer that invokes `perform` on the main actor, timed by `scheduler`.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:perform:)")
  @_disfavoredOverload
  public convenience init(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler, perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler, perform: perform)
  }

  /// A debouncer that invokes `perform` on the main actor with `owner`, while `owner` lives.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:owner:perform:)")
  public convenience init<Owner: AnyObject & Sendable>(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler = .main, owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner, _ value: Value) -> Void
  ) {
    self.init(
      for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler, owner: owner,
      perform: perform)
  }
}

extension Debouncer where Value == Void {
  /// A debouncer of calls without a value that invokes `perform` on the main actor with `owner`.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:scheduler:owner:perform:)")
  public convenience init<Owner: AnyObject & Sendable>(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, scheduler: any PaceScheduler = .main,
    owner: Owner, perform: @escaping @MainActor @Sendable (_ owner: Owner) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, scheduler: scheduler, owner: owner, perform: perform)
  }
}

extension KeyedDebouncer {
  /// A debouncer per key.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:perform:)")
  public convenience init(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = DispatchScheduler.queue(DispatchQueue(label: "Pace.KeyedDebouncer")),
    perform: @escaping @Sendable (Key, Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler, perform: perform)
  }
}

extension AsyncDebouncer {
  /// An async debouncer of `operation`.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:staleWork:clock:operation:)")
  public convenience init<C: Clock>(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel, clock: C = ContinuousClock(),
    operation: @escaping @Sendable (Input) async throws -> Output
  ) where C.Duration == Duration {
    self.init(
      for: interval, edges: edges, maximumWait: maxWait, merge: merge, staleWork: staleWork, clock: clock,
      operation: operation)
  }

  /// An async debouncer of `operation` on `owner`, while `owner` lives.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:staleWork:clock:owner:operation:)")
  public convenience init<C: Clock, Owner: AnyObject & Sendable>(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel, clock: C = ContinuousClock(), owner: Owner,
    operation: @escaping @Sendable (_ owner: Owner, _ input: Input) async throws -> Output
  ) where C.Duration == Duration {
    self.init(
      for: interval, edges: edges, maximumWait: maxWait, merge: merge, staleWork: staleWork, clock: clock,
      owner: owner, operation: operation)
  }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
  /// The sequence debounced.
  @available(*, deprecated, renamed: "debounced(for:edges:maximumWait:merge:clock:)")
  public func debounced<C: Clock>(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Element> = .latest,
    clock: C = ContinuousClock()
  ) -> AsyncDebouncedSequence<Self> where C.Duration == Duration {
    debounced(for: interval, edges: edges, maximumWait: maxWait, merge: merge, clock: clock)
  }
}

extension Fuser where Event: Sendable {
  /// The fuser debounced.
  @available(*, deprecated, renamed: "debounced(for:edges:maximumWait:merge:scheduler:)")
  public func debounced(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration?, merge: Merge<Event> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Fuser<Event> { debounced(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler) }

  // The seed's operator names, before the past participles of 0.1.0.

  /// The old name of ``debounced(for:edges:maximumWait:merge:scheduler:)``.
  @available(*, deprecated, renamed: "debounced(for:edges:maximumWait:merge:scheduler:)")
  public func debounce(
    for interval: Duration, edges: Edges = .trailing, maxWait: Duration? = nil, merge: Merge<Event> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Fuser<Event> { debounced(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler) }

  /// The old name of ``throttled(for:edges:merge:scheduler:)``.
  @available(*, deprecated, renamed: "throttled(for:edges:merge:scheduler:)")
  public func throttle(
    for interval: Duration, edges: Edges = [.leading, .trailing], merge: Merge<Event> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Fuser<Event> { throttled(for: interval, edges: edges, merge: merge, scheduler: scheduler) }

  /// The old name of ``coalesced(window:merge:scheduler:)``.
  @available(*, deprecated, renamed: "coalesced(window:merge:scheduler:)")
  public func coalesce(window: Duration = .zero, merge: Merge<Event> = .latest, scheduler: some PaceScheduler = .main)
    -> Fuser<Event>
  { coalesced(window: window, merge: merge, scheduler: scheduler) }
}

// MARK: A question about one key (or target) takes `for:`.

extension KeyedDebouncer {
  /// Whether an invocation is waiting to happen for `key`.
  @available(*, deprecated, renamed: "isPending(for:)")
  public func isPending(_ key: Key) -> Bool { isPending(for: key) }
}

extension KeyedThrottler {
  /// Whether a trailing invocation is waiting to happen for `key`.
  @available(*, deprecated, renamed: "isPending(for:)")
  public func isPending(_ key: Key) -> Bool { isPending(for: key) }
}

extension UpdateCoalescer {
  /// Whether `target` is waiting for an update.
  @available(*, deprecated, renamed: "isPending(for:)")
  @MainActor public func isPending(_ target: Target) -> Bool { isPending(for: target) }
}

// MARK: A time source a task sleeps on is a `clock:`; maximums are spelled out (Batcher).

extension Task where Failure == Never {
  /// Starts `operation` in a new task that a ``TestScheduler`` given as `clock` follows.
  @available(*, deprecated, renamed: "init(clock:priority:operation:)")
  @discardableResult
  public init<C: Clock>(
    trackedBy clock: C, priority: TaskPriority? = nil,
    @_inheritActorContext operation: sending @escaping @isolated(any) () async -> Success
  ) where C.Duration == Duration { self.init(clock: clock, priority: priority, operation: operation) }
}

extension Task where Failure == any Error {
  /// Starts throwing `operation` in a new task that a ``TestScheduler`` given as `clock` follows.
  @available(*, deprecated, renamed: "init(clock:priority:operation:)")
  @discardableResult
  public init<C: Clock>(
    trackedBy clock: C, priority: TaskPriority? = nil,
    @_inheritActorContext operation: sending @escaping @isolated(any) () async throws -> Success
  ) where C.Duration == Duration { self.init(clock: clock, priority: priority, operation: operation) }
}

extension OwnedTasks {
  /// An empty set of tasks that a ``TestScheduler`` given as `clock` follows.
  @available(*, deprecated, renamed: "init(clock:)")
  public convenience init<C: Clock>(trackedBy clock: C) where C.Duration == Duration {
    self.init(clock: clock)
  }
}

extension Batcher where Item: Hashable {
  /// A batcher sending with `send`, which returns each item's output.
  @available(
    *, deprecated,
    renamed: "init(maximumCount:maximumWait:maximumInFlight:bufferCapacity:overflow:clock:onFailure:send:)"
  )
  public convenience init<C: Clock>(
    maxCount: Int, maxWait: Duration, maxInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    send: @escaping @Sendable ([Item]) async throws -> [Item: Output]
  ) where C.Duration == Duration {
    self.init(
      maximumCount: maxCount, maximumWait: maxWait, maximumInFlight: maxInFlight, bufferCapacity: bufferCapacity,
      overflow: overflow, clock: clock, send: send)
  }
}

extension Batcher where Item: Hashable, Output == Void {
  /// A batcher for items that have no output: `send` delivers a batch or throws.
  @available(
    *, deprecated,
    renamed: "init(maximumCount:maximumWait:maximumInFlight:bufferCapacity:overflow:clock:onFailure:send:)"
  )
  public convenience init<C: Clock>(
    maxCount: Int, maxWait: Duration, maxInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    send: @escaping @Sendable ([Item]) async throws -> Void
  ) where C.Duration == Duration {
    self.init(
      maximumCount: maxCount, maximumWait: maxWait, maximumInFlight: maxInFlight, bufferCapacity: bufferCapacity,
      overflow: overflow, clock: clock, send: send)
  }
}
