/// The button-bashing guard as 0.3.0 shipped it in `Pace`: it moved to `PaceUI`, with the UIKit
/// and AppKit glue that uses it, as `ControlGate` (a type cannot move between modules under one
/// name: importing both would make the name ambiguous). Kept, unchanged, for source
/// compatibility; its `shared` gate is not `ControlGate.shared`.
@available(*, deprecated, renamed: "ControlGate", message: "import PaceUI and use ControlGate")
@MainActor
public final class InteractionGate {
  /// A gate on the main queue, shared by the callers of this type (not `ControlGate.shared`).
  public static let shared = InteractionGate()

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

  /// A gate whose closures end on `scheduler`.
  ///
  /// - Parameter scheduler: Where the targets are re-enabled. It must run work on the main
  ///   actor: `.main` (the default), or a ``TestScheduler`` advanced from the main actor in tests.
  public init(scheduler: some PaceScheduler = .main) {
    self.scheduler = scheduler
  }

  /// Disables `targets` now and restores them after `duration`.
  ///
  /// - Parameters:
  ///   - targets: The controls to disable; duplicates count once.
  ///   - duration: How long they stay disabled. Not negative.
  public func close(_ targets: [any Enablable], for duration: Duration) {
    checkTiming("InteractionGate.close", interval: duration, parameter: "duration")
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
  public func openAll() {
    let ids = closures.keys.sorted()
    for id in ids {
      closures[id]?.timer.cancel()
      end(id)
    }
  }

  /// Whether `target` is disabled by a closure of this gate.
  ///
  /// - Parameter target: A control.
  public func isClosing(_ target: any Enablable) -> Bool {
    guard let entry = entries[ObjectIdentifier(target)] else { return false }
    return entry.target === target
  }

  /// The number of closures that have not ended yet.
  public var pendingClosures: Int {
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
