/// A disposable built from a closure, or wrapping another disposable, that runs its teardown
/// at most once: on the first ``dispose()`` or, failing that, when it is released.
///
/// ```swift
/// let token = center.addObserver(...)
/// let connection = AnyDisposable { center.removeObserver(token) }
/// ```
///
/// `dispose()` is idempotent and thread-safe: concurrent calls run the teardown once, and the
/// teardown never runs under a lock, so it may dispose other things. Instances compare by
/// identity, so a `Set<AnyDisposable>` can hold a screen's connections (`store(in:)`).
public final class AnyDisposable: Disposable, Hashable {
  /// The teardown, until it has run.
  private let teardown: LockedState<(@Sendable () -> Void)?>

  /// A disposable that runs `dispose` once, on the first ``dispose()`` or on release.
  ///
  /// - Parameter dispose: The teardown.
  public init(_ dispose: @escaping @Sendable () -> Void) {
    teardown = LockedState(dispose)
  }

  /// A disposable that disposes `disposable` once, on the first ``dispose()`` or on release.
  ///
  /// Wrapping gives Pace's release rule to a disposable that has none of its own, such as a struct.
  ///
  /// - Parameter disposable: The disposable to dispose.
  public convenience init(_ disposable: some Disposable) {
    self.init { disposable.dispose() }
  }

  deinit {
    dispose()
  }

  /// Runs the teardown if it has not run yet.
  public func dispose() {
    teardown.withLock { $0.take() }?()
  }

  /// Whether the teardown has run (or is running).
  public var isDisposed: Bool {
    teardown.withLock { $0 == nil }
  }

  /// Keeps this disposable in `set`, so it lives as long as the set holds it.
  ///
  /// - Parameter set: The set, usually a property of the object that owns the connections.
  public func store(in set: inout Set<AnyDisposable>) {
    set.insert(self)
  }

  /// Adds this disposable to `group`, which disposes it with the group.
  ///
  /// - Parameter group: The group.
  public func store(in group: DisposableGroup) {
    group.add(self)
  }

  /// Identity: two `AnyDisposable`s are equal only if they are the same instance.
  public static func == (lhs: AnyDisposable, rhs: AnyDisposable) -> Bool {
    lhs === rhs
  }

  /// Hashes the instance's identity.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(ObjectIdentifier(self))
  }
}
