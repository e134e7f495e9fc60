// The initialisers as released in 0.1.0, before the glossary spelled every maximum out:
// `maxWait:` is `maximumWait:`. `maxWait` has no default here, so a call that names neither label
// reaches the current initialisers alone.
extension Debouncer {
  /// A debouncer that invokes `perform` on `scheduler`.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:perform:)")
  @_disfavoredOverload
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = .main,
    perform: @escaping @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler, perform: perform)
  }

  /// A debouncer that invokes `perform` on the main actor.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:perform:)")
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Value> = .latest,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, perform: perform)
  }

  /// A debouncer that invokes `perform` on the main actor, timed by `scheduler`.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:perform:)")
  @_disfavoredOverload
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler,
    perform: @escaping @MainActor @Sendable (Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler, perform: perform)
  }

  /// A debouncer that invokes `perform` on the main actor with `owner`, while `owner` lives.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:owner:perform:)")
  public convenience init<Owner: AnyObject & Sendable>(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Value> = .latest,
    scheduler: any PaceScheduler = .main,
    owner: Owner,
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
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    scheduler: any PaceScheduler = .main,
    owner: Owner,
    perform: @escaping @MainActor @Sendable (_ owner: Owner) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, scheduler: scheduler, owner: owner, perform: perform)
  }
}
