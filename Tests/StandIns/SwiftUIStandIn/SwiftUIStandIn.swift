// A stand-in for the part of SwiftUI that PaceSwiftUI's glue uses, so that the glue compiles and
// is tested on Linux. It is a test fixture: no product depends on it, so it never ships.
//
// Rules, as for UIKitStandIn:
// - Every declaration the glue uses has Apple's name and signature (iOS 17 SDK), or a stricter
//   one, so that code compiling against the stand-in compiles against SwiftUI. The glue uses
//   exactly: `View`, `ViewModifier` and its `Content`, `ModifiedContent`, `View.modifier(_:)`,
//   `ViewBuilder`, `State` (`init(wrappedValue:)`, `wrappedValue`, `projectedValue`), `Binding`
//   (`wrappedValue`), `View.onChange(of:initial:_:)`, `View.task(id:priority:_:)`,
//   `View.onSubmit(of:_:)`, `SubmitTriggers`, `View.onExitCommand(perform:)`,
//   `View.onKeyPress(_:action:)`, `KeyEquivalent.escape`, `KeyPress.Result`,
//   `View.onDisappear(perform:)`.
// - What SwiftUI itself does (keeping `@State` across renders, calling `onChange` actions when a
//   value changes, starting and cancelling `task(id:)` work, Return, Escape, disappearing) is
//   played by `StandInHost`, whose methods start with `standIn`; the glue never uses it.

// MARK: Views

/// A part of the user interface.
@MainActor @preconcurrency
public protocol View {
  associatedtype Body: View
  @ViewBuilder @MainActor @preconcurrency var body: Self.Body { get }
}

extension Never: View {
  public typealias Body = Never
  public var body: Never { fatalError("Never has no body") }
}

/// Builds views from closures; the stand-in builds single views only.
@resultBuilder
public enum ViewBuilder {
  public static func buildBlock<Content: View>(_ content: Content) -> Content { content }
}

/// A modifier that you apply to a view, producing a different version of it.
@MainActor @preconcurrency
public protocol ViewModifier {
  associatedtype Body: View
  typealias Content = _ViewModifier_Content<Self>
  @ViewBuilder @MainActor @preconcurrency func body(content: Self.Content) -> Self.Body
}

/// The view a modifier is applied to, as its body sees it.
@MainActor @preconcurrency
public struct _ViewModifier_Content<Modifier: ViewModifier>: View {
  public var body: Never { fatalError("content has no body") }
}

/// A view with a modifier applied.
@MainActor @preconcurrency
public struct ModifiedContent<Content, Modifier> {
  public var content: Content
  public var modifier: Modifier

  public init(content: Content, modifier: Modifier) {
    self.content = content
    self.modifier = modifier
  }
}

extension ModifiedContent: View where Content: View, Modifier: ViewModifier {
  public var body: Never { fatalError("ModifiedContent has no body") }
}

extension View {
  /// Applies a modifier to a view and returns a new view.
  public func modifier<T>(_ modifier: T) -> ModifiedContent<Self, T> {
    ModifiedContent(content: self, modifier: modifier)
  }
}

// MARK: State

/// A property wrapper type that can read and write a value managed by SwiftUI.
@propertyWrapper
public struct State<Value> {
  let location: StateLocation

  public init(wrappedValue value: Value) {
    location = StateLocation(value)
  }

  public var wrappedValue: Value {
    get { location.storage.value as! Value }
    nonmutating set { location.storage.value = newValue }
  }

  public var projectedValue: Binding<Value> {
    let location = location
    return Binding(get: { location.storage.value as! Value }, set: { location.storage.value = $0 })
  }
}

/// Where a `State` finds its value: the host points it at the storage of the first render, as
/// SwiftUI keeps state for a view's identity.
final class StateLocation {
  var storage: StateStorage

  init(_ value: Any) {
    storage = StateStorage(value)
  }
}

final class StateStorage {
  var value: Any {
    didSet { version += 1 }
  }
  /// Counts writes, so the host sees that state changed during a render and renders again.
  private(set) var version = 0

  init(_ value: Any) {
    self.value = value
  }
}

extension State: StandInStateProperty {
  var standInLocation: StateLocation { location }
}

protocol StandInStateProperty {
  var standInLocation: StateLocation { get }
}

/// A property wrapper type that can read and write a value owned by a source of truth.
@propertyWrapper
public struct Binding<Value> {
  private let get: () -> Value
  private let set: (Value) -> Void

  public init(get: @escaping () -> Value, set: @escaping (Value) -> Void) {
    self.get = get
    self.set = set
  }

  public var wrappedValue: Value {
    get { get() }
    nonmutating set { set(newValue) }
  }

  public var projectedValue: Binding<Value> { self }
}

// MARK: Modifiers the glue uses

/// What triggers a submission.
public struct SubmitTriggers: OptionSet, Sendable {
  public let rawValue: UInt
  public init(rawValue: UInt) { self.rawValue = rawValue }
  /// The Return key in a text field.
  public static let text = SubmitTriggers(rawValue: 1 << 0)
  /// A search field's submission.
  public static let search = SubmitTriggers(rawValue: 1 << 1)
}

/// A key that the user presses.
public struct KeyEquivalent: Equatable, Sendable {
  public var character: Character
  public init(_ character: Character) { self.character = character }
  /// The Escape key.
  public static let escape = KeyEquivalent("\u{1B}")
  /// The Return key.
  public static let `return` = KeyEquivalent("\r")
}

/// A key press.
public struct KeyPress: Sendable {
  /// Whether an action handled the key press, or the system should see it too.
  public enum Result: Sendable {
    case handled
    case ignored
  }
}

extension View {
  /// Performs an action if the user presses a key on a hardware keyboard while the view has focus.
  public func onKeyPress(_ key: KeyEquivalent, action: @escaping () -> KeyPress.Result) -> some View {
    StandInNode(content: self, kind: .keyPress(key, action))
  }

  /// Adds an action to perform when the given value changes.
  public func onChange<V: Equatable>(
    of value: V, initial: Bool = false, _ action: @escaping (_ oldValue: V, _ newValue: V) -> Void
  ) -> some View {
    StandInNode(content: self, kind: .change(StandInChange(value: value, initial: initial, action: action)))
  }

  /// Adds an asynchronous task to perform before this view appears or when a specified value changes.
  ///
  /// The action inherits the view's main actor, as SwiftUI's does (`@_inheritActorContext` in its
  /// interface), so it may set the view's `@State`.
  public func task<T: Equatable>(
    id value: T, priority: TaskPriority = .userInitiated,
    @_inheritActorContext _ action: @escaping @Sendable () async -> Void
  ) -> some View {
    StandInNode(content: self, kind: .task(StandInTask(id: value, priority: priority, action: action)))
  }

  /// Adds an action to perform when the user submits a value to this view.
  public func onSubmit(of triggers: SubmitTriggers = .text, _ action: @escaping () -> Void) -> some View {
    StandInNode(content: self, kind: .submit(action))
  }

  /// Sets up an action that triggers in response to receiving the exit command (Escape on macOS).
  public func onExitCommand(perform action: (() -> Void)?) -> some View {
    StandInNode(content: self, kind: .exitCommand(action ?? {}))
  }

  /// Adds an action to perform after this view disappears.
  public func onDisappear(perform action: (() -> Void)? = nil) -> some View {
    StandInNode(content: self, kind: .disappear(action ?? {}))
  }
}

// MARK: What the host reads

struct StandInChange {
  let value: Any
  let initial: Bool
  let isEqual: (Any) -> Bool
  let call: (_ old: Any, _ new: Any) -> Void

  init<V: Equatable>(value: V, initial: Bool, action: @escaping (V, V) -> Void) {
    self.value = value
    self.initial = initial
    isEqual = { ($0 as? V) == value }
    call = { old, new in action(old as! V, new as! V) }
  }
}

struct StandInTask {
  let id: Any
  let priority: TaskPriority
  let isEqual: (Any) -> Bool
  let action: @Sendable () async -> Void

  init<T: Equatable>(id: T, priority: TaskPriority, action: @escaping @Sendable () async -> Void) {
    self.id = id
    self.priority = priority
    isEqual = { ($0 as? T) == id }
    self.action = action
  }
}

/// One of the modifiers above, as the host reads it.
enum StandInModifier {
  case change(StandInChange)
  case task(StandInTask)
  case submit(() -> Void)
  case exitCommand(() -> Void)
  case keyPress(KeyEquivalent, () -> KeyPress.Result)
  case disappear(() -> Void)
}

/// A view with one of the modifiers above.
struct StandInNode<Content: View>: View {
  let content: Content
  let kind: StandInModifier

  var body: Never { fatalError("StandInNode has no body") }
}

/// Flattens a view tree into its modifiers, outermost last, and its `@State` properties.
@MainActor
struct StandInTree {
  var nodes: [StandInModifier] = []
  var states: [StateLocation] = []

  init(_ view: some View) {
    visit(view)
  }

  private mutating func visit(_ view: Any) {
    if let node = view as? any StandInVisitable {
      node.standInVisit(&self)
    }
  }

  mutating func visitChild(_ view: Any) { visit(view) }
  mutating func record(_ kind: StandInModifier) { nodes.append(kind) }
  mutating func recordStates(of value: Any) {
    for child in Mirror(reflecting: value).children {
      if let state = child.value as? any StandInStateProperty { states.append(state.standInLocation) }
    }
  }
}

@MainActor
protocol StandInVisitable {
  func standInVisit(_ tree: inout StandInTree)
}

extension StandInNode: StandInVisitable {
  func standInVisit(_ tree: inout StandInTree) {
    tree.visitChild(content)
    tree.record(kind)
  }
}

extension ModifiedContent: StandInVisitable where Content: View, Modifier: ViewModifier {
  func standInVisit(_ tree: inout StandInTree) {
    tree.visitChild(content)
    tree.recordStates(of: modifier)
    tree.visitChild(modifier.body(content: _ViewModifier_Content()))
  }
}

// MARK: The host: SwiftUI's part

/// Plays SwiftUI for one view identity: render it again and again with new values, and the host
/// keeps its `@State` from the first render, calls `onChange` actions whose value changed,
/// starts `task(id:)` work on the first render and restarts it when its id changes.
@MainActor
public final class StandInHost {
  private var states: [StateStorage] = []
  private var changeValues: [Any] = []
  private var taskIDs: [Any] = []
  private var tasks: [Task<Void, Never>?] = []
  private var submits: [() -> Void] = []
  private var exitCommands: [() -> Void] = []
  private var keyPresses: [(KeyEquivalent, () -> KeyPress.Result)] = []
  private var disappears: [() -> Void] = []
  private var hasRendered = false

  public init() {}

  /// The tasks started so far by `task(id:)` modifiers, oldest first.
  public private(set) var startedTasks: [Task<Void, Never>] = []

  /// Renders `view`, as SwiftUI does when the view's inputs or state change.
  public func standInRender(_ view: some View) {
    // State changed by the actions this render ran makes SwiftUI render again, as here.
    for _ in 0..<10 {
      let before = states.map(\.version)
      render(view)
      if states.map(\.version) == before { return }
    }
    fatalError("StandInHost: state keeps changing on every render")
  }

  private func render(_ view: some View) {
    var tree = StandInTree(view)
    if hasRendered {
      // SwiftUI keeps the state of the first render for the view's identity: point the new
      // modifiers' `@State` at it, then read their bodies again, which read that state.
      for (location, storage) in zip(tree.states, states) { location.storage = storage }
      tree = StandInTree(view)
    } else {
      states = tree.states.map(\.storage)
    }
    var changeIndex = 0
    var taskIndex = 0
    submits = []
    exitCommands = []
    keyPresses = []
    disappears = []
    for node in tree.nodes {
      switch node {
      case .change(let change):
        if !hasRendered || changeIndex >= changeValues.count {
          changeValues.append(change.value)
          if change.initial { change.call(change.value, change.value) }
        } else if !change.isEqual(changeValues[changeIndex]) {
          let old = changeValues[changeIndex]
          changeValues[changeIndex] = change.value
          change.call(old, change.value)
        }
        changeIndex += 1
      case .task(let task):
        if taskIndex >= taskIDs.count {
          taskIDs.append(task.id)
          tasks.append(start(task))
        } else if !task.isEqual(taskIDs[taskIndex]) {
          taskIDs[taskIndex] = task.id
          tasks[taskIndex]?.cancel()
          tasks[taskIndex] = start(task)
        }
        taskIndex += 1
      case .submit(let action): submits.append(action)
      case .exitCommand(let action): exitCommands.append(action)
      case .keyPress(let key, let action): keyPresses.append((key, action))
      case .disappear(let action): disappears.append(action)
      }
    }
    hasRendered = true
  }

  private func start(_ task: StandInTask) -> Task<Void, Never> {
    let started = Task(priority: task.priority, operation: task.action)
    startedTasks.append(started)
    return started
  }

  /// The user pressed Return in a text field of the view.
  public func standInSubmit() { submits.forEach { $0() } }

  /// The system's exit command: Escape on macOS, the Menu button on tvOS.
  public func standInExitCommand() { exitCommands.forEach { $0() } }

  /// The user pressed `key` on a hardware keyboard; actions run innermost first until one
  /// handles it. Returns whether one did.
  @discardableResult
  public func standInKeyPress(_ key: KeyEquivalent) -> KeyPress.Result {
    for (candidate, action) in keyPresses where candidate == key {
      if action() == .handled { return .handled }
    }
    return .ignored
  }

  /// The view went away: its tasks are cancelled and its `onDisappear` actions run.
  public func standInDisappear() {
    tasks.forEach { $0?.cancel() }
    disappears.forEach { $0() }
  }
}
