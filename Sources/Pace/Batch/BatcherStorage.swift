/// The driver of ``Batcher``: takes the lock, asks the ``BatchMachine``, releases the lock, then
/// starts the batches' tasks, arms the timer and resumes the callers. The user's `send` runs in a
/// batch's task, never under the lock.
@usableFromInline
final class BatcherStorage<Item: Sendable, Output: Sendable>: Sendable {
  // The calls' paths are `@inlinable`, so that they are specialised for the batcher's `Item` and
  // `Output`: unspecialised, each generic type they touch is looked up at run time, which cost
  // more than the call itself. What only tests use (the watchers) stays behind calls that are not
  // inlined.

  /// Sends a batch, and answers each item's output by its index in the batch (`nil`: none).
  @usableFromInline typealias Send = @Sendable ([Item]) async throws -> @Sendable (Int) -> Output?
  /// Called with the items of a failed batch that no caller was told about, and its error.
  @usableFromInline typealias OnFailure = @Sendable ([Item], any Error) -> Void
  @usableFromInline typealias Loader = UnsafeContinuation<Output, any Error>
  @usableFromInline typealias Submitter = UnsafeContinuation<Void, any Error>
  @usableFromInline typealias Watchers = [UnsafeContinuation<Bool, Never>]

  /// A caller's continuation: a `load` waits for its item's output, a `submit` only for room.
  @usableFromInline
  enum Caller {
    case load(Loader)
    case submit(Submitter)
  }

  /// The loaders of one entry: the first inline, the others (those that joined it) in a
  /// dictionary made only when one joins, so that an entry with one loader allocates nothing.
  @usableFromInline
  struct EntryLoaders {
    @usableFromInline var first: (caller: UInt64, loader: Loader)?
    @usableFromInline var others = IntegerKeyTable<UInt64, Loader>()

    @inlinable init(_ caller: UInt64, _ loader: Loader) {
      first = (caller, loader)
    }

    @inlinable var isEmpty: Bool { first == nil && others.isEmpty }

    @inlinable mutating func add(_ caller: UInt64, _ loader: Loader) {
      if first == nil, others.isEmpty { first = (caller, loader) } else { others[caller] = loader }
    }

    @inlinable mutating func remove(_ caller: UInt64) -> Loader? {
      if let first, first.caller == caller {
        self.first = nil
        return first.loader
      }
      return others.removeValue(forKey: caller)
    }

    @inlinable func forEach(_ body: (UInt64, Loader) -> Void) {
      if let first { body(first.caller, first.loader) }
      others.forEach(body)
    }
  }

  @usableFromInline
  struct State {
    @usableFromInline var machine: BatchMachine<Item>
    /// The callers waiting for room, by caller id.
    @usableFromInline var waiting = IntegerKeyTable<UInt64, Caller>()
    /// The caller being added, under the lock, until the machine's action has taken it; it goes
    /// to `waiting` only if it must wait for room (most are buffered at once: no entry in
    /// `waiting` to make and remove).
    @usableFromInline var arriving: (caller: UInt64, continuation: Caller)?
    /// The loaders of each buffered or sent entry, by entry id. Ids, like the callers' below,
    /// come from counters: ``IntegerKeyTable`` places them without hashing them.
    @usableFromInline var loaders = IntegerKeyTable<UInt64, EntryLoaders>()
    /// The entry each loader waits for, to find it when its task is cancelled.
    @usableFromInline var entryOf = IntegerKeyTable<UInt64, UInt64>()
    @usableFromInline var lastCaller: UInt64 = 0
    /// How many calls have reached the machine, and how many batches have ended; for tests.
    @usableFromInline var calls = 0
    @usableFromInline var endedBatches = 0
    @usableFromInline var timer = TimerSlot()
    /// Tests waiting for a condition; empty outside tests.
    @usableFromInline var watchers = ConditionWaiters<Condition>()

    @inlinable init(machine: BatchMachine<Item>) {
      self.machine = machine
    }

    func holds(_ condition: Condition) -> Bool {
      switch condition {
      case .waitingForRoom(let count): machine.waitingCount >= count
      case .loaders(let count): entryOf.count >= count
      case .calls(let count): calls >= count
      case .endedBatches(let count): endedBatches >= count
      }
    }

    /// Takes the continuations the machine's action resumes, and reserves or disarms the timer.
    @inlinable
    mutating func apply(_ action: BatchAction<Item>) -> Effects {
      var effects = Effects()
      for admission in action.admitted {
        switch take(admission.caller) {
        case .load(let loader):
          admit(loader, of: admission.caller, to: admission.entry)
        case .submit(let submitter):
          effects.admitted.append(submitter)
        case nil:
          break
        }
      }
      if let caller = action.rejected, let continuation = take(caller) {
        effects.failed.append((continuation, BatcherError.bufferFull))
      }
      if let caller = action.refused, let continuation = take(caller) {
        effects.failed.append((continuation, CancellationError()))
      }
      for entry in action.dropped {
        loaders.removeValue(forKey: entry)?.forEach { caller, loader in
          entryOf[caller] = nil
          effects.failed.append((.load(loader), BatcherError.dropped))
        }
      }
      effects.batches = action.batches
      if let deadline = action.arm { (effects.arm, effects.superseded) = timer.reserve(at: deadline) }
      if !watchers.isEmpty { effects.watchers = takeReadyWatchers() }
      return effects
    }

    /// `loader`, of `caller`, waits for the output of `entry`.
    @inlinable
    mutating func admit(_ loader: Loader, of caller: UInt64, to entry: UInt64) {
      Self.add(caller, loader, to: &loaders[entry])
      entryOf[caller] = entry
    }

    /// Adds the loader to an entry's loaders, made if it has none: one look-up of the entry.
    @inlinable
    static func add(_ caller: UInt64, _ loader: Loader, to loaders: inout EntryLoaders?) {
      if loaders == nil { loaders = EntryLoaders(caller, loader) } else { loaders?.add(caller, loader) }
    }

    /// The continuation of `caller`, which leaves: the one arriving, or one that waits for room.
    @inlinable
    mutating func take(_ caller: UInt64) -> Caller? {
      if let arriving, arriving.caller == caller {
        self.arriving = nil
        return arriving.continuation
      }
      return waiting.removeValue(forKey: caller)
    }

    @usableFromInline mutating func takeReadyWatchers() -> Watchers {
      var waiting = watchers
      defer { watchers = waiting }
      return waiting.takeReady(holds: holds)
    }
  }

  /// What to do once the lock is released.
  @usableFromInline
  struct Effects {
    @usableFromInline var admitted: [Submitter] = []
    @usableFromInline var failed: [(Caller, any Error)] = []
    /// The batches to send.
    @usableFromInline var batches: [BatchAction<Item>.Batch] = []
    @usableFromInline var arm: TimerSlot.Ticket?
    @usableFromInline var superseded: (any PaceCancellable)?
    @usableFromInline var watchers: Watchers = []

    @inlinable init() {}
  }

  @usableFromInline let clock: AsyncClock
  @usableFromInline let send: Send
  /// How a `load` of an item finds an equal one buffered, where items are `Hashable`.
  @usableFromInline let identity: BatchIdentity<Item>
  @usableFromInline let onFailure: OnFailure?
  @usableFromInline let state: LockedState<State>

  init(
    machine: BatchMachine<Item>, clock: AsyncClock, identity: BatchIdentity<Item>,
    onFailure: OnFailure?, send: @escaping Send
  ) {
    self.clock = clock
    self.send = send
    self.identity = identity
    self.onFailure = onFailure
    state = LockedState(State(machine: machine))
  }

  deinit {
    // Callers hold the storage while they wait; only the timer can be left.
    state.withLock { $0.timer.disarm() }?.cancel()
  }

  /// Adds `item`, whose hash value is `hash`, and waits for its output.
  @inlinable
  func load(_ item: Item, hash: Int, isolation: isolated (any Actor)?) async throws -> Output {
    // A task cancelled already is refused in `add`, under the lock: one check of its
    // cancellation a call (a 16-byte atomic read in the runtime).
    let caller = nextCaller()
    return try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (loader: Loader) in
          add(item, hash: hash, from: caller, .load(loader))
        }
      },
      onCancel: {
        let effects = state.withLock { state -> Effects in
          // Waiting for room: leave the queue. Buffered or sent: the item stays; only the caller leaves.
          if state.waiting[caller] != nil { return state.apply(state.machine.cancel(caller: caller)) }
          var effects = Effects()
          if let entry = state.entryOf.removeValue(forKey: caller),
            let loader = state.loaders[entry]?.remove(caller)
          {
            effects.failed = [(.load(loader), CancellationError())]
          }
          return effects
        }
        carryOut(effects)
      },
      isolation: isolation
    )
  }

  /// Buffers `item` where there is room and nobody waits for it before this item, and returns
  /// `true`; returns `false`, changing nothing, where the caller must wait for room
  /// (``waitForRoom(_:isolation:)``). Synchronous, so that the common case makes no hop to the
  /// caller's executor, no continuation and no suspension; most often with nothing else to do,
  /// no clock to read and no effects to make.
  @inlinable
  func bufferIfRoom(_ item: Item) -> Bool {
    // Only a flag comes out of the lock: an item with effects to make (a batch's first, which
    // arms the timer; its last, which cuts it; any while someone watches) changes nothing here
    // and takes the whole path in `bufferMakingEffects`.
    let buffered = state.withLock { state -> Bool? in
      guard state.machine.hasRoom else { return false }
      guard state.watchers.isEmpty else { return nil }
      // A batcher that only submits (the common case) has no item to hash.
      let quietly =
        state.machine.indexesKeys
        ? state.machine.bufferQuietly(item, hash: self.identity.hash(item))
        : state.machine.bufferQuietly(item)
      guard quietly else { return nil }
      state.calls += 1
      return true
    }
    return buffered ?? bufferMakingEffects(item)
  }

  /// ``bufferIfRoom(_:)`` for an item that has effects to make, in a lock of its own: the item
  /// is buffered as if it came a moment later, or, if the room has gone meanwhile, not at all
  /// (`false`).
  @inlinable @inline(never)
  func bufferMakingEffects(_ item: Item) -> Bool {
    // The clock is read through `self`: a copy of it would retain its closures.
    let effects = state.withLock { state -> Effects? in
      guard state.machine.hasRoom else { return nil }
      state.calls += 1
      let hash = state.machine.indexesKeys ? self.identity.hash(item) : nil
      return state.apply(state.machine.buffer(item, hash: hash, now: self.clock.now()))
    }
    guard let effects else { return false }
    carryOut(effects)
    return true
  }

  /// A `trySubmit` of `item` that found no room (``bufferIfRoom(_:)``): under
  /// ``BatchOverflow/dropOldest`` it is buffered in place of the oldest item, whose loaders are
  /// told; under the other policies it is refused (`false`), and nothing changes.
  @inlinable
  func bufferDroppingOldest(_ item: Item) -> Bool {
    let clock = self.clock
    let effects = state.withLock { state -> Effects? in
      // Nobody waits for room under `.dropOldest`: the item takes its turn at once.
      guard state.machine.overflow == .dropOldest else { return nil }
      state.calls += 1
      state.lastCaller &+= 1
      let hash = state.machine.indexesKeys ? self.identity.hash(item) : nil
      return state.apply(
        state.machine.add(item, hash: hash, caller: state.lastCaller, joins: false, now: clock.now()))
    }
    guard let effects else { return false }
    carryOut(effects)
    return true
  }

  /// Adds `item` for a `submit` that found no room (``bufferIfRoom(_:)``): the caller waits for
  /// room in arrival order, cancellable, unless room appeared meanwhile.
  @inlinable
  func waitForRoom(_ item: Item, isolation: isolated (any Actor)?) async throws {
    let caller = nextCaller()
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (submitter: Submitter) in
          add(item, hash: nil, from: caller, .submit(submitter))
        }
      },
      onCancel: {
        carryOut(state.withLock { $0.apply($0.machine.cancel(caller: caller)) })
      },
      isolation: isolation
    )
  }

  /// Hands `item` to the machine for `caller`, whose continuation waits for room (a `load` joins
  /// an equal item already buffered, found by its hash value `hash`); a caller whose task is
  /// cancelled already fails at once. A submitted item is hashed here, once a `load` has made the
  /// machine index hash values.
  @inlinable
  func add(_ item: Item, hash: Int?, from caller: UInt64, _ continuation: Caller) {
    let joins = if case .load = continuation { true } else { false }
    let effects = state.withLock { state -> Effects in
      guard !Task.isCancelled else {
        var effects = Effects()
        effects.failed = [(continuation, CancellationError())]
        return effects
      }
      state.calls += 1
      if joins, !state.machine.indexesKeys { state.machine.indexKeys(self.identity) }
      let hash = joins ? hash : state.machine.indexesKeys ? self.identity.hash(item) : nil
      // A load that joins an entry, or is buffered behind items that wait, changes nothing else:
      // no clock to read, no action to make (the clock is read through `self` below: a copy of
      // it would retain its closures).
      if state.watchers.isEmpty, case .load(let loader) = continuation,
        let entry = state.machine.addQuietly(item, hash: hash, joins: true)
      {
        state.admit(loader, of: caller, to: entry)
        return Effects()
      }
      state.arriving = (caller, continuation)
      let effects = state.apply(
        state.machine.add(item, hash: hash, caller: caller, joins: joins, now: self.clock.now()))
      if let arriving = state.arriving {
        // Not admitted: it waits for room.
        state.waiting[arriving.caller] = arriving.continuation
        state.arriving = nil
      }
      return effects
    }
    carryOut(effects)
  }

  func flush() {
    let clock = self.clock
    carryOut(state.withLock { $0.apply($0.machine.flush(now: clock.now())) })
  }

  @inlinable
  func nextCaller() -> UInt64 {
    state.withLock { state in
      state.lastCaller &+= 1
      return state.lastCaller
    }
  }

  @usableFromInline
  func timerFired(generation: UInt64) {
    let clock = self.clock
    carryOut(
      state.withLock { state -> Effects in
        guard state.timer.fire(generation) else { return Effects() }
        return state.apply(state.machine.timerFired(now: clock.now()))
      }
    )
  }

  /// The batch ended with `result`: its loaders (those not cancelled) get their outputs, and its
  /// slot is free. A failure nobody was told about (a submitted item's, a cancelled loader's) goes
  /// to `onFailure`, with the lock released. Returns a batch that the free slot made due, for the
  /// ended batch's task to send next; any other is started in a task of its own.
  @inlinable
  func batchEnded(
    _ batch: BatchAction<Item>.Batch, result: Result<@Sendable (Int) -> Output?, any Error>
  ) -> BatchAction<Item>.Batch? {
    let clock = self.clock
    var untold: [Item] = []
    // The loaders of each loaded item, by its index in the batch: taken under the lock, told with
    // it released, each item's output found there too (a look-up in what `send` returned), so
    // that the lock, which the callers adding items wait for, is held only to take them.
    var told: [(index: Int, loaders: EntryLoaders)] = []
    var effects = state.withLock { state -> Effects in
      // Nobody loads (a batcher that only submits): no entry to look up under the lock, which
      // the submitters wait for.
      let anyLoader = !state.loaders.isEmpty
      if !anyLoader { untold = batch.items }
      for (index, entry) in batch.entries.enumerated() where anyLoader {
        guard let group = state.loaders.removeValue(forKey: entry), !group.isEmpty else {
          untold.append(batch.items[index])
          continue
        }
        group.forEach { caller, _ in state.entryOf[caller] = nil }
        told.append((index, group))
      }
      state.endedBatches += 1
      return state.apply(state.machine.batchEnded(now: clock.now()))
    }
    for (index, group) in told {
      let output: Result<Output, any Error> = result.flatMap { outputs in
        outputs(index).map { .success($0) } ?? .failure(BatcherError.noResult)
      }
      group.forEach { _, loader in loader.resume(with: output) }
    }
    if case .failure(let error) = result, !untold.isEmpty { onFailure?(untold, error) }
    let next = effects.batches.isEmpty ? nil : effects.batches.removeFirst()
    carryOut(effects)
    return next
  }

  /// Performs the effects with the lock released.
  @inlinable
  func carryOut(_ effects: Effects) {
    effects.superseded?.cancel()
    if let ticket = effects.arm { arm(ticket) }
    for batch in effects.batches { start(batch) }
    for submitter in effects.admitted { submitter.resume() }
    for (caller, error) in effects.failed {
      switch caller {
      case .load(let loader): loader.resume(throwing: error)
      case .submit(let submitter): submitter.resume(throwing: error)
      }
    }
    for watcher in effects.watchers { watcher.resume(returning: true) }
  }

  /// Arms the timer for `ticket`, with the lock released; once for a buffer's first item.
  @usableFromInline
  func arm(_ ticket: TimerSlot.Ticket) {
    TimerSlot.arm(ticket, schedule: clock.schedule, fire: { [weak self] in self?.timerFired(generation: $0) }) {
      timer in state.withLock { $0.timer.install(timer, for: ticket) }
    }
  }

  /// Sends one batch in a task of its own, which holds the batcher weakly (a batch of submitted
  /// items may outlive it). The task then sends each batch that waited for the slot its batch
  /// freed: batches that queue behind a busy `send` go without a task started, or a thread woken
  /// to run it, for each.
  @inlinable
  func start(_ batch: BatchAction<Item>.Batch) {
    let send = self.send
    Task { [weak self] in
      var next: BatchAction<Item>.Batch? = batch
      while let batch = next {
        let result: Result<@Sendable (Int) -> Output?, any Error>
        do {
          result = .success(try await send(batch.items))
        } catch {
          result = .failure(error)
        }
        next = self?.batchEnded(batch, result: result)
      }
    }
  }

  var bufferedCount: Int { state.withLock { $0.machine.bufferedCount } }

  var inFlightCount: Int { state.withLock { $0.machine.inFlight } }

  var sentBatchCount: Int { state.withLock { $0.machine.sentBatchCount } }

  var loaderCount: Int { state.withLock { $0.entryOf.count } }

  /// What a test waits for.
  @usableFromInline
  enum Condition {
    /// At least this many callers wait for room.
    case waitingForRoom(Int)
    /// At least this many loaders wait for their items' outputs (buffered or sent).
    case loaders(Int)
    /// At least this many calls have reached the machine.
    case calls(Int)
    /// At least this many batches have ended.
    case endedBatches(Int)
  }

  /// Returns `true` once `condition` holds (at once if it does), resumed by the event that makes
  /// it hold, not by polling; or `false` after `timeout` of real time (`nil`: no limit).
  func waitUntil(_ condition: Condition, timeout: Duration?) async -> Bool {
    await state.waitUntil(condition, in: \.watchers, timeout: timeout) { $0.holds($1) }
  }
}
