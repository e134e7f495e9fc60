/// A value guarded by the package's one lock (a ``LockedCell``), in the spirit of swift-nio's
/// `NIOLockedValueBox`: for every type of the package, and of its other modules, that shares
/// state between threads.
///
/// Never call user code inside `withLock`.
///
/// `@usableFromInline`, with an `@inlinable` `withLock`, so that the hot paths of the public
/// generic types specialise in the caller's module (see ``Pacer``).
@usableFromInline
package final class LockedState<State: ~Copyable>: @unchecked Sendable {
  // @unchecked Sendable: `cell.state` is only read or written inside `withLock`, under the cell's
  // lock.
  /// Allocated, so that the lock never moves.
  @usableFromInline let cell: UnsafeMutablePointer<LockedCell<State>>

  package init(_ initial: consuming sending State) {
    cell = .allocate(capacity: 1)
    cell.initialize(to: LockedCell(initial))
  }

  deinit {
    cell.deinitialize(count: 1)
    cell.deallocate()
  }

  /// Runs `body` on the state under the lock.
  @inlinable @inline(__always)
  package func withLock<Result>(_ body: (inout State) -> Result) -> Result {
    LockedCell.withLock(cell, body)
  }
}

/// Carries a value across a `sending` boundary that the compiler cannot prove safe.
@usableFromInline
struct UncheckedSendable<Value>: @unchecked Sendable {
  // @unchecked Sendable: only used by `LockedCell.withLock` to return a result computed under
  // the lock; the value is never shared, it is moved out once.
  @usableFromInline var value: Value
  @inlinable init(_ value: Value) { self.value = value }
}
