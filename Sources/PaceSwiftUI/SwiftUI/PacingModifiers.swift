#if PACE_SWIFTUI_STAND_IN
import SwiftUIStandIn
#elseif canImport(SwiftUI)
import SwiftUI
#endif

#if PACE_SWIFTUI_STAND_IN || canImport(SwiftUI)
import Pace

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension View {
  /// Runs `action` with the new value once `value` has stopped changing for `interval`, with
  /// ``Pace/Debouncer``'s semantics.
  ///
  /// ```swift
  /// .onChange(of: query, debounce: .milliseconds(300)) { search($0) }
  /// ```
  ///
  /// The view's pending invocation is dropped when the view disappears.
  ///
  /// - Parameters:
  ///   - value: The value to watch, as with `onChange(of:)`.
  ///   - interval: How long changes must stop before the trailing invocation. Not negative.
  ///   - edges: Which edges invoke: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a change waits; `nil` (the default) for no bound.
  ///   - control: Flush and cancel from elsewhere in the view; optional.
  ///   - scheduler: Where time is read and `action` runs; the main queue (the default), or a
  ///     `TestScheduler` in tests. It must run work on the main thread.
  ///   - action: Runs with the latest value.
  public func onChange<V: Equatable & Sendable>(
    of value: V,
    debounce interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    control: PacingControl? = nil,
    scheduler: some PaceScheduler = .main,
    _ action: @escaping (_ newValue: V) -> Void
  ) -> some View {
    modifier(
      PacedChangeModifier(
        value: value, pacing: .debounce(interval, edges: edges, maximumWait: maximumWait), control: control,
        scheduler: scheduler, action: action
      )
    )
  }

  /// Runs `action` with the new value at most once per `interval` while `value` changes, with
  /// ``Pace/Throttler``'s semantics: a steady cadence, the latest value at each window's end.
  ///
  /// ```swift
  /// .onChange(of: dragLocation, throttle: .milliseconds(100)) { sendToPeer($0) }
  /// ```
  ///
  /// - Parameters:
  ///   - value: The value to watch, as with `onChange(of:)`.
  ///   - interval: The window length: the least time between invocations. Not negative.
  ///   - edges: Which edges invoke; both by default. Not empty.
  ///   - control: Flush and cancel from elsewhere in the view; optional.
  ///   - scheduler: Where time is read and `action` runs; the main queue by default.
  ///   - action: Runs with the latest value.
  public func onChange<V: Equatable & Sendable>(
    of value: V,
    throttle interval: Duration,
    edges: Edges = [.leading, .trailing],
    control: PacingControl? = nil,
    scheduler: some PaceScheduler = .main,
    _ action: @escaping (_ newValue: V) -> Void
  ) -> some View {
    modifier(
      PacedChangeModifier(
        value: value, pacing: .throttle(interval, edges: edges), control: control, scheduler: scheduler,
        action: action
      )
    )
  }

  /// Runs `action` before the view appears and again once `id` has stopped changing for
  /// `interval`; like `task(id:)`, the running work is cancelled when `id` changes (at once,
  /// since its result is stale) and when the view disappears.
  ///
  /// ```swift
  /// .task(id: query, debounce: .milliseconds(300)) {
  ///   results = (try? await api.search(query)) ?? []
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - id: The value to watch, as with `task(id:)`.
  ///   - interval: How long `id` must stop changing before the work starts again. Not negative.
  ///   - edges: Which edges start the work: `.trailing` (the default), `.leading`, or both.
  ///   - maximumWait: The longest a change waits for its work; `nil` (the default) for no bound.
  ///   - priority: The priority of the work's task, as with `task(id:)`.
  ///   - control: Flush (start now) and cancel (drop the pending start) from elsewhere.
  ///   - scheduler: Where time is read; the main queue by default.
  ///   - action: The work, cancelled when superseded.
  public func task<ID: Equatable & Sendable>(
    id: ID,
    debounce interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    priority: TaskPriority = .userInitiated,
    control: PacingControl? = nil,
    scheduler: some PaceScheduler = .main,
    @_inheritActorContext _ action: @escaping @Sendable () async -> Void
  ) -> some View {
    modifier(
      PacedTaskModifier(
        id: id, pacing: .debounce(interval, edges: edges, maximumWait: maximumWait), priority: priority,
        control: control, scheduler: scheduler, action: action
      )
    )
  }

  /// Copies `value` into `target` once it has stopped changing for `interval`: a text field's
  /// draft into the query a search reads. Return (`onSubmit`) copies it at once; Escape
  /// (`onKeyPress(.escape)` with a hardware keyboard, and `onExitCommand` on macOS and tvOS)
  /// drops the pending copy.
  ///
  /// ```swift
  /// @State private var draft = ""
  /// @State private var query = ""
  ///
  /// TextField("Search", text: $draft)
  ///   .debounced(draft, into: $query, for: .milliseconds(300))
  ///   .task(id: query) { results = await search(query) }
  /// ```
  ///
  /// - Parameters:
  ///   - value: The value being edited.
  ///   - target: Where the settled value goes.
  ///   - interval: How long `value` must stop changing. Not negative.
  ///   - edges: Which edges copy: `.trailing` (the default), `.leading`, or both. Not empty.
  ///   - maximumWait: The longest a change waits; `nil` (the default) for no bound.
  ///   - control: Flush and cancel from elsewhere in the view, such as a button.
  ///   - scheduler: Where time is read; the main queue by default.
  public func debounced<V: Equatable & Sendable>(
    _ value: V,
    into target: Binding<V>,
    for interval: Duration,
    edges: Edges = .trailing,
    maximumWait: Duration? = nil,
    control: PacingControl? = nil,
    scheduler: some PaceScheduler = .main
  ) -> some View {
    modifier(
      PacedBindingModifier(
        value: value, target: target, pacing: .debounce(interval, edges: edges, maximumWait: maximumWait),
        control: control, scheduler: scheduler
      )
    )
  }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
struct PacedChangeModifier<V: Equatable & Sendable>: ViewModifier {
  let value: V
  let control: PacingControl?
  let action: (V) -> Void
  @State private var pacer: ChangePacer<V>

  init(
    value: V, pacing: ChangePacer<V>.Pacing, control: PacingControl?, scheduler: any PaceScheduler,
    action: @escaping (V) -> Void
  ) {
    self.value = value
    self.control = control
    self.action = action
    // Made on every render, kept only on the first: SwiftUI keeps the state of the identity.
    _pacer = State(wrappedValue: ChangePacer(pacing, scheduler: scheduler))
  }

  func body(content: Content) -> some View {
    content
      .onChange(of: value) { _, newValue in
        pacer.action = action
        control?.target = pacer
        pacer.send(newValue)
      }
      .onDisappear { pacer.cancel() }
  }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
struct PacedTaskModifier<ID: Equatable & Sendable>: ViewModifier {
  let id: ID
  let priority: TaskPriority
  let control: PacingControl?
  let action: @Sendable () async -> Void
  @State private var pacer: ChangePacer<ID>
  @State private var runs = TaskRuns()

  init(
    id: ID, pacing: ChangePacer<ID>.Pacing, priority: TaskPriority, control: PacingControl?,
    scheduler: any PaceScheduler, action: @escaping @Sendable () async -> Void
  ) {
    self.id = id
    self.priority = priority
    self.control = control
    self.action = action
    _pacer = State(wrappedValue: ChangePacer(pacing, scheduler: scheduler))
  }

  func body(content: Content) -> some View {
    let run = runs.current
    let action = action
    return
      content
      .onChange(of: id) { _, newID in
        let runs = $runs
        pacer.action = { _ in runs.wrappedValue.start() }
        control?.target = pacer
        runs.wrappedValue.supersede()
        pacer.send(newID)
      }
      .task(id: run, priority: priority) {
        // A `nil` run is a change waiting for the pacer: the previous work is cancelled and
        // nothing starts.
        if run != nil { await action() }
      }
      .onDisappear { pacer.cancel() }
  }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
struct PacedBindingModifier<V: Equatable & Sendable>: ViewModifier {
  let value: V
  let target: Binding<V>
  let control: PacingControl?
  @State private var pacer: ChangePacer<V>

  init(
    value: V, target: Binding<V>, pacing: ChangePacer<V>.Pacing, control: PacingControl?,
    scheduler: any PaceScheduler
  ) {
    self.value = value
    self.target = target
    self.control = control
    _pacer = State(wrappedValue: ChangePacer(pacing, scheduler: scheduler))
  }

  func body(content: Content) -> some View {
    let target = target
    let value = value
    return
      content
      .onChange(of: value) { _, newValue in
        pacer.action = { target.wrappedValue = $0 }
        control?.target = pacer
        pacer.send(newValue)
      }
      .onSubmit {
        // Return runs now: what is typed is the value, pending or not (after an Escape too).
        pacer.cancel()
        if target.wrappedValue != value { target.wrappedValue = value }
      }
      #if !os(watchOS)
    .onKeyPress(.escape) {
      // Escape cancels the pending copy; the system still sees the key (to dismiss a sheet).
      pacer.cancel()
      return .ignored
    }
      #endif
      #if os(macOS) || os(tvOS) || PACE_SWIFTUI_STAND_IN
    .onExitCommand { pacer.cancel() }
    #endif
    .onDisappear { pacer.cancel() }
  }
}

// The modifiers as released in 0.1.0, before the glossary spelled every maximum out: `maxWait:`
// is `maximumWait:`. `maxWait` has no default here, so a call that names neither label reaches
// the current modifiers alone.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension View {
  /// Runs `action` with the new value once `value` has stopped changing for `interval`.
  @available(*, deprecated, renamed: "onChange(of:debounce:edges:maximumWait:control:scheduler:_:)")
  public func onChange<V: Equatable & Sendable>(
    of value: V,
    debounce interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    control: PacingControl? = nil,
    scheduler: some PaceScheduler = .main,
    _ action: @escaping (_ newValue: V) -> Void
  ) -> some View {
    onChange(
      of: value, debounce: interval, edges: edges, maximumWait: maxWait, control: control, scheduler: scheduler,
      action)
  }

  /// Runs `action` once `id` has stopped changing for `interval`.
  @available(*, deprecated, renamed: "task(id:debounce:edges:maximumWait:priority:control:scheduler:_:)")
  public func task<ID: Equatable & Sendable>(
    id: ID,
    debounce interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    priority: TaskPriority = .userInitiated,
    control: PacingControl? = nil,
    scheduler: some PaceScheduler = .main,
    @_inheritActorContext _ action: @escaping @Sendable () async -> Void
  ) -> some View {
    task(
      id: id, debounce: interval, edges: edges, maximumWait: maxWait, priority: priority, control: control,
      scheduler: scheduler, action)
  }

  /// Copies `value` into `target` once `value` has stopped changing for `interval`.
  @available(*, deprecated, renamed: "debounced(_:into:for:edges:maximumWait:control:scheduler:)")
  public func debounced<V: Equatable & Sendable>(
    _ value: V,
    into target: Binding<V>,
    for interval: Duration,
    edges: Edges = .trailing,
    maxWait: Duration?,
    control: PacingControl? = nil,
    scheduler: some PaceScheduler = .main
  ) -> some View {
    debounced(
      value, into: target, for: interval, edges: edges, maximumWait: maxWait, control: control, scheduler: scheduler)
  }
}
#endif
