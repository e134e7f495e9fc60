import Dispatch

/// A ``PaceScheduler`` that runs work on a serial `DispatchQueue`.
///
/// Spell it `.main` or `.queue(someQueue)` where a scheduler is expected:
///
/// ```swift
/// let save = Debouncer<Document>(for: .seconds(1), scheduler: .queue(ioQueue)) { write($0) }
/// ```
///
/// Time is `DispatchTime` uptime (it does not advance while the device sleeps), and
/// ``isCurrent`` is `true` in code that the queue is running, so a leading invocation made
/// from the queue itself runs synchronously inside `call`.
///
/// The queue should be serial: Pace never overlaps invocations of one instance either way,
/// but a concurrent queue gives no order between different instances.
public struct DispatchScheduler: PaceScheduler {
  /// The queue that runs the work.
  public let queue: DispatchQueue
  private let identity: QueueIdentity

  /// A scheduler for `queue`. Creating it tags the queue (with `setSpecific`) so that
  /// ``isCurrent`` can tell when code runs on it.
  public init(_ queue: DispatchQueue) {
    self.queue = queue
    self.identity = QueueIdentity.tag(queue)
  }

  public var now: PaceInstant {
    PaceInstant(nanoseconds: Int64(clamping: DispatchTime.now().uptimeNanoseconds))
  }

  public var isCurrent: Bool {
    DispatchQueue.getSpecific(key: QueueIdentity.key) === identity
  }

  @discardableResult
  public func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    let item = DispatchWorkItem(block: work)
    queue.asyncAfter(deadline: Self.dispatchTime(for: deadline), execute: item)
    return DispatchTimer(item: item)
  }

  public func enqueue(_ work: @escaping @Sendable () -> Void) {
    queue.async(execute: work)
  }

  /// The uptime of `deadline`: the past is now, and the end of the timeline (a saturated
  /// deadline, 292 years of uptime) is `distantFuture`, which never comes.
  static func dispatchTime(for deadline: PaceInstant) -> DispatchTime {
    if deadline == .max { return .distantFuture }
    return DispatchTime(uptimeNanoseconds: UInt64(clamping: Swift.max(deadline.nanoseconds, 0)))
  }
}

/// Cancels a `DispatchWorkItem` scheduled by ``DispatchScheduler``.
private struct DispatchTimer: PaceCancellable, @unchecked Sendable {
  // @unchecked Sendable: the item is only cancelled, and libdispatch makes
  // `DispatchWorkItem.cancel()` thread-safe with its own atomic state.
  let item: DispatchWorkItem

  func cancel() {
    item.cancel()
  }
}

extension PaceScheduler where Self == DispatchScheduler {
  /// The main queue.
  ///
  /// Work on it runs only while the main thread serves the main queue: in an app (UIKit,
  /// AppKit, SwiftUI) always, but in a command-line tool never, unless `main.swift` ends with
  /// `dispatchMain()` or `RunLoop.main.run()`. A tool that returns from `main` or blocks the
  /// main thread sees nothing fire; use `.queue(someQueue)` or a ``ClockScheduler`` there.
  public static var main: DispatchScheduler { DispatchScheduler.mainQueue }

  /// A serial dispatch queue.
  public static func queue(_ queue: DispatchQueue) -> DispatchScheduler {
    DispatchScheduler(queue)
  }
}

extension DispatchScheduler {
  // Made once so that `.main`, the default of every initialiser, costs no tagging.
  fileprivate static let mainQueue = DispatchScheduler(.main)
}

/// The tag a ``DispatchScheduler`` sets on its queue; compared by identity.
private final class QueueIdentity: Sendable {
  static let key = DispatchSpecificKey<QueueIdentity>()

  /// The queue's existing tag, or a new one. Two schedulers over one queue share the tag, so
  /// each sees the other's work as current.
  static func tag(_ queue: DispatchQueue) -> QueueIdentity {
    // The lock makes check-then-set atomic, so two schedulers made at once for one queue agree.
    taggedQueues.withLock { count in
      if let existing = queue.getSpecific(key: key) { return existing }
      let identity = QueueIdentity()
      queue.setSpecific(key: key, value: identity)
      count += 1
      return identity
    }
  }

  /// How many queues Pace has tagged: bookkeeping that gives the lock real state to guard.
  private static let taggedQueues = LockedState(0)
}
