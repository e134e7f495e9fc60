// The initialisers as released in 0.1.0, before the glossary spelled every maximum out:
// `maxWait:` is `maximumWait:`. `maxWait` has no default here, so a call that names neither label
// reaches the current initialisers alone.
extension AsyncDebouncer {
  /// An async debouncer of `operation`.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:staleWork:clock:operation:)")
  public convenience init<C: Clock>(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel,
    clock: C = ContinuousClock(),
    operation: @escaping @Sendable (Input) async throws -> Output
  ) where C.Duration == Duration {
    self.init(
      for: interval, edges: edges, maximumWait: maxWait, merge: merge, staleWork: staleWork, clock: clock,
      operation: operation)
  }

  /// An async debouncer of `operation` on `owner`, while `owner` lives.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:staleWork:clock:owner:operation:)")
  public convenience init<C: Clock, Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Input> = .latest,
    staleWork: StaleWork = .cancel,
    clock: C = ContinuousClock(),
    owner: Owner,
    operation: @escaping @Sendable (_ owner: Owner, _ input: Input) async throws -> Output
  ) where C.Duration == Duration {
    self.init(
      for: interval, edges: edges, maximumWait: maxWait, merge: merge, staleWork: staleWork, clock: clock,
      owner: owner, operation: operation)
  }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
  /// The sequence debounced: as released in 0.1.0, before the glossary spelled every maximum out.
  @available(*, deprecated, renamed: "debounced(for:edges:maximumWait:merge:clock:)")
  public func debounced<C: Clock>(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Element> = .latest,
    clock: C = ContinuousClock()
  ) -> AsyncDebouncedSequence<Self> where C.Duration == Duration {
    debounced(for: interval, edges: edges, maximumWait: maxWait, merge: merge, clock: clock)
  }
}
