#if PostgreSQL
/// How a rate-limit store's decisions waiting for the database are gathered into batches, apart
/// from any clock, lock, task or connection: requests come in, batches and lane instructions come
/// out. (Not Pace's `Batcher`'s machine, which gathers a user's items.)
///
/// A lane is a task that sends one batch at a time on one connection. The store's `run()` starts
/// every lane, each waiting (parked) without a connection until work comes; a lane that has sent a
/// batch parks on its connection's event loop, holding the connection, until it gives it back
/// (``unpark()``). A request that finds a lane holding a connection parked wakes it, so a lone
/// caller waits for nothing but its own round trip; a lane without one is woken only when no lane
/// is on its way to ask for work (``finished()``), so that a lone caller who asks again at once is
/// sent on the connection it used rather than on a second one. While every lane is busy, requests
/// queue, and the next lane to ask takes up to ``maximumBatch`` of them at once.
struct DecisionBatchMachine<ID: Hashable & Sendable>: Sendable {
  /// What the driver does after a request came in.
  enum Submitted: Sendable, Equatable {
    /// Nothing: a busy lane takes the request when it asks for work.
    case queued
    /// Wake one parked lane that holds a connection.
    case wakeHoldingLane
    /// Wake one parked lane that holds no connection: it takes one.
    case wakeIdleLane
  }

  /// The most requests sent in one round trip. Positive.
  let maximumBatch: Int
  /// Requests not yet sent, in call order, behind ``head``; with the ones that left before they
  /// were sent still in place (no longer in ``waiting``), skipped when a batch is taken.
  private var entries: [ID] = []
  /// Where the requests not yet taken begin in ``entries``.
  private var head = 0
  /// The requests not yet sent: a request that leaves is removed here in O(1).
  private var waiting: Set<ID> = []
  /// Requests not yet sent, in call order (for tests: O(n)).
  var queue: [ID] { entries[head...].filter(waiting.contains) }
  /// Lanes parked holding a connection until a request comes (or woken, on their way to ``next()``).
  private(set) var parkedHolding = 0
  /// Lanes parked without a connection until a request comes (or woken, on their way to ``next()``).
  private(set) var parkedIdle = 0
  /// Lanes parked, with a connection or without.
  var parked: Int { parkedHolding + parkedIdle }
  /// Lanes whose batch was just answered, on their way to ask for the next (``next(finishing:)``,
  /// then ``park(holding:finishing:)``): a request meanwhile waits for one of them rather than
  /// waking a lane without a connection, which would take another connection.
  private(set) var finishing = 0

  init(maximumBatch: Int) {
    precondition(maximumBatch > 0, "DecisionBatchMachine: maximumBatch must be positive (got \(maximumBatch))")
    self.maximumBatch = maximumBatch
  }

  /// A request comes in. An `id` is not submitted again while it waits.
  mutating func submit(_ id: ID) -> Submitted {
    entries.append(id)
    waiting.insert(id)
    if parkedHolding > 0 {
      parkedHolding -= 1
      return .wakeHoldingLane
    }
    if parkedIdle > 0, finishing == 0 {
      parkedIdle -= 1
      return .wakeIdleLane
    }
    return .queued
  }

  /// A lane's batch was answered: it asks for the next one at once.
  mutating func finished() {
    finishing += 1
  }

  /// A lane asks for its next batch: the oldest requests, up to ``maximumBatch``, or nil if there
  /// are none. A lane that ``finished()`` says so (`finishing`): taking a batch ends its finishing.
  mutating func next(finishing isFinishing: Bool = false) -> [ID]? {
    guard !waiting.isEmpty else {
      entries.removeAll(keepingCapacity: entries.count < 1024)
      head = 0
      return nil
    }
    var batch: [ID] = []
    batch.reserveCapacity(Swift.min(maximumBatch, waiting.count))
    while batch.count < maximumBatch, head < entries.count {
      let id = entries[head]
      head += 1
      if waiting.remove(id) != nil { batch.append(id) }
    }
    // The taken prefix goes once it is half the storage: O(1) per request, amortised.
    if head > entries.count / 2 {
      entries.removeFirst(head)
      head = 0
    }
    if isFinishing { finishing -= 1 }
    return batch
  }

  /// A lane with nothing to do parks, `holding` a connection or not, unless a request came
  /// meanwhile: false means "take it". A lane that ``finished()`` says so (`finishing`): its
  /// finishing ends either way.
  mutating func park(holding: Bool, finishing isFinishing: Bool = false) -> Bool {
    if isFinishing { finishing -= 1 }
    guard waiting.isEmpty else { return false }
    if holding { parkedHolding += 1 } else { parkedIdle += 1 }
    return true
  }

  /// A lane parked holding a connection leaves its parking without a request, to give the pool
  /// connection back after it lingered idle: it is busy until it asks for work again (``next()``,
  /// then ``park(holding:finishing:)``), so that no caller counts on it to be woken meanwhile.
  mutating func unpark() {
    precondition(parkedHolding > 0, "DecisionBatchMachine: unpark() without a lane parked holding a connection")
    parkedHolding -= 1
  }

  /// Requests left before they were sent (they timed out or were cancelled): O(1) each, whatever
  /// the queue's length; their places are skipped when a batch is taken, and the queue is compacted
  /// once they are most of it.
  mutating func remove(_ ids: some Sequence<ID>) {
    for id in ids { waiting.remove(id) }
    let pending = entries.count - head
    if pending > 64, pending > 4 * waiting.count {
      entries = entries[head...].filter(waiting.contains)
      head = 0
    }
  }
}
#endif
