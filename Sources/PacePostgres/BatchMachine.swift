#if PostgreSQL
/// How decisions waiting for the database are gathered into batches, apart from any clock, lock,
/// task or connection: requests come in, batches and lane instructions come out.
///
/// A lane is a task that sends one batch at a time on one connection. A request that finds a lane
/// idle wakes it, so a lone caller waits for nothing but its own round trip; while every lane is
/// busy, requests queue, and the next lane to finish takes up to ``maxBatch`` of them at once.
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
  /// Requests not yet sent, in call order.
  private(set) var queue: [ID] = []
  /// Lanes started; a lane is never ended: it parks while idle, holding no pool connection.
  private(set) var lanes = 0
  /// Lanes parked until a request comes (or woken, on their way to ``next()``).
  private(set) var parked = 0

  init(maxBatch: Int, maxLanes: Int) {
    precondition(maxBatch > 0, "BatchMachine: maxBatch must be positive (got \(maxBatch))")
    precondition(maxLanes > 0, "BatchMachine: maxLanes must be positive (got \(maxLanes))")
    self.maxBatch = maxBatch
    self.maxLanes = maxLanes
  }

  /// A request comes in.
  mutating func submit(_ id: ID) -> Submitted {
    queue.append(id)
    if parked > 0 {
      parked -= 1
      return .wakeLane
    }
    if lanes < maxLanes {
      lanes += 1
      return .startLane
    }
    return .queued
  }

  /// A lane asks for its next batch: the oldest requests, up to ``maxBatch``, or nil if there are
  /// none (the lane keeps its connection only while there is work).
  mutating func next() -> [ID]? {
    guard !queue.isEmpty else { return nil }
    let batch = Array(queue.prefix(maxBatch))
    queue.removeFirst(batch.count)
    return batch
  }

  /// A lane with nothing to do parks, unless a request came meanwhile: false means "take it".
  mutating func park() -> Bool {
    guard queue.isEmpty else { return false }
    parked += 1
    return true
  }

  /// A request left before it was sent (it timed out or was cancelled).
  mutating func remove(_ ids: Set<ID>) {
    guard !ids.isEmpty else { return }
    queue.removeAll { ids.contains($0) }
  }
}
#endif
