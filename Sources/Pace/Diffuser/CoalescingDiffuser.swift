/// A ``Diffuser`` that renders once per turn: many ``run(_:)`` calls in one turn of the main
/// queue render once, with the latest state.
///
/// ```swift
/// let render = CoalescingDiffuser(.intoAll(titleDiffuser, listDiffuser))
/// for change in batch { state.apply(change); render.run(state) }   // one render, next turn
/// ```
///
/// It is ``Coalescer`` with `merge: .latest` in front of a diffuser. It lives on the main actor,
/// where the diffuser's side effects run.
///
/// ```
/// runs         [abc]---d---   (three runs in one turn, then one: one render each turn)
/// renders      c    ---d---
/// ```
@MainActor
public final class CoalescingDiffuser<State: Sendable> {
  /// The diffuser, kept by the coalescer's handler. Main-actor isolation makes it `Sendable`, so
  /// the handler can carry it, and the diffuser is still reached only on the main actor.
  @MainActor
  private final class Target {
    let diffuser: Diffuser<State>
    init(_ diffuser: Diffuser<State>) { self.diffuser = diffuser }
  }

  private let coalescer: Coalescer<State>

  /// A diffuser that renders the latest state once per turn of `scheduler`.
  ///
  /// - Parameters:
  ///   - diffuser: The diffuser that renders.
  ///   - window: How long after the first run of a burst it renders; `.zero` (the default) for
  ///     the scheduler's next turn. Not negative.
  ///   - scheduler: Where it renders. It must run work on the main actor: `.main` (the default),
  ///     or a ``TestScheduler`` advanced from the main actor in tests.
  public init(_ diffuser: Diffuser<State>, window: Duration = .zero, scheduler: some PaceScheduler = .main) {
    let target = Target(diffuser)
    coalescer = Coalescer(window: window, merge: .latest, scheduler: scheduler) { state in
      MainActor.assumeIsolated { target.diffuser.run(state) }
    }
  }

  /// Records `state`; the diffuser runs with the latest recorded state on the next turn.
  ///
  /// - Parameter state: The new state.
  public func run(_ state: State) {
    coalescer.signal(state)
  }

  /// Renders the latest recorded state now, if one is waiting.
  public func flush() {
    coalescer.flush()
  }

  /// Drops the waiting state, if any.
  public func cancel() {
    coalescer.cancel()
  }

  /// Whether a state is waiting to be rendered.
  public var isPending: Bool {
    coalescer.isPending
  }
}
