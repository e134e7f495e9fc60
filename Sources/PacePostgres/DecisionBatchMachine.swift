#if PostgreSQL
/// How decisions waiting for the database are gathered into batches, apart from any clock, lock,
/// task or connection: requests come in, batches and lane instructions come out.
///
/// A lane is a task that sends one batch at a time on one connection, and parks on that
/// connection's event loop while it has nothing to send. A request that finds a lane idle wakes
/// it, so a lone caller waits for nothing but its own round trip; while every lane is busy,
/// requests queue, and the next lane to finish takes up to ``maxBatch`` of them at once.
struct BatchMachine<ID: Hashable & Sendable>: Sendable {
  /// What the driver does after a request came in.
  enum Submitted: Sendable, Equatable {
    /// Nothing: a busy lane takes the request when it finishes.
    case queued
    /// Wake one parked lane.
    case wakeLane
    /// Start one more lane.
    case startLane
  }

  /// The most requests sent in one round trip. Positive.
  let maxBatch: Int
  /// The most lanes, hence connections, used at once. Positive.
  let maxLanes: Int
  /// Requests not yet sent, in call order, behind ``head``; with the ones that left before they
  /// were sent still in place (no longer in ``waiting``), skipped when a batch is taken.
  private var entries: [ID] = []
  /// Where the requests not yet taken begin in ``entries``.
  private var head = 0
  /// The requests not yet sent: a request that leaves is removed here in O(1).
  private var waiting: Set<ID> = []
  /// Requests not yet sent, in call order (for tests: O(n)).
  var queue: [ID] { entries[head...].filter(waiting.contains) }
  /// Lanes started; a lane is never ended: it parks while idle (holding its connection until it
  /// lingered, see ``unpark()``).
  private(set) var lanes = 0
  /// Lanes parked until a request comes (or woken, on their way to ``next()``).
  private(set) var parked = 0
  /// Lanes whose batch was just answered, on their way to ask for the next (``next(finishing:)``,
  /// then ``park(finishing:)``): a request meanwhile waits for one of them rather than starting a
  /// lane, so that a lone caller who asks again before its lane has parked is not sent on a new
  /// lane, which would take another connection.
  private(set) var finishing = 0

  init(maxBatch: Int, maxLanes: Int) {
    precondition(maxBatch > 0, "BatchMachine: maxBatch must be positive (got \(maxBatch))")
    precondition(maxLanes > 0, "BatchMachine: maxLanes must be positive (got \(maxLanes))")
    self.maxBatch = maxBatch
    self.maxLanes = maxLanes
  }

  /// A request comes in. An `id` is not submitted again while it waits.
  mutating func submit(_ id: ID) -> Submitted {
    entries.append(id)
    waiting.insert(id)
    if parked > 0 {
      parked -= 1
      return .wakeLane
    }
    if lanes < maxLanes, finishing == 0 {
      lanes += 1
      return .startLane
    }
    return .queued
  }

  /// A lane's batch was answered: it asks for the next one at once.
  mutating func finished() {
    finishing += 1
  }

  /// A lane asks for its next batch: the oldest requests, up to ``maxBatch``, or nil if there are
  /// none. A lane that ``finished()`` says so (`finishing`): taking a batch ends its finishing.
  mutating func next(finishing isFinishing: Bool = false) -> [ID]? {
    guard !waiting.isEmpty else {
      entries.removeAll(keepingCapacity: entries.count < 1024)
      head = 0
      return nil
    }
    var batch: [ID] = []
    batch.reserveCapacity(Swift.min(maxBatch, waiting.count))
    while batch.count < maxBatch, head < entries.count {
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

  /// A lane with nothing to do parks, unless a request came meanwhile: false means "take it". A
  /// lane that ``finished()`` says so (`finishing`): its finishing ends either way.
  mutating func park(finishing isFinishing: Bool = false) -> Bool {
    if isFinishing { finishing -= 1 }
    guard waiting.isEmpty else { return false }
    parked += 1
    return true
  }

  /// A parked lane leaves its parking without a request, to give its pool connection back after it
  /// lingered idle: it is busy until it asks for work again (``next()``, then ``park()``), so that
  /// no caller counts on it to be woken meanwhile.
  mutating func unpark() {
    precondition(parked > 0, "BatchMachine: unpark() without a parked lane")
    parked -= 1
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
