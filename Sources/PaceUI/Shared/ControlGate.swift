import Pace

/// The button-bashing guard: disables a set of controls for a while after a tap, then restores
/// them. `button.disableTemporarily(for:siblings:)` closes the shared gate.
///
/// ```swift
/// @objc func openDetail() {
///   ControlGate.shared.close([detailButton, settingsButton], for: .milliseconds(500))
///   navigationController?.pushViewController(detail, animated: true)
/// }
/// ```
///
/// The gate works on anything `Enablable` (a control, a bar button item, a menu item, a test
/// double), so its logic is tested without UIKit, on a `TestScheduler`.
///
/// Overlapping closures are counted per target: a target stays disabled until the last closure
/// that covers it has ended. Then it gets back the `isEnabled` it had when the first of them
/// began, so a control that was already disabled stays disabled. Targets are held weakly; one
/// that is released meanwhile is simply forgotten. The gate stays alive while it has closures
/// pending.
///
/// ```
/// taps       a--------b-------
/// isEnabled  ____-----____----   (`_`: disabled for 4 steps after each tap)
/// ```
@MainActor
public final class ControlGate {
  /// The gate that `disableTemporarily(for:siblings:)` uses by default, on the main queue.
  public static let shared = ControlGate()

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
  ///   actor: `.main` (the default), or a `TestScheduler` advanced from the main actor in tests.
  public init(scheduler: some PaceScheduler = .main) {
    self.scheduler = scheduler
  }

  /// Disables `targets` now and restores them after `duration`.
  ///
  /// - Parameters:
  ///   - targets: The controls to disable; duplicates count once.
  ///   - duration: How long they stay disabled. Not negative.
  public func close(_ targets: [any Enablable], for duration: Duration) {
    precondition(duration >= .zero, "ControlGate.close: duration must not be negative (got \(duration))")
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
