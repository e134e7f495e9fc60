/// Several disposables disposed together, each exactly once.
///
/// ```swift
/// let connections = DisposableGroup()
/// connections.add(taps.connect { ... })
/// connections.add(keyboard.connect { ... })
/// // ...
/// connections.dispose()   // both, in the order they were added
/// ```
///
/// `dispose()` is idempotent and thread-safe. A member added after the group was disposed is
/// disposed at once, so a late connection can never outlive its group. Like every Pace
/// disposable, a group that is released disposes its members. Members are disposed outside the
/// group's lock, in the order they were added.
public final class DisposableGroup: Disposable {
  /// The members; `nil` once the group is disposed.
  private let members: LockedState<[any Disposable]?>

  /// A group holding `members`.
  ///
  /// - Parameter members: The first members, disposed in this order.
  public init(_ members: [any Disposable] = []) {
    self.members = LockedState(members)
  }

  /// A group holding `members`.
  ///
  /// - Parameter members: The first members, disposed in this order.
  public convenience init(_ members: any Disposable...) {
    self.init(members)
  }

  deinit {
    dispose()
  }

  /// Adds `member`; disposes it at once if the group is already disposed.
  ///
  /// - Parameter member: The disposable to dispose with the group.
  public func add(_ member: any Disposable) {
    let added = members.withLock { members -> Bool in
      guard members != nil else { return false }
      members!.append(member)
      return true
    }
    if !added { member.dispose() }
  }

  /// Disposes every member once, in the order they were added.
  public func dispose() {
    let taken = members.withLock { $0.take() }
    taken?.forEach { $0.dispose() }
  }

  /// Whether the group has been disposed.
  public var isDisposed: Bool {
    members.withLock { $0 == nil }
  }

  /// The number of members still held; zero once disposed.
  public var count: Int {
    members.withLock { $0?.count ?? 0 }
  }
}
