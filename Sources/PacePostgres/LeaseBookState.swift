#if PostgreSQL
import Pace

/// The permits one ``PostgresConcurrencyLimiter`` holds, apart from any clock, lock or database:
/// each permit's lease, whether the database still counts it, and how many of each key's permits
/// this instance holds (what its share is checked against while the database is away).
struct LeaseBookState: Sendable, Equatable {
  /// One permit held by this instance.
  struct Lease: Sendable, Equatable {
    let key: String
    let priority: AdmissionPriority
    /// Whether the permit has a row in the database, renewed by the heartbeat: false for a permit
    /// admitted by the failure mode, or one whose row expired before it was renewed.
    var inDatabase: Bool
  }

  /// By lease id.
  private(set) var leases: [String: Lease] = [:]
  /// This instance's permits of each key; a key with none is absent.
  private(set) var inFlight: [String: Int] = [:]

  /// How many permits this instance holds, over every key.
  var count: Int { leases.count }

  /// The leases the heartbeat renews: those the database counts.
  var renewable: [String] { leases.filter(\.value.inDatabase).map(\.key) }

  /// The database admitted `id` for `key`.
  mutating func admitted(_ id: String, key: String, priority: AdmissionPriority) {
    leases[id] = Lease(key: key, priority: priority, inDatabase: true)
    inFlight[key, default: 0] += 1
  }

  /// The failure mode's admission: `id` takes a place of `key` if this instance holds fewer than
  /// `bound` of its permits (those the database counted before it went away included).
  mutating func admitLocally(_ id: String, key: String, priority: AdmissionPriority, bound: Int) -> Bool {
    guard inFlight[key, default: 0] < bound else { return false }
    leases[id] = Lease(key: key, priority: priority, inDatabase: false)
    inFlight[key, default: 0] += 1
    return true
  }

  /// The permit `id` was released: its lease, to delete if the database counts it; nil if it was
  /// released already.
  mutating func released(_ id: String) -> Lease? {
    guard let lease = leases.removeValue(forKey: id) else { return nil }
    let left = inFlight[lease.key, default: 1] - 1
    inFlight[lease.key] = left > 0 ? left : nil
    return lease
  }

  /// A renewal asked for `asked` and the database renewed `kept`: the others it asked for that
  /// are still held had expired (the database no longer counts them; they are not renewed again).
  /// Returns how many were lost.
  mutating func renewed(asked: [String], kept: Set<String>) -> Int {
    var lost = 0
    for id in asked where !kept.contains(id) {
      guard leases[id]?.inDatabase == true else { continue }
      leases[id]?.inDatabase = false
      lost += 1
    }
    return lost
  }
}
#endif
