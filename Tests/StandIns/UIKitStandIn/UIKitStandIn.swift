// A stand-in for the part of UIKit that PaceUI's glue uses, so that the glue compiles and is
// tested on Linux. It is a test fixture: no product depends on it, so it never ships.
//
// Rules:
// - Every declaration the glue uses has Apple's name and signature, or a stricter one (for
//   example `UIActionHandler` is `@MainActor @Sendable` here), so that code compiling against
//   the stand-in compiles against UIKit. The glue uses exactly: `UIView.isHidden`,
//   `addGestureRecognizer(_:)`, `removeGestureRecognizer(_:)`; `UIControl.isEnabled`,
//   `addAction(_:for:)`, `removeAction(_:for:)`, `UIControl.Event`, `UIControl.State`;
//   `UIAction(handler:)`; `UILabel.text`; `UITextField.text`; `UIButton.setTitle(_:for:)`;
//   `UIBarItem.isEnabled`; `UIGestureRecognizer.addTarget(_:action:)`,
//   `removeTarget(_:action:)`; `UITableView.reloadData()`; `UICollectionView.reloadData()`;
//   `NSObject`; `Selector`.
// - Behaviour is the minimum the tests need, modelled on UIKit's documented behaviour (actions
//   run in the order added; a gesture recognizer does not retain its targets).
// - What the real system does by itself (a finger recognizing a gesture) is simulated by methods
//   whose names start with `standIn`, which the glue never calls.
// - Classes are `@MainActor`, as UIKit's are. The stand-in `NSObject` is too, because Swift lets
//   a main-actor class inherit from a nonisolated one only when that one is the real `NSObject`.

/// The stand-in of the Objective-C runtime's method name.
public struct Selector: Hashable, Sendable, CustomStringConvertible {
  private let name: String

  /// A selector with this name, as `Selector("invoke:")`.
  public init(_ name: String) {
    self.name = name
  }

  public var description: String { name }
}

/// The stand-in root class.
@MainActor
open class NSObject {
  public init() {}

  /// Stand-in for the Objective-C runtime sending `selector` to this object: Linux has no
  /// runtime, so a target overrides this. The default is the runtime's "unrecognized selector".
  open func standInPerform(_ selector: Selector, with argument: Any?) {
    fatalError("unrecognized selector \(selector) sent to \(type(of: self))")
  }
}

@MainActor
open class UIResponder: NSObject {}

@MainActor
open class UIView: UIResponder {
  open var isHidden = false
  /// The recognizers attached to this view, in the order they were added.
  open private(set) var gestureRecognizers: [UIGestureRecognizer]?

  override public init() {}

  open func addGestureRecognizer(_ gestureRecognizer: UIGestureRecognizer) {
    var recognizers = gestureRecognizers ?? []
    guard !recognizers.contains(where: { $0 === gestureRecognizer }) else { return }
    gestureRecognizer.standInView = self
    recognizers.append(gestureRecognizer)
    gestureRecognizers = recognizers
  }

  open func removeGestureRecognizer(_ gestureRecognizer: UIGestureRecognizer) {
    gestureRecognizers?.removeAll { $0 === gestureRecognizer }
    if gestureRecognizer.view === self { gestureRecognizer.standInView = nil }
  }
}

@MainActor
open class UIControl: UIView {
  /// The events a control sends, with UIKit's raw values.
  public struct Event: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let touchDown = Event(rawValue: 1 << 0)
    public static let touchUpInside = Event(rawValue: 1 << 6)
    public static let valueChanged = Event(rawValue: 1 << 12)
    public static let primaryActionTriggered = Event(rawValue: 1 << 13)
    public static let editingChanged = Event(rawValue: 1 << 17)
  }

  /// The states a control can be in, with UIKit's raw values.
  public struct State: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let normal = State([])
    public static let highlighted = State(rawValue: 1 << 0)
    public static let disabled = State(rawValue: 1 << 1)
    public static let selected = State(rawValue: 1 << 2)
  }

  open var isEnabled = true
  private var actions: [(action: UIAction, events: Event)] = []

  override public init() {}

  open func addAction(_ action: UIAction, for controlEvents: Event) {
    actions.append((action, controlEvents))
  }

  open func removeAction(_ action: UIAction, for controlEvents: Event) {
    for index in actions.indices.reversed() where actions[index].action === action {
      actions[index].events.subtract(controlEvents)
      if actions[index].events.isEmpty { actions.remove(at: index) }
    }
  }

  /// Runs the actions registered for any of `controlEvents`, in the order they were added.
  open func sendActions(for controlEvents: Event) {
    let due = actions.filter { !$0.events.isDisjoint(with: controlEvents) }.map(\.action)
    for action in due {
      action.standInSender = self
      action.handler(action)
    }
  }

  /// Stand-in only: how many actions are registered, so tests see that removal happened.
  public var standInActionCount: Int { actions.count }
}

/// UIKit's closure-based action handler; stricter here than in some SDKs (`@Sendable`).
public typealias UIActionHandler = @MainActor @Sendable (UIAction) -> Void

@MainActor
open class UIMenuElement: NSObject {}

@MainActor
open class UIAction: UIMenuElement {
  fileprivate let handler: UIActionHandler
  fileprivate var standInSender: Any?

  public init(handler: @escaping UIActionHandler) {
    self.handler = handler
  }

  /// The control that performed the action, while it runs.
  open var sender: Any? { standInSender }
}

@MainActor
open class UILabel: UIView {
  open var text: String?
}

@MainActor
open class UITextField: UIControl {
  open var text: String?
}

@MainActor
open class UIButton: UIControl {
  private var titles: [UIControl.State: String] = [:]

  open func setTitle(_ title: String?, for state: UIControl.State) {
    titles[state] = title
  }

  open func title(for state: UIControl.State) -> String? {
    titles[state] ?? titles[.normal]
  }
}

@MainActor
open class UIBarItem: NSObject {
  open var isEnabled = true
}

@MainActor
open class UIBarButtonItem: UIBarItem {}

@MainActor
open class UIGestureRecognizer: NSObject {
  /// Gesture states, as UIKit's.
  public enum State: Int, Sendable {
    case possible, began, changed, ended, cancelled, failed
    public static var recognized: State { .ended }
  }

  private struct Target {
    // UIKit does not retain a recognizer's targets.
    weak var object: NSObject?
    var action: Selector
  }

  private var targets: [Target] = []
  open private(set) var state: State = .possible
  fileprivate weak var standInView: UIView?

  /// The view the recognizer is attached to.
  open var view: UIView? { standInView }

  override public init() {}

  open func addTarget(_ target: Any, action: Selector) {
    guard let object = target as? NSObject else { return }
    guard !targets.contains(where: { $0.object === object && $0.action == action }) else { return }
    targets.append(Target(object: object, action: action))
  }

  open func removeTarget(_ target: Any?, action: Selector?) {
    let object = target as? NSObject
    targets.removeAll { entry in
      (object == nil || entry.object === object) && (action == nil || entry.action == action)
    }
  }

  /// Stand-in only: the user's finger. Moves to `state` and sends the action to every target.
  public func standInRecognize(_ state: State = .recognized) {
    self.state = state
    for target in targets {
      target.object?.standInPerform(target.action, with: self)
    }
  }

  /// Stand-in only: how many live targets are registered.
  public var standInTargetCount: Int { targets.count { $0.object != nil } }
}

@MainActor
open class UITapGestureRecognizer: UIGestureRecognizer {}

@MainActor
open class UIScrollView: UIView {}

@MainActor
open class UITableView: UIScrollView {
  open func reloadData() {}
}

@MainActor
open class UICollectionView: UIScrollView {
  open func reloadData() {}
}
