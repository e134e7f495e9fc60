/// The driver of ``Batcher``: takes the lock, asks the ``BatchMachine``, releases the lock, then
/// starts the batches' tasks, arms the timer and resumes the callers. The user's `send` runs in a
/// batch's task, never under the lock.
final class BatcherStorage<Item: Sendable, Output: Sendable>: Sendable {
  /// Sends a batch, and answers each item's output by its index in the batch (`nil`: none).
  typealias Send = @Sendable ([Item]) async throws -> @Sendable (Int) -> Output?
  /// Called with the items of a failed batch that no caller was told about, and its error.
  typealias OnFailure = @Sendable ([Item], any Error) -> Void
  typealias Loader = UnsafeContinuation<Output, any Error>
  typealias Submitter = UnsafeContinuation<Void, any Error>

  /// A caller's continuation: a `load` waits for its item's output, a `submit` only for room.
  enum Caller {
    case load(Loader)
    case submit(Submitter)
  }

  struct State {
    var machine: BatchMachine<Item>
    /// The callers waiting for room, by caller id.
    var waiting: [UInt64: Caller] = [:]
    /// The loaders of each buffered or sent entry, by entry id, then caller id.
    var loaders: [UInt64: [UInt64: Loader]] = [:]
    /// The entry each loader waits for, to find it when its task is cancelled.
    var entryOf: [UInt64: UInt64] = [:]
    var lastCaller: UInt64 = 0
    /// How many calls have reached the machine, and how many batches have ended; for tests.
    var calls = 0
    var endedBatches = 0
    var timer = TimerSlot()
    /// Tests waiting for a condition; empty outside tests.
    var watchers = ConditionWaiters<Condition>()

    func holds(_ condition: Condition) -> Bool {
      switch condition {
      case .waitingForRoom(let count): machine.waitingCount >= count
      case .loaders(let count): entryOf.count >= count
      case .calls(let count): calls >= count
      case .endedBatches(let count): endedBatches >= count
      }
    }

    /// Takes the continuations the machine's action resumes, and reserves or disarms the timer.
    mutating func apply(_ action: BatchAction<Item>) -> Effects {
      var effects = Effects()
      for admission in action.admitted {
        switch waiting.removeValue(forKey: admission.caller) {
        case .load(let loader):
          loaders[admission.entry, default: [:]][admission.caller] = loader
          entryOf[admission.caller] = admission.entry
        case .submit(let submitter):
          effects.admitted.append(submitter)
        case nil:
          break
        }
      }
      for caller in [action.rejected, action.refused].compactMap({ $0 }) {
        guard let continuation = waiting.removeValue(forKey: caller) else { continue }
        let error: any Error = caller == action.rejected ? BatcherError.bufferFull : CancellationError()
        effects.failed.append((continuation, error))
      }
      for entry in action.dropped {
        for (caller, loader) in loaders.removeValue(forKey: entry) ?? [:] {
          entryOf[caller] = nil
          effects.failed.append((.load(loader), BatcherError.dropped))
        }
      }
      effects.batches = action.batches
      switch action.timer {
      case .arm(let deadline): (effects.arm, effects.superseded) = timer.reserve(at: deadline)
      case .disarm: effects.superseded = timer.disarm()
      case nil: break
      }
      var waiting = watchers
      effects.watchers = waiting.takeReady(holds: holds)
      watchers = waiting
      return effects
    }
  }

  /// What to do once the lock is released.
  struct Effects {
    var admitted: [Submitter] = []
    var failed: [(Caller, any Error)] = []
    /// The batches to send.
    var batches: [BatchAction<Item>.Batch] = []
    /// The loaders of a batch that ended, each with its output.
    var outputs: [(Loader, Result<Output, any Error>)] = []
    var arm: TimerSlot.Ticket?
    var superseded: (any PaceCancellable)?
    var watchers: [UnsafeContinuation<Bool, Never>] = []
  }

  let clock: AsyncClock
  let send: Send
  /// What a `load` of an item joins by: the item itself where it is `Hashable`, `nil` otherwise.
  let key: @Sendable (Item) -> BatchKey?
  let onFailure: OnFailure?
  let state: LockedState<State>

  init(
    machine: BatchMachine<Item>, clock: AsyncClock, key: @escaping @Sendable (Item) -> BatchKey?,
    onFailure: OnFailure?, send: @escaping Send
  ) {
    self.clock = clock
    self.send = send
    self.key = key
    self.onFailure = onFailure
    state = LockedState(State(machine: machine))
  }

  deinit {
    // Callers hold the storage while they wait; only the timer can be left.
    state.withLock { $0.timer.disarm() }?.cancel()
  }

  /// Adds `item`, joined by `key`, and waits for its output.
  func load(_ item: Item, key: BatchKey, isolation: isolated (any Actor)?) async throws -> Output {
    try Task.checkCancellation()
    let caller = nextCaller()
    return try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (loader: Loader) in
          add(item, key: key, from: caller, .load(loader))
        }
      },
      onCancel: {
        let effects = state.withLock { state -> Effects in
          // Waiting for room: leave the queue. Buffered or sent: the item stays; only the caller leaves.
          if state.waiting[caller] != nil { return state.apply(state.machine.cancel(caller: caller)) }
          var effects = Effects()
          if let entry = state.entryOf.removeValue(forKey: caller),
            let loader = state.loaders[entry]?.removeValue(forKey: caller)
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

  func submit(_ item: Item, isolation: isolated (any Actor)?) async throws {
    try Task.checkCancellation()
    let caller = nextCaller()
    let key = self.key(item)
    try await withTaskCancellationHandler(
      operation: {
        try await withUnsafeThrowingContinuation(isolation: isolation) { (submitter: Submitter) in
          add(item, key: key, from: caller, .submit(submitter))
        }
      },
      onCancel: {
        carryOut(state.withLock { $0.apply($0.machine.cancel(caller: caller)) })
      },
      isolation: isolation
    )
  }

  /// Hands `item` to the machine for `caller`, whose continuation waits for room (a `load` joins
  /// an equal item already buffered); a caller whose task is cancelled already fails at once.
  private func add(_ item: Item, key: BatchKey?, from caller: UInt64, _ continuation: Caller) {
    let clock = self.clock
    let joins = if case .load = continuation { true } else { false }
    let effects = state.withLock { state -> Effects in
      guard !Task.isCancelled else {
        var effects = Effects()
        effects.failed = [(continuation, CancellationError())]
        return effects
      }
      state.calls += 1
      state.waiting[caller] = continuation
      return state.apply(state.machine.add(item, key: key, caller: caller, joins: joins, now: clock.now()))
    }
    carryOut(effects)
  }

  func flush() {
    let clock = self.clock
    carryOut(state.withLock { $0.apply($0.machine.flush(now: clock.now())) })
  }

  private func nextCaller() -> UInt64 {
    state.withLock { state in
      state.lastCaller &+= 1
      return state.lastCaller
    }
  }

  private func timerFired(generation: UInt64) {
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
  /// to `onFailure`, with the lock released.
  private func batchEnded(
    _ batch: BatchAction<Item>.Batch, result: Result<@Sendable (Int) -> Output?, any Error>
  ) {
    let clock = self.clock
    var untold: [Item] = []
    let effects = state.withLock { state -> Effects in
      var outputs: [(Loader, Result<Output, any Error>)] = []
      for (index, entry) in batch.entries.enumerated() {
        guard let group = state.loaders.removeValue(forKey: entry), !group.isEmpty else {
          untold.append(batch.items[index])
          continue
        }
        let output: Result<Output, any Error> = result.flatMap { outputs in
          outputs(index).map { .success($0) } ?? .failure(BatcherError.noResult)
        }
        for (caller, loader) in group {
          state.entryOf[caller] = nil
          outputs.append((loader, output))
        }
      }
      state.endedBatches += 1
      var effects = state.apply(state.machine.batchEnded(now: clock.now()))
      effects.outputs = outputs
      return effects
    }
    if case .failure(let error) = result, !untold.isEmpty { onFailure?(untold, error) }
    carryOut(effects)
  }

  /// Performs the effects with the lock released.
  private func carryOut(_ effects: Effects) {
    effects.superseded?.cancel()
    if let ticket = effects.arm {
      TimerSlot.arm(ticket, schedule: clock.schedule, fire: { [weak self] in self?.timerFired(generation: $0) }) {
        timer in state.withLock { $0.timer.install(timer, for: ticket) }
      }
    }
    for (loader, output) in effects.outputs { loader.resume(with: output) }
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

  /// Sends one batch in a task of its own, which holds the batcher weakly (a batch of submitted
  /// items may outlive it).
  private func start(_ batch: BatchAction<Item>.Batch) {
    let send = self.send
    Task { [weak self] in
      let result: Result<@Sendable (Int) -> Output?, any Error>
      do {
        result = .success(try await send(batch.items))
      } catch {
        result = .failure(error)
      }
      self?.batchEnded(batch, result: result)
    }
  }

  var bufferedCount: Int { state.withLock { $0.machine.bufferedCount } }

  var inFlightCount: Int { state.withLock { $0.machine.inFlight } }

  var sentBatchCount: Int { state.withLock { $0.machine.sentBatchCount } }

  var loaderCount: Int { state.withLock { $0.entryOf.count } }

  /// What a test waits for.
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
