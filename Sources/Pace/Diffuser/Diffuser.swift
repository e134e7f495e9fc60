/// State in, minimal side effects out: runs side effects only for the parts of the state that
/// changed since the previous run.
///
/// Describe once how each part of the state reaches the screen, then feed every new state to
/// ``run(_:)``:
///
/// ```swift
/// struct ViewState: Equatable { var title: String; var isLoading: Bool; var items: [Item] }
///
/// let render: Diffuser<ViewState> = .intoAll(
///   .map(\.title, .into { title in titleLabel.text = title }),
///   .map(\.isLoading, .into { loading in spinner.isHidden = !loading }),
///   .map(\.items, .into { _ in tableView.reloadData() })
/// )
/// render.run(state)   // only what changed since the previous run is touched
/// ```
///
/// The first run runs every side effect; later runs skip the ones whose input did not change.
/// Laws (checked by the tests): ``into(_:)`` equals `intoWhen(didChange: !=)`; ``intoOnce(_:)``
/// runs exactly once; `map(_:_:)` runs its child only when the
/// projected value changed; the children of `intoAll(_:)` run in order.
///
/// ## Threading
///
/// A diffuser remembers previous values without a lock, so it belongs to one isolation domain:
/// it is deliberately not `Sendable`, and the compiler keeps it where it was made, usually the
/// main actor. Its closures are not `@Sendable` either, so on the main actor they may touch
/// views directly. To render many states of one turn once, wrap it in a
/// ``CoalescingDiffuser``.
///
/// A diffuser has reference semantics: the memory of previous values belongs to the instance, so
/// a child used in two parents sees the runs of both.
public final class Diffuser<State> {
  private let body: (State) -> Void

  private init(_ body: @escaping (State) -> Void) {
    self.body = body
  }

  /// Feeds a state: runs the side effects whose input changed since the previous run, or all of
  /// them on the first run.
  ///
  /// A side effect may run the diffuser again; the inner run compares with the state it was
  /// given by the outer one.
  ///
  /// - Parameter state: The new state.
  public func run(_ state: State) {
    body(state)
  }

  /// A diffuser that runs `sideEffect` on every run.
  ///
  /// - Parameter sideEffect: The side effect.
  public static func intoAlways(_ sideEffect: @escaping (State) -> Void) -> Diffuser<State> {
    Diffuser(sideEffect)
  }

  /// A diffuser that runs `sideEffect` on the first run and whenever `didChange(previous, new)`
  /// is `true`.
  ///
  /// ```swift
  /// .intoWhen(didChange: { $0.count != $1.count }) { items in badge.text = "\(items.count)" }
  /// ```
  ///
  /// - Parameters:
  ///   - didChange: Whether the side effect should run for the new state, given the previous one.
  ///   - sideEffect: The side effect.
  public static func intoWhen(
    didChange: @escaping (_ previous: State, _ new: State) -> Bool,
    _ sideEffect: @escaping (State) -> Void
  ) -> Diffuser<State> {
    var previous: State?
    return Diffuser { state in
      let hadPrevious = previous
      // Remembered before the side effect, so that a run from inside it compares with this state.
      previous = state
      if let hadPrevious, !didChange(hadPrevious, state) { return }
      sideEffect(state)
    }
  }

  /// A diffuser that runs `sideEffect` on the first run only.
  ///
  /// - Parameter sideEffect: The side effect, such as one-time setup.
  public static func intoOnce(_ sideEffect: @escaping (State) -> Void) -> Diffuser<State> {
    var hasRun = false
    return Diffuser { state in
      guard !hasRun else { return }
      hasRun = true
      sideEffect(state)
    }
  }

  /// A diffuser that runs each of `children`, in order, on every run; each child decides for
  /// itself whether its side effects run.
  ///
  /// - Parameter children: The diffusers to combine.
  public static func intoAll(_ children: [Diffuser<State>]) -> Diffuser<State> {
    Diffuser { state in
      for child in children { child.run(state) }
    }
  }

  /// A diffuser that runs each of `children`, in order, on every run; the same as the array form.
  ///
  /// - Parameter children: The diffusers to combine.
  public static func intoAll(_ children: Diffuser<State>...) -> Diffuser<State> {
    intoAll(children)
  }

  /// A diffuser that projects the state with `transform` and runs `child` with the projection
  /// when it differs from the previous projection (and on the first run).
  ///
  /// - Parameters:
  ///   - transform: Picks or computes the part of the state that `child` needs.
  ///   - child: The diffuser of the projected value.
  public static func map<Projected: Equatable>(
    _ transform: @escaping (State) -> Projected,
    _ child: Diffuser<Projected>
  ) -> Diffuser<State> {
    let changed = Diffuser<Projected>.into { child.run($0) }
    return Diffuser { state in changed.run(transform(state)) }
  }

  /// A diffuser that runs `child` with the value at `keyPath` when it differs from the previous
  /// one (and on the first run).
  ///
  /// ```swift
  /// .map(\.title, .into { titleLabel.text = $0 })
  /// ```
  ///
  /// - Parameters:
  ///   - keyPath: The part of the state that `child` needs.
  ///   - child: The diffuser of that part.
  public static func map<Projected: Equatable>(
    _ keyPath: KeyPath<State, Projected>,
    _ child: Diffuser<Projected>
  ) -> Diffuser<State> {
    map({ $0[keyPath: keyPath] }, child)
  }
}

extension Diffuser where State: Equatable {
  /// A diffuser that runs `sideEffect` on the first run and whenever the state differs from the
  /// previous one: `intoWhen(didChange: !=)`.
  ///
  /// - Parameter sideEffect: The side effect.
  public static func into(_ sideEffect: @escaping (State) -> Void) -> Diffuser<State> {
    intoWhen(didChange: !=, sideEffect)
  }

  /// A diffuser that writes the state to `object[keyPath: keyPath]` when it changed (and on the
  /// first run), like Combine's `assign(to:on:)`.
  ///
  /// ```swift
  /// .map(\.title, .assign(to: \.text, on: titleLabel))
  /// ```
  ///
  /// The object is held weakly, so a diffuser that assigns to its own owner makes no cycle.
  ///
  /// - Parameters:
  ///   - keyPath: The property to write.
  ///   - object: The object that owns the property.
  public static func assign<Root: AnyObject>(
    to keyPath: ReferenceWritableKeyPath<Root, State>,
    on object: Root
  ) -> Diffuser<State> {
    into { [weak object] state in object?[keyPath: keyPath] = state }
  }
}

// A diffuser remembers previous values without a lock: it stays in one isolation domain.
@available(*, unavailable)
extension Diffuser: Sendable {}
