/// Pacing operators. Like ``_Concurrency/AsyncSequence/debounced(for:edges:maximumWait:merge:clock:)``,
/// an operator that returns a new paced fuser is named with -ed.
extension Fuser where Event: Sendable {
  /// A fuser whose events are this fuser's events debounced, with ``Debouncer``'s exact
  /// semantics and options.
  ///
  /// ```swift
  /// let queries = searchField.debounced(for: .milliseconds(300))   // the text once typing pauses
  /// ```
  ///
  /// Each connection has its own debouncer; disposing the connection drops its pending event.
  ///
  /// - Parameters:
  ///   - interval: How long events must stop before the trailing event. Not negative.
  ///   - edges: Which edges emit: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest an event waits; `nil` (the default) for no bound.
  ///   - merge: How the covered events combine; `.latest` by default.
  ///   - scheduler: Where time is read and events are dispatched; the main queue by default.
  public func debounced(
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    merge: Merge<Event> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Fuser<Event> {
    checkTiming("Fuser.debounced", interval: interval, maximumWait: maximumWait, edges: edges)
    return paced { dispatch in
      let debouncer = Debouncer(
        for: interval, edges: edges, maximumWait: maximumWait, merge: merge, scheduler: scheduler, perform: dispatch
      )
      return (debouncer.call, debouncer.cancel)
    }
  }

  /// A fuser whose events are this fuser's events throttled, with ``Throttler``'s exact
  /// semantics and options: at most one event per `interval`, at a steady cadence.
  ///
  /// ```swift
  /// let offsets = scrollOffsets.throttled(for: .milliseconds(100))
  /// ```
  ///
  /// Each connection has its own throttler; disposing the connection drops its pending event.
  ///
  /// - Parameters:
  ///   - interval: The window length: the least time between events. Not negative.
  ///   - edges: Which edges emit; both by default. Not empty.
  ///   - merge: How the events of a window combine; `.latest` by default.
  ///   - scheduler: Where time is read and events are dispatched; the main queue by default.
  public func throttled(
    for interval: Duration,
    edges: Edges = [.leading, .trailing],
    merge: Merge<Event> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Fuser<Event> {
    checkTiming("Fuser.throttled", interval: interval, edges: edges)
    return paced { dispatch in
      let throttler = Throttler(for: interval, edges: edges, merge: merge, scheduler: scheduler, perform: dispatch)
      return (throttler.call, throttler.cancel)
    }
  }

  /// A fuser whose events are this fuser's events coalesced, with ``Coalescer``'s exact
  /// semantics and options: one event per turn (or `window`), merging everything since the last.
  ///
  /// ```swift
  /// let changes = itemChanged.map { _ in 1 }.coalesced(merge: .sum)   // "5 items changed", once
  /// ```
  ///
  /// Each connection has its own coalescer; disposing the connection drops its pending event.
  ///
  /// - Parameters:
  ///   - window: How long after the first event the merged event comes; `.zero` (the default)
  ///     for the scheduler's next turn. Not negative.
  ///   - merge: How the events combine; `.latest` by default.
  ///   - scheduler: Where the merged events are dispatched; the main queue by default.
  public func coalesced(
    window: Duration = .zero,
    merge: Merge<Event> = .latest,
    scheduler: some PaceScheduler = .main
  ) -> Fuser<Event> {
    checkTiming("Fuser.coalesced", interval: window, parameter: "window")
    return paced { dispatch in
      let coalescer = Coalescer(window: window, merge: merge, scheduler: scheduler, perform: dispatch)
      return (coalescer.signal, coalescer.cancel)
    }
  }

  /// Connects this fuser through a pacing primitive made per connection by `makePacer`, which
  /// returns the primitive's call and cancel functions.
  private func paced(
    _ makePacer:
      @escaping @Sendable (_ dispatch: @escaping @Sendable (Event) -> Void)
      -> (call: @Sendable (Event) -> Void, cancel: @Sendable () -> Void)
  ) -> Fuser<Event> {
    Fuser { dispatch in
      let pacer = makePacer(dispatch)
      let upstream = connect(pacer.call)
      return AnyDisposable {
        upstream.dispose()
        pacer.cancel()
      }
    }
  }
}
