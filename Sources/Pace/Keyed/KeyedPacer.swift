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
/// table of key states, one ``ShardTimer`` for all its keys' deadlines and one outbox. Under the
/// lock it runs the key's machine (built from the shared configuration and the key's state) and
/// records what to do; after the lock it arms the scheduler timer or delivers. A key whose state
/// stops mattering is removed from the table at once, or when its ``KeyedPacerMachine/idleFrom``
/// comes, so idle keys take no memory.
///
/// Each shard's outbox is drained by one deliverer at a time, so invocations of one key never
/// overlap and arrive in order (and so do those of keys that share a shard).
@usableFromInline
final class KeyedPacer<Key: Hashable & Sendable, Machine: KeyedPacerMachine>: Sendable {
  @usableFromInline typealias Value = Machine.Value

  @usableFromInline
  struct Shard {
    @usableFromInline var keys: [Key: Machine.KeyState] = [:]
    @usableFromInline var timer = ShardTimer<Key>()
    /// Invocations waiting for `perform`, oldest first.
    @usableFromInline var outbox = FIFO<(Key, Value)>()
    /// Whether a deliverer is draining the outbox or has been dispatched to.
    @usableFromInline var isDelivering = false

    @usableFromInline init() {}
  }

  /// What to do once the lock is released.
  @usableFromInline
  struct Effects {
    @usableFromInline var arming: ShardTimer<Key>.Arming?
    @usableFromInline var startDelivery = false

    @inlinable init() {}

    @inlinable var isEmpty: Bool { arming == nil && !startDelivery }
  }

  @usableFromInline let configuration: Machine.Configuration
  @usableFromInline let scheduler: any PaceScheduler
  @usableFromInline let shards: [ShardLock<Shard>]
  private let perform: @Sendable (Key, Value) -> Void

  init(
    configuration: Machine.Configuration, scheduler: any PaceScheduler,
    perform: @escaping @Sendable (Key, Value) -> Void
  ) {
    self.configuration = configuration
    self.scheduler = scheduler
    self.perform = perform
    shards = (0..<keyedShardCount).map { _ in ShardLock(Shard()) }
  }

  deinit {
    // Pending work is dropped with the instance; the timers hold it only weakly.
    for shard in shards {
      shard.withLock { $0.timer.removeAll() }?.cancel()
    }
  }

  @inlinable
  func shardIndex(for key: Key) -> Int {
    // The table hashes with its own per-instance seed, so reusing `hashValue`'s low bits here
    // does not crowd the table.
    key.hashValue & (keyedShardCount - 1)
  }

  // MARK: Events

  @inlinable
  func call(_ key: Key, _ value: Value) {
    let index = shardIndex(for: key)
    let this = Unmanaged.passUnretained(self)
    let configuration = self.configuration
    let effects = shards[index].withLock { shard -> Effects in
      var armed: PaceInstant?
      let action = Self.run(on: &shard.keys[key, default: Machine.idleState], configuration) { machine in
        let action = machine.call(value, now: this._withUnsafeGuaranteedRef { $0.scheduler.now })
        armed = machine.armedDeadline
        return action
      }
      var effects = Self.apply(action, for: key, to: &shard)
      // Both machines leave a timer armed after a call; were one not to, the key is settled
      // as after any other event.
      if armed == nil {
        Self.settle(key, now: this._withUnsafeGuaranteedRef { $0.scheduler.now }, configuration, in: &shard)
      }
      effects.arming = shard.timer.armIfNeeded()
      return effects
    }
    carryOut(effects, shard: index)
  }

  func flush(_ key: Key) {
    let now = scheduler.now
    let index = shardIndex(for: key)
    let effects = shards[index].withLock { shard -> Effects in
      guard shard.keys[key] != nil else { return Effects() }
      let value = Self.run(on: &shard.keys[key]!, configuration) { $0.flush(now: now) }
      var effects = Self.apply(value.map(PacerAction.invoke) ?? .none, for: key, to: &shard)
      Self.settle(key, now: now, configuration, in: &shard)
      effects.arming = shard.timer.armIfNeeded()
      return effects
    }
    carryOut(effects, shard: index)
  }

  func flushAll() {
    let now = scheduler.now
    for index in shards.indices {
      let effects = shards[index].withLock { shard -> Effects in
        var effects = Effects()
        for position in shard.keys.values.indices {
          let value = Self.run(on: &shard.keys.values[position], configuration) { $0.flush(now: now) }
          if let value {
            let key = shard.keys.keys[position]
            effects.startDelivery = Self.enqueue((key, value), in: &shard) || effects.startDelivery
          }
        }
        // Flushing leaves the timers armed: keys are settled when they fire.
        return effects
      }
      carryOut(effects, shard: index)
    }
  }

  func cancel(_ key: Key) {
    let index = shardIndex(for: key)
    // A cancelled key is idle: forgetting its state is the cancel. Its heap entry goes stale.
    shards[index].withLock { shard in
      _ = shard.keys.removeValue(forKey: key)
      shard.keys.shrinkIfSparse()
    }
  }

  func cancelAll() {
    for shard in shards {
      shard.withLock { shard -> (any PaceCancellable)? in
        shard.keys = [:]
        return shard.timer.removeAll()
      }?.cancel()
    }
  }

  func isPending(_ key: Key) -> Bool {
    let configuration = self.configuration
    return shards[shardIndex(for: key)].withLock { shard in
      guard let state = shard.keys[key] else { return false }
      return Machine(configuration: configuration, state: state).isPending
    }
  }

  /// How many keys hold state.
  var trackedKeyCount: Int {
    shards.reduce(0) { count, shard in count + shard.withLock { $0.keys.count } }
  }

  /// How many deadlines the shards' heaps hold, stale ones included; for tests.
  var timerEntryCount: Int {
    shards.reduce(0) { count, shard in count + shard.withLock { $0.timer.count } }
  }

  private func timerFired(shard index: Int, generation: UInt64) {
    let now = scheduler.now
    let configuration = self.configuration
    let effects = shards[index].withLock { shard -> Effects in
      guard let due = shard.timer.fired(generation: generation, now: now) else { return Effects() }
      var effects = Effects()
      for entry in due {
        // Stale: the key was cancelled or evicted since.
        guard shard.keys[entry.key] != nil else { continue }
        let action = Self.run(on: &shard.keys[entry.key]!, configuration) { machine in
          // Otherwise the entry is stale, or it is the check for the key's `idleFrom`.
          machine.armedDeadline == entry.deadline ? machine.timerFired(now: now) : .none
        }
        effects.startDelivery = Self.apply(action, for: entry.key, to: &shard).startDelivery || effects.startDelivery
        Self.settle(entry.key, now: now, configuration, in: &shard)
      }
      shard.keys.shrinkIfSparse()
      // Deadlines added above that are already due run at the scheduler's next turn, after
      // this turn's invocations, as a single-key ``Pacer``'s timer would.
      effects.arming = shard.timer.armIfNeeded()
      return effects
    }
    carryOut(effects, shard: index)
  }

  // MARK: Under the lock

  /// Runs `body` on the machine of a key's state, in place: the state is moved into the machine
  /// and back, so a merged `pending` array is never copied.
  @inlinable @inline(__always)
  static func run<Result>(
    on state: inout Machine.KeyState, _ configuration: Machine.Configuration, _ body: (inout Machine) -> Result
  ) -> Result {
    var machine = Machine(configuration: configuration, state: Machine.idleState)
    swap(&state, &machine.state)
    defer { swap(&state, &machine.state) }
    return body(&machine)
  }

  /// Records the machine's action: a deadline in the heap, a value in the outbox. The caller
  /// asks ``ShardTimer/armIfNeeded()`` once before releasing the lock.
  @inlinable @inline(__always)
  static func apply(_ action: PacerAction<Value>, for key: Key, to shard: inout Shard) -> Effects {
    var effects = Effects()
    switch action {
    case .none:
      return effects
    case .schedule(let deadline):
      shard.timer.add(deadline, for: key)
    case .invoke(let value):
      effects.startDelivery = enqueue((key, value), in: &shard)
    case .invokeAndSchedule(let value, let deadline):
      effects.startDelivery = enqueue((key, value), in: &shard)
      shard.timer.add(deadline, for: key)
    }
    return effects
  }

  /// Forgets the key if its state no longer matters, or adds a check for when it will not.
  @usableFromInline
  static func settle(
    _ key: Key, now: PaceInstant, _ configuration: Machine.Configuration, in shard: inout Shard
  ) {
    guard shard.keys[key] != nil else { return }
    let (armed, idleFrom) = run(on: &shard.keys[key]!, configuration) { ($0.armedDeadline, $0.idleFrom) }
    guard armed == nil, let idleFrom else { return }
    if idleFrom <= now {
      shard.keys.removeValue(forKey: key)
    } else {
      shard.timer.add(idleFrom, for: key)
    }
  }

  /// Returns `true` if the caller must start a deliverer.
  @inlinable
  static func enqueue(_ invocation: (Key, Value), in shard: inout Shard) -> Bool {
    shard.outbox.append(invocation)
    guard !shard.isDelivering else { return false }
    shard.isDelivering = true
    return true
  }

  // MARK: After the lock

  @inlinable
  func carryOut(_ effects: Effects, shard index: Int) {
    if effects.isEmpty { return }
    carryOutSlowly(effects, shard: index)
  }

  @usableFromInline
  func carryOutSlowly(_ effects: Effects, shard index: Int) {
    if let arming = effects.arming {
      arming.superseded?.cancel()
      // Armed outside the lock: a scheduler may take locks of its own.
      let generation = arming.generation
      let timer = scheduler.schedule(at: arming.deadline) { [weak self] in
        self?.timerFired(shard: index, generation: generation)
      }
      if !shards[index].withLock({ $0.timer.armed(timer, generation: generation) }) {
        timer.cancel()
      }
    }
    if effects.startDelivery {
      if scheduler.isCurrent {
        deliver(shard: index)
      } else {
        scheduler.enqueue { [weak self] in self?.deliver(shard: index) }
      }
    }
  }

  /// Drains the shard's outbox, one invocation at a time, never holding the lock during `perform`.
  private func deliver(shard index: Int) {
    while let (key, value) = shards[index].withLock({ shard -> (Key, Value)? in
      guard let invocation = shard.outbox.popFirst() else {
        shard.isDelivering = false
        // After a spike of invocations, give the outbox's storage back.
        if shard.outbox.slots.capacity > 64 { shard.outbox = FIFO() }
        return nil
      }
      return invocation
    }) {
      perform(key, value)
    }
  }
}
