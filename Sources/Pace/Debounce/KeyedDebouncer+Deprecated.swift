import Dispatch

// The initialiser as released in 0.2.0, before the glossary spelled every maximum out:
// `maxWait:` is `maximumWait:`. `maxWait` has no default here, so a call that names neither label
// reaches the current initialiser alone.
extension KeyedDebouncer {
  /// A debouncer per key.
  @available(*, deprecated, renamed: "init(for:edges:maximumWait:merge:scheduler:perform:)")
  public convenience init(
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    merge: Merge<Value> = .latest,
    scheduler: some PaceScheduler = DispatchScheduler.queue(DispatchQueue(label: "Pace.KeyedDebouncer")),
    perform: @escaping @Sendable (Key, Value) -> Void
  ) {
    self.init(for: interval, edges: edges, maximumWait: maxWait, merge: merge, scheduler: scheduler, perform: perform)
  }
}
