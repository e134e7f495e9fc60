/// A pacing state machine that splits into a configuration shared by every key and a small
/// state per key, so that a keyed primitive stores only the state for each key.
@usableFromInline
protocol KeyedPacerMachine: PacerStateMachine {
  associatedtype Configuration: Sendable
  associatedtype KeyState: Sendable

  /// The state of a key that was never called, or whose state no longer matters.
  static var idleState: KeyState { get }

  init(configuration: Configuration, state: KeyState)

  var state: KeyState { get set }

  /// The deadline the machine expects ``PacerStateMachine/timerFired(now:)`` at; `nil` if none.
  var armedDeadline: PaceInstant? { get }

  /// The instant from which this state behaves exactly like ``idleState``, so the key can be
  /// forgotten; `nil` while an invocation is pending or a timer is armed.
  var idleFrom: PaceInstant? { get }
}

/// The thin, sharded driver of ``KeyedDebouncer`` and ``KeyedThrottler``: ``Pacer`` for many keys.
///
/// Keys are spread over ``keyedShardCount`` shards by hash; each shard has its own lock, its
/// ``KeyTable`` of key states, one ``ShardTimer`` for all its keys' deadlines and one outbox.
/// Under the lock it runs the key's state on the shard's machine and records what to do; after
/// the lock it arms the scheduler timer or delivers. A key whose state stops mattering is removed
/// from the table at once, or when its ``KeyedPacerMachine/idleFrom`` comes, so idle keys take no
/// memory.
///
/// Each shard's outbox is drained by one deliverer at a time, so invocations of one key never
/// overlap and arrive in order. A key's invocation is delivered when its own ``Pacer``'s would
/// be: with a delivery the shard has pending if the key has one in it, or if that delivery was
/// asked for at the same instant; otherwise at the scheduler's turn it asks for now. On a
/// scheduler whose enqueued work waits for a tick, another key's delivery asked for a tick
/// earlier would otherwise take it a tick early (see ``Shard/deliverable(_:now:)``).
///
/// A call hashes its key once, reads the clock before taking the lock, copies nothing that is
/// reference-counted and retains nothing: the measured cost of a call is a clock read, a hash,
/// a lock and one cache miss on the key's slot (see `Benchmarks/KeyedMemory`).
///
/// Everything a call or a timer does per key is `@inlinable`, so that it is specialised for the
/// key and value types in the module that uses them: unspecialised, it looked up type metadata
/// for every key (a timer's path cost three to five times as much).
@usableFromInline
final class KeyedPacer<Key: Hashable & Sendable, Machine: KeyedPacerMachine>: Sendable {
  @usableFromInline typealias Value = Machine.Value

  @usableFromInline
  struct Shard: ~Copyable {
    @usableFromInline var keys = KeyTable<Key, Machine.KeyState>()
    /// The machine every key of the shard runs on: a key's state is swapped in and back out, so
    /// the shared configuration (with its merge function) is never copied per call.
    @usableFromInline var machine: Machine
    @usableFromInline var timer = ShardTimer<Key>()
    /// Invocations waiting for `perform`, oldest first.
    @usableFromInline var outbox = RingBuffer<Invocation>()
    /// Invocations a deliverer found due at a later turn of the scheduler than its own; they
    /// are the outbox again once it is drained.
    @usableFromInline var held = RingBuffer<Invocation>()
    /// Whether a deliverer is draining the outbox or has been dispatched to.
    @usableFromInline var isDelivering = false
    /// The instant, in nanoseconds, the pending or running delivery was asked for.
    @usableFromInline var requestedAt: Int64 = 0
    /// The key whose invocation the deliverer is performing, with the instant its delivery was
    /// asked for: an invocation of that key meanwhile joins it, as on the key's own ``Pacer``.
    @usableFromInline var inFlight: (key: Key, requested: Int64)?
    /// The invocations in the outbox before the event under way began: a firing's own are of
    /// keys other than the one it invokes, so its lookups go no further.
    @usableFromInline var earlier = Int.max

    init(machine: Machine) {
      self.machine = machine
    }

    /// Gives back the outbox's storage once it is empty and either large, after a spike of
    /// invocations, or the last the shard holds: a shard whose keys have all gone quiet holds no
    /// memory (it would pin a page of the malloc arena of the thread that grew it).
    @inlinable
    mutating func releaseIdleOutbox() {
      guard outbox.isEmpty, !isDelivering else { return }
      if held.capacity > 0 { held.releaseStorage() }
      guard outbox.capacity > 0 else { return }
      if outbox.capacity > 64 || keys.count == 0 { outbox.releaseStorage() }
    }

    /// The delivery an invocation of `key` made at `now` joins: the key's undelivered
    /// invocations' (when it was asked for, and whether the key's timer was armed since), or
    /// `nil` for one of its own.
    @inlinable
    func pendingDelivery(of key: Key, now: Int64) -> (requested: Int64, timerAfter: Bool)? {
      // Every invocation pending was asked for at `requestedAt` or later, so at `now` itself
      // joining one or asking anew is the same: the common case, a firing's invocations and a
      // burst's.
      guard isDelivering, requestedAt < now else { return nil }
      if let inFlight, inFlight.key == key { return (inFlight.requested, false) }
      return held.pendingDelivery(of: key, within: held.count)
        ?? outbox.pendingDelivery(of: key, within: Swift.min(outbox.count, earlier))
    }

    /// The key's own timer is armed: its own ``Pacer`` asked for the delivery of its undelivered
    /// invocations before, so at the instant both come, that delivery runs first.
    @inlinable
    mutating func timerArmed(for key: Key) {
      guard isDelivering else { return }
      held.markTimerArmed(for: key, within: held.count)
      outbox.markTimerArmed(for: key, within: Swift.min(outbox.count, earlier))
    }

    /// Whether the deliverer, asked for at ``requestedAt`` and running at `now`, delivers
    /// `invocation`: one asked for no later than it was, or before `now`, whose own deliverer
    /// would have run by now. One asked for at `now` itself, later than the deliverer, waits for
    /// the scheduler's turn its own ``Pacer`` would ask for (a tick later, on a scheduler whose
    /// enqueued work waits for a tick after now); so does one that a timer joined to an earlier
    /// delivery at `now`, if its own ``Pacer`` ran that delivery before the timer.
    @inlinable
    func deliverable(_ invocation: Invocation, now: Int64) -> Bool {
      if invocation.joined == now, invocation.requested < now { return false }
      return invocation.requested <= requestedAt || invocation.requested < now
    }
  }

  /// An invocation waiting for `perform`: the instant, in nanoseconds, its delivery was asked
  /// for; the instant a timer made it, joining a delivery asked for before that timer was armed
  /// (`Int64.min` otherwise); and whether the key's timer was armed after its delivery was asked
  /// for. Its own ``Pacer`` runs that delivery and that timer in the order they were asked for.
  @usableFromInline typealias Invocation = (
    key: Key, value: Value, requested: Int64, joined: Int64, timerAfter: Bool
  )

  /// What a deliverer does next.
  @usableFromInline
  enum Delivery {
    case perform(Key, Value)
    /// What is left was asked for at this instant, after the deliverer: the scheduler's next turn.
    case later
    case done
  }

  /// What to do once the lock is released.
  @usableFromInline
  struct Effects {
    /// The shard's timer, reserved for an earliest deadline earlier than the one it was armed for.
    @usableFromInline var arming: ShardTimer<Key>.Arming?
    @usableFromInline var startDelivery = false

    @inlinable init() {}
  }

  @usableFromInline let scheduler: any PaceScheduler
  @usableFromInline let shards: Shards<Shard>
  @usableFromInline let perform: @Sendable (Key, Value) -> Void

  init(
    configuration: Machine.Configuration, scheduler: any PaceScheduler,
    perform: @escaping @Sendable (Key, Value) -> Void
  ) {
    self.scheduler = scheduler
    self.perform = perform
    shards = Shards(count: keyedShardCount) {
      Shard(machine: Machine(configuration: configuration, state: Machine.idleState))
    }
  }

  deinit {
    // Pending work is dropped with the instance; the timers hold it only weakly.
    for index in shards.indices {
      shards.withLock(index) { $0.timer.removeAll() }?.cancel()
    }
  }

  /// The shard of a key whose `hashValue` is `hash`: ``keyedShardIndex(hash:bitWidth:)``.
  @inlinable @inline(__always)
  static func shardIndex(hash: Int) -> Int {
    keyedShardIndex(hash: hash)
  }

  // MARK: Events

  @inlinable
  func call(_ key: Key, _ value: Value) {
    let hash = key.hashValue
    let index = Self.shardIndex(hash: hash)
    // The key's slot is most likely not in the cache: start loading it, and read the clock and
    // take the lock meanwhile. (`unsafePrefetchHint` is immutable; its words are atomic.)
    KeyTable<Key, Machine.KeyState>.prefetch(
      shards.unsafeShard(index).pointee.state.keys.unsafePrefetchHint, hash: hash)
    // Read before the lock, to keep it short; the machines never go back in time, so a call
    // that read the clock first but locks second counts as simultaneous with the other.
    let now = scheduler.now
    let effects = shards.withLock(index) { shard -> Effects in
      let slot = shard.keys.indexInserting(key, hash: hash, Machine.idleState)
      let (action, armed) = Self.run(slot: slot, in: &shard) { machine in
        (machine.call(value, now: now), machine.armedDeadline)
      }
      var effects = Self.apply(action, for: key, now: now, to: &shard)
      // Both machines leave a timer armed after a call; were one not to, the key is settled
      // as after any other event.
      if armed == nil {
        Self.settle(slot: slot, now: now, in: &shard)
        shard.keys.shrinkIfSparse()
      }
      effects.arming = shard.timer.reserveIfNeeded()
      return effects
    }
    if effects.arming != nil || effects.startDelivery { carryOut(effects, shard: index) }
  }

  @inlinable
  func flush(_ key: Key) {
    let hash = key.hashValue
    let index = Self.shardIndex(hash: hash)
    let now = scheduler.now
    let (effects, stale) = shards.withLock(index) { shard -> (Effects, (any PaceCancellable)?) in
      guard let slot = shard.keys.index(of: key, hash: hash) else { return (Effects(), nil) }
      let value = Self.run(slot: slot, in: &shard) { $0.flush(now: now) }
      var effects = Self.apply(value.map(PacerAction.invoke) ?? .none, for: key, now: now, to: &shard)
      // Nothing left to invoke for the key: its deadline goes, and the shard's timer with it if
      // it was armed for that deadline.
      var stale: (any PaceCancellable)?
      if value != nil, !Self.run(slot: slot, in: &shard, { $0.hasTimer }) {
        stale = shard.timer.removeDeadlines(of: key)
      }
      Self.settle(slot: slot, now: now, in: &shard)
      shard.keys.shrinkIfSparse()
      effects.arming = shard.timer.reserveIfNeeded()
      return (effects, stale)
    }
    stale?.cancel()
    carryOut(effects, shard: index)
  }

  @usableFromInline func flushAll() {
    let now = scheduler.now
    for index in shards.indices {
      let (effects, stale) = shards.withLock(index) { shard -> (Effects, (any PaceCancellable)?) in
        var effects = Effects()
        var flushed: [Key] = []
        for slot in shard.keys.occupiedSlots {
          if let value = Self.run(slot: slot, in: &shard, { $0.flush(now: now) }) {
            let key = shard.keys.key(at: slot)
            flushed.append(key)
            effects.startDelivery =
              Self.enqueue(key, value, now: now, byTimer: false, arming: false, in: &shard) || effects.startDelivery
          }
        }
        guard !flushed.isEmpty else { return (effects, nil) }
        // As in `flush(_:)`: a key with nothing left to invoke loses its deadlines (before it is
        // settled, which may add the check for its `idleFrom`), and the shard's timer with them.
        var done: Set<Key> = []
        for key in flushed {
          guard let slot = shard.keys.index(of: key, hash: key.hashValue),
            !Self.run(slot: slot, in: &shard, { $0.hasTimer })
          else { continue }
          done.insert(key)
        }
        var stale = done.isEmpty ? nil : shard.timer.removeDeadlines { done.contains($0.key) }
        for key in done {
          guard let slot = shard.keys.index(of: key, hash: key.hashValue) else { continue }
          Self.settle(slot: slot, now: now, in: &shard)
        }
        shard.keys.shrinkIfSparse()
        shard.releaseIdleOutbox()
        if shard.keys.count == 0, let timer = shard.timer.removeAll() {
          // Deadlines of keys cancelled earlier, with no key left to invoke.
          stale?.cancel()
          stale = timer
        }
        effects.arming = shard.timer.reserveIfNeeded()
        return (effects, stale)
      }
      stale?.cancel()
      carryOut(effects, shard: index)
    }
  }

  @inlinable
  func cancel(_ key: Key) {
    let hash = key.hashValue
    let index = Self.shardIndex(hash: hash)
    // A cancelled key is idle: forgetting its state is the cancel. Its deadlines go stale; they
    // are taken out (and the timer disarmed or moved) when the shard has no key left or the
    // timer is armed for one of them, so that nothing left to invoke holds a timer. Otherwise
    // they stay until they come out, keeping `cancel` O(1).
    let (stale, arming) = shards.withLock(index) { shard -> ((any PaceCancellable)?, ShardTimer<Key>.Arming?) in
      guard let slot = shard.keys.index(of: key, hash: hash) else { return (nil, nil) }
      shard.keys.remove(at: slot)
      shard.keys.shrinkIfSparse()
      if shard.keys.count == 0 {
        // No timer will fire to give back the outbox's storage, so it goes now.
        shard.releaseIdleOutbox()
        return (shard.timer.removeAll(), nil)
      }
      guard shard.timer.earliestKey == key else { return (nil, nil) }
      let stale = shard.timer.removeDeadlines(of: key)
      return (stale, shard.timer.reserveIfNeeded())
    }
    stale?.cancel()
    if arming != nil {
      var effects = Effects()
      effects.arming = arming
      carryOut(effects, shard: index)
    }
  }

  @usableFromInline func cancelAll() {
    for index in shards.indices {
      shards.withLock(index) { shard -> (any PaceCancellable)? in
        shard.keys.removeAll()
        return shard.timer.removeAll()
      }?.cancel()
    }
  }

  @inlinable
  func isPending(_ key: Key) -> Bool {
    let hash = key.hashValue
    return shards.withLock(Self.shardIndex(hash: hash)) { shard in
      guard let slot = shard.keys.index(of: key, hash: hash) else { return false }
      return Self.run(slot: slot, in: &shard) { $0.isPending }
    }
  }

  /// How many keys hold state.
  @usableFromInline var trackedKeyCount: Int {
    shards.indices.reduce(0) { count, index in count + shards.withLock(index) { $0.keys.count } }
  }

  /// The bytes of storage the shards hold beyond their fixed fields (tables, heaps, outboxes);
  /// 0 once every key has gone quiet. For tests.
  var heldStorageBytes: Int {
    shards.indices.reduce(0) { bytes, index in
      bytes
        + shards.withLock(index) { shard in
          shard.keys.capacity * KeyTable<Key, Machine.KeyState>.slotStride
            + shard.timer.capacity * MemoryLayout<ShardTimer<Key>.Entry>.stride
            + (shard.outbox.capacity + shard.held.capacity) * MemoryLayout<Invocation>.stride
        }
    }
  }

  /// How many deadlines the shards' heaps hold, stale ones included; for tests.
  var timerEntryCount: Int {
    shards.indices.reduce(0) { count, index in count + shards.withLock(index) { $0.timer.count } }
  }

  @inlinable
  func timerFired(shard index: Int, generation: UInt64) {
    let now = scheduler.now
    let effects = shards.withLock(index) { shard -> Effects in
      guard shard.timer.beginFiring(generation: generation, now: now) else { return Effects() }
      var effects = Effects()
      shard.earlier = shard.outbox.count
      defer { shard.earlier = .max }
      while let entry = shard.timer.nextDue() {
        // Stale: the key was cancelled or evicted since.
        guard let slot = shard.keys.index(of: entry.key, hash: entry.key.hashValue) else { continue }
        let action = Self.run(slot: slot, in: &shard) { machine in
          // Otherwise the entry is stale, or it is the check for the key's `idleFrom`.
          machine.armedDeadline == entry.deadline ? machine.timerFired(now: now) : .none
        }
        effects.startDelivery =
          Self.apply(action, for: entry.key, now: now, byTimer: true, to: &shard).startDelivery
          || effects.startDelivery
        Self.settle(slot: slot, now: now, in: &shard)
      }
      // Deadlines added above that are already due run at the scheduler's next turn, after
      // this turn's invocations, as a single-key ``Pacer``'s timer would.
      shard.timer.endFiring()
      Self.dropStaleDeadlines(in: &shard)
      shard.keys.shrinkIfSparse()
      shard.releaseIdleOutbox()
      effects.arming = shard.timer.reserveIfNeeded()
      return effects
    }
    carryOut(effects, shard: index)
  }

  // MARK: Under the lock

  /// Runs `body` on the shard's machine holding the state of the key in `slot`: the state is
  /// swapped in and back out, so a merged `pending` array is never copied either.
  @inlinable @inline(__always)
  static func run<Result>(slot: Int, in shard: inout Shard, _ body: (inout Machine) -> Result) -> Result {
    let state = shard.keys.unsafeValuePointer(at: slot)
    swap(&state.pointee, &shard.machine.state)
    defer { swap(&state.pointee, &shard.machine.state) }
    return body(&shard.machine)
  }

  /// Records the machine's action: a deadline in the heap, a value in the outbox. The caller
  /// calls ``ShardTimer/reserveIfNeeded()`` once before releasing the lock.
  @inlinable @inline(__always)
  static func apply(
    _ action: PacerAction<Value>, for key: Key, now: PaceInstant, byTimer: Bool = false, to shard: inout Shard
  ) -> Effects {
    var effects = Effects()
    switch action {
    case .none:
      return effects
    case .schedule(let deadline):
      shard.timer.add(deadline, for: key)
      if shard.isDelivering { shard.timerArmed(for: key) }
    case .invoke(let value):
      effects.startDelivery = enqueue(key, value, now: now, byTimer: byTimer, arming: false, in: &shard)
    case .invokeAndSchedule(let value, let deadline):
      effects.startDelivery = enqueue(key, value, now: now, byTimer: byTimer, arming: true, in: &shard)
      shard.timer.add(deadline, for: key)
    }
    return effects
  }

  /// Forgets the key in `slot` if its state no longer matters, or adds a check for when it will
  /// not. The caller asks ``KeyTable/shrinkIfSparse()`` once done.
  @inlinable
  static func settle(slot: Int, now: PaceInstant, in shard: inout Shard) {
    let (armed, idleFrom) = run(slot: slot, in: &shard) { ($0.armedDeadline, $0.idleFrom) }
    guard armed == nil, let idleFrom else { return }
    if idleFrom <= now {
      shard.keys.remove(at: slot)
    } else {
      shard.timer.add(idleFrom, for: shard.keys.key(at: slot))
    }
  }

  /// Takes out the earliest deadlines while they invoke nothing (their key was cancelled, or has
  /// moved on), so that the timer is armed only for a deadline that matters: one lookup per
  /// firing when the earliest is live.
  @inlinable
  static func dropStaleDeadlines(in shard: inout Shard) {
    var dropped = false
    defer { if dropped { shard.timer.shrinkIfSparse() } }  // an emptied heap holds no storage
    while let key = shard.timer.earliestKey, let deadline = shard.timer.earliest {
      if let slot = shard.keys.index(of: key, hash: key.hashValue) {
        let (armed, idleFrom) = run(slot: slot, in: &shard) { ($0.armedDeadline, $0.idleFrom) }
        if armed == deadline || (armed == nil && idleFrom == deadline) { return }
      }
      shard.timer.dropEarliest()
      dropped = true
    }
  }

  /// Returns `true` if the caller must start a deliverer. `byTimer`: the key's timer made the
  /// invocation; `arming`: the same event arms the key's timer again, which its own ``Pacer``
  /// does before it asks for a delivery.
  @inlinable
  static func enqueue(
    _ key: Key, _ value: Value, now: PaceInstant, byTimer: Bool, arming: Bool, in shard: inout Shard
  ) -> Bool {
    let now = now.nanoseconds
    guard shard.isDelivering else {
      shard.outbox.append((key: key, value: value, requested: now, joined: .min, timerAfter: false))
      shard.isDelivering = true
      shard.requestedAt = now
      return true
    }
    guard let pending = shard.pendingDelivery(of: key, now: now) else {
      // Any invocation of the key pending was asked for at `now`, before this arming.
      if arming { shard.timerArmed(for: key) }
      shard.outbox.append((key: key, value: value, requested: now, joined: .min, timerAfter: false))
      return false
    }
    if arming { shard.timerArmed(for: key) }
    shard.outbox.append(
      (
        key: key, value: value, requested: pending.requested, joined: byTimer && pending.timerAfter ? now : .min,
        timerAfter: pending.timerAfter || arming
      ))
    return false
  }

  // MARK: After the lock

  @inlinable
  func carryOut(_ effects: Effects, shard index: Int) {
    if let ticket = effects.arming {
      // Reserved under the lock, armed outside it (a scheduler may take locks of its own), kept
      // under it again: ``TimerSlot``'s rule.
      let timer = scheduler.schedule(at: ticket.deadline) { [weak self] in
        self?.timerFired(shard: index, generation: ticket.generation)
      }
      let (installed, superseded) = shards.withLock(index) { $0.timer.install(timer, for: ticket) }
      superseded?.cancel()
      if !installed { timer.cancel() }
    }
    if effects.startDelivery {
      if scheduler.isCurrent {
        deliver(shard: index)
      } else {
        scheduler.enqueue { [weak self] in self?.deliver(shard: index) }
      }
    }
  }

  /// Drains the shard's outbox, one invocation at a time, never holding the lock during `perform`;
  /// what was asked for at this instant after this deliverer goes at the scheduler's next turn
  /// (at once, if the scheduler is current), as its own ``Pacer``'s would.
  @inlinable
  func deliver(shard index: Int) {
    var now = scheduler.now.nanoseconds
    while true {
      let next = shards.withLock(index) { shard -> Delivery in
        shard.inFlight = nil
        while var invocation = shard.outbox.popFirst() {
          // A key with an invocation held keeps its order: the later ones wait with it.
          if shard.deliverable(invocation, now: now),
            shard.held.isEmpty || shard.held.pendingDelivery(of: invocation.key, within: shard.held.count) == nil
          {
            shard.inFlight = (invocation.key, invocation.requested)
            return .perform(invocation.key, invocation.value)
          }
          // Its own delivery is asked for now, after every timer armed so far.
          invocation.requested = now
          invocation.joined = .min
          invocation.timerAfter = false
          shard.held.append(invocation)
        }
        guard !shard.held.isEmpty else {
          shard.isDelivering = false
          shard.releaseIdleOutbox()
          return .done
        }
        swap(&shard.outbox, &shard.held)
        shard.requestedAt = now
        return .later
      }
      switch next {
      case .perform(let key, let value):
        perform(key, value)
      case .done:
        return
      case .later:
        guard scheduler.isCurrent else {
          scheduler.enqueue { [weak self] in self?.deliver(shard: index) }
          return
        }
        now = scheduler.now.nanoseconds
      }
    }
  }
}

extension RingBuffer {
  /// The delivery of `key`'s invocations among the oldest `limit` of this outbox: when it was
  /// asked for, and whether the key's timer was armed since; `nil` if they hold none. A key's
  /// undelivered invocations share their delivery; the oldest has seen every arming since.
  @inlinable
  func pendingDelivery<Key: Equatable, Value>(of key: Key, within limit: Int) -> (requested: Int64, timerAfter: Bool)?
  where Element == (key: Key, value: Value, requested: Int64, joined: Int64, timerAfter: Bool) {
    guard limit > 0, let base = storage.unsafeBase else { return nil }
    var index = head
    for _ in 0..<limit {
      if base[index].key == key { return (base[index].requested, base[index].timerAfter) }
      index += 1
      if index == storage.capacity { index = 0 }
    }
    return nil
  }

  /// Marks `key`'s invocations among the oldest `limit`: its timer was armed after their
  /// delivery was asked for.
  @inlinable
  mutating func markTimerArmed<Key: Equatable, Value>(for key: Key, within limit: Int)
  where Element == (key: Key, value: Value, requested: Int64, joined: Int64, timerAfter: Bool) {
    guard limit > 0, let base = storage.unsafeBase else { return }
    var index = head
    for _ in 0..<limit {
      if base[index].key == key { base[index].timerAfter = true }
      index += 1
      if index == storage.capacity { index = 0 }
    }
  }
}
