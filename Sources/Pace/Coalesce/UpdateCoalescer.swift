/// The `setNeedsLayout()` pattern for any update of any object: however many times an object
/// asks for an update within one turn, it is updated once, on the next turn.
///
/// ```swift
/// let reloads = UpdateCoalescer<UITableView> { $0.reloadData() }
/// for item in items { item.completed = true; reloads.setNeedsUpdate(tableView) }   // one reloadData()
/// ```
///
/// `PaceUI`'s `tableView.setNeedsReloadData()` is this, with one shared coalescer per kind of
/// view. Requests are coalesced per object by one ``Coalescer``: the first request of a turn
/// schedules the run, later ones only mark their object. Objects are updated in the order of
/// their first request and are held weakly, so a view released before its update is skipped.
/// An update that asks again for its own object schedules one more update, on the next turn.
@MainActor
public final class UpdateCoalescer<Target: AnyObject> {
  private struct Request {
    weak var target: Target?
  }

  private let update: (Target) -> Void
  private let window: Duration
  private let scheduler: any PaceScheduler
  /// The objects waiting for an update, in the order of their first request.
  private var requests: [Request] = []
  /// Where each waiting object sits in `requests`.
  private var positions: [ObjectIdentifier: Int] = [:]

  private lazy var coalescer = Coalescer<Void>(window: window, scheduler: scheduler) { [weak self] in
    MainActor.assumeIsolated { self?.flush() }
  }

  /// A coalescer that runs `update` for each object that asked, once per turn of `scheduler`.
  ///
  /// - Parameters:
  ///   - window: How long after the first request of a burst the updates run; `.zero` (the
  ///     default) for the scheduler's next turn. Not negative.
  ///   - scheduler: Where the updates run. It must run work on the main actor: `.main` (the
  ///     default), or a ``TestScheduler`` advanced from the main actor in tests.
  ///   - update: The update, such as `{ $0.reloadData() }`.
  public init(
    window: Duration = .zero,
    scheduler: some PaceScheduler = .main,
    update: @escaping @MainActor (Target) -> Void
  ) {
    checkTiming("UpdateCoalescer", interval: window, parameter: "window")
    self.window = window
    self.scheduler = scheduler
    self.update = update
  }

  /// Marks `target` as needing an update; the update runs on the next turn, once.
  ///
  /// - Parameter target: The object to update.
  public func setNeedsUpdate(_ target: Target) {
    if !isPending(for: target) {
      positions[ObjectIdentifier(target)] = requests.count
      requests.append(Request(target: target))
    }
    coalescer.signal()
  }

  /// Whether `target` is waiting for an update.
  ///
  /// - Parameter target: An object.
  public func isPending(for target: Target) -> Bool {
    guard let position = positions[ObjectIdentifier(target)] else { return false }
    // A different object at a reused address is not the one that asked.
    return requests[position].target === target
  }

  /// Runs the update of `target` now if it is waiting for one, like `layoutIfNeeded()`.
  ///
  /// - Parameter target: An object.
  public func updateIfNeeded(_ target: Target) {
    guard isPending(for: target), let position = positions.removeValue(forKey: ObjectIdentifier(target)) else { return }
    requests[position].target = nil  // skipped by the turn's run
    update(target)
  }

  /// Runs every waiting update now, in the order of the first requests.
  public func flush() {
    let due = requests
    requests.removeAll(keepingCapacity: true)
    positions.removeAll(keepingCapacity: true)
    coalescer.cancel()
    for request in due {
      if let target = request.target { update(target) }
    }
  }

  /// The number of objects waiting for an update.
  public var pendingCount: Int {
    requests.count { $0.target != nil }
  }
}
