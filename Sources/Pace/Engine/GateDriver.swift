/// The button-bashing guard's logic: PaceUI's `ControlGate` and Pace's deprecated
/// `InteractionGate` (the gate's 0.3.0 name, which cannot move between modules) are each a face
/// of one of these, so both names behave alike and share one gate on the main queue.
///
/// Overlapping closures are counted per target: a target stays disabled until the last closure
/// that covers it has ended, then gets back the `isEnabled` it had when the first began. Targets
/// are held weakly; the driver stays alive while it has closures pending (their timers hold it).
@MainActor
package final class GateDriver {
  /// The gate on the main queue behind `ControlGate.shared` and `InteractionGate.shared`.
  package static let shared = GateDriver(scheduler: .main)

  private struct Entry {
    /// Tells this entry from an older one for an object that had the same address.
    var generation: UInt64
    weak var target: (any Enablable)?
    /// How many closures cover the target.
    var holds: Int
    /// `isEnabled` when the first of those closures began.
    var restoredValue: Bool
  }

  private struct Closure {
    var targets: [(id: ObjectIdentifier, generation: UInt64)]
    var timer: any PaceCancellable
  }

  private let scheduler: any PaceScheduler
  private var entries: [ObjectIdentifier: Entry] = [:]
  private var closures: [UInt64: Closure] = [:]
  private var nextClosureID: UInt64 = 0
  private var nextGeneration: UInt64 = 0

  /// A gate whose closures end on `scheduler`, which runs work on the main actor.
  package init(scheduler: any PaceScheduler) {
    self.scheduler = scheduler
  }

  /// Disables `targets` now and restores them after `duration`; `type` names the caller's type in
  /// the precondition's message.
  package func close(_ type: StaticString, _ targets: [any Enablable], for duration: Duration) {
    precondition(duration >= .zero, "\(type).close: duration must not be negative (got \(duration))")
    var covered: [(id: ObjectIdentifier, generation: UInt64)] = []
    for target in targets {
      let id = ObjectIdentifier(target)
      guard !covered.contains(where: { $0.id == id }) else { continue }
      if var entry = entries[id], entry.target === target {
        entry.holds += 1
        entries[id] = entry
        covered.append((id, entry.generation))
      } else {
        // A new entry, or one that replaces the entry of a released object whose address was
        // reused; the old entry's closures will not find their generation.
        let generation = nextGeneration
        nextGeneration += 1
        entries[id] = Entry(generation: generation, target: target, holds: 1, restoredValue: target.isEnabled)
        covered.append((id, generation))
        target.isEnabled = false
      }
    }
    let closureID = nextClosureID
    nextClosureID += 1
    // The timer keeps the gate alive until the targets are restored.
    let timer = scheduler.schedule(after: duration) {
      MainActor.assumeIsolated { self.end(closureID) }
    }
    closures[closureID] = Closure(targets: covered, timer: timer)
  }

  /// Ends every closure now, restoring its targets.
  package func openAll() {
    let ids = closures.keys.sorted()
    for id in ids {
      closures[id]?.timer.cancel()
      end(id)
    }
  }

  /// Whether `target` is disabled by a closure of this gate.
  package func isClosing(_ target: any Enablable) -> Bool {
    guard let entry = entries[ObjectIdentifier(target)] else { return false }
    return entry.target === target
  }

  /// The number of closures that have not ended yet.
  package var pendingClosures: Int {
    closures.count
  }

  private func end(_ closureID: UInt64) {
    guard let closure = closures.removeValue(forKey: closureID) else { return }
    for (id, generation) in closure.targets {
      guard var entry = entries[id], entry.generation == generation else { continue }
      entry.holds -= 1
      if entry.holds > 0 {
        entries[id] = entry
        continue
      }
      entries[id] = nil
      if entry.restoredValue, let target = entry.target {
        target.isEnabled = true
      }
    }
  }
}
