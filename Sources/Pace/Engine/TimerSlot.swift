/// The one scheduler timer a driver keeps: its handle, the deadline it is armed for and a
/// generation that tells the current timer from a stale one.
///
/// Every driver follows one arming rule, because a scheduler may take locks of its own or run
/// code in line, and a cancelled timer may still fire:
///
/// 1. Under the driver's lock, ``reserve(at:)`` makes any earlier timer stale and returns a
///    ``Ticket`` (and the earlier handle, to cancel).
/// 2. With the lock released, the driver asks its scheduler for a timer that fires
///    `timerFired(ticket.generation)`, and cancels the superseded handle.
/// 3. Under the lock again, ``install(_:for:)`` keeps the new handle, or returns `false` when a
///    newer reservation, a ``disarm()`` or the firing itself got in between: the driver then
///    cancels the handle it holds.
///
/// When the timer fires, ``fire(_:)`` under the lock answers whether it is the current one; a
/// stale firing does nothing. ``disarm()`` makes any armed or arming timer stale and returns the
/// handle to cancel once the lock is released.
@usableFromInline
package struct TimerSlot {
  /// A reservation to arm the scheduler's timer, carried out once the lock is released.
  @usableFromInline
  package struct Ticket: Equatable, Sendable {
    @usableFromInline package let deadline: PaceInstant
    @usableFromInline package let generation: UInt64

    @inlinable package init(deadline: PaceInstant, generation: UInt64) {
      self.deadline = deadline
      self.generation = generation
    }
  }

  /// Counts reservations; a timer that fires with an older generation is stale.
  @usableFromInline package private(set) var generation: UInt64 = 0
  /// The deadline of the current reservation; `nil` when no timer is armed or arming.
  @usableFromInline package private(set) var deadline: PaceInstant?
  @usableFromInline var handle: (any PaceCancellable)?

  @inlinable package init() {}

  /// Whether a timer is armed, or reserved and being armed.
  @inlinable package var isArmed: Bool { deadline != nil }

  /// Whether the slot holds a scheduler handle (armed and installed).
  @inlinable package var hasHandle: Bool { handle != nil }

  /// The handle of the installed timer, for diagnostics that inspect it (a `Task`, say).
  @inlinable package var installedHandle: (any PaceCancellable)? { handle }

  /// Reserves a timer for `deadline`: any earlier timer becomes stale, and its handle is returned
  /// to be cancelled once the lock is released.
  @inlinable
  package mutating func reserve(at deadline: PaceInstant) -> (ticket: Ticket, superseded: (any PaceCancellable)?) {
    generation &+= 1
    self.deadline = deadline
    return (Ticket(deadline: deadline, generation: generation), handle.take())
  }

  /// Keeps `handle` if `ticket` is still the current reservation; `false` means the caller must
  /// cancel `handle`.
  @inlinable
  package mutating func install(_ handle: any PaceCancellable, for ticket: Ticket) -> Bool {
    guard ticket.generation == generation, deadline != nil else { return false }
    self.handle = handle
    return true
  }

  /// Whether a timer firing with `generation` is the current one; if so, the slot is empty again.
  @inlinable
  package mutating func fire(_ generation: UInt64) -> Bool {
    guard generation == self.generation, deadline != nil else { return false }
    // A new generation, so that an `install` still on its way finds the timer gone.
    self.generation &+= 1
    deadline = nil
    handle = nil
    return true
  }

  /// Steps 2 and 3 of the rule, with the lock released: schedules the timer `ticket` reserved,
  /// which calls `fire` with its generation, then `install`s it under the lock, or cancels it.
  @inlinable
  package static func arm(
    _ ticket: Ticket,
    schedule: (PaceInstant, @escaping @Sendable () -> Void) -> any PaceCancellable,
    fire: @escaping @Sendable (UInt64) -> Void,
    install: (any PaceCancellable) -> Bool
  ) {
    let generation = ticket.generation
    let timer = schedule(ticket.deadline) { fire(generation) }
    // A newer timer, a disarm or the firing got in between: this one must never fire.
    if !install(timer) { timer.cancel() }
  }

  /// Makes any armed or arming timer stale; returns the handle to cancel after the lock.
  @inlinable
  package mutating func disarm() -> (any PaceCancellable)? {
    generation &+= 1
    deadline = nil
    return handle.take()
  }
}
