/// A synchronous scheduler whose time moves only when a test says so.
///
/// Time starts at ``PaceInstant/zero``. ``advance(by:)``, ``advance(to:)`` and ``run()`` run the
/// work that falls due, in deadline order and, at the same deadline, in the order it was
/// scheduled. ``now`` is set to each work item's deadline before it runs, and work may schedule
/// more work. Nothing sleeps and nothing yields, so timing tests are exact and instant:
///
/// ```swift
/// @Test func searchIsDebounced() {
///   let scheduler = TestScheduler()
///   let searched = LockedBox<[String]>([])          // any thread-safe box of yours
///   let search = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler) { query in
///     searched.append(query)
///   }
///
///   search("s")
///   scheduler.advance(by: .milliseconds(100))
///   search("sw")
///   scheduler.advance(by: .milliseconds(299))
///   #expect(searched.value == [])
///   scheduler.advance(by: .milliseconds(1))           // 300 ms after "sw"
///   #expect(searched.value == ["sw"])
///   #expect(scheduler.pendingDeadlines.isEmpty)       // nothing left scheduled
/// }
/// ```
///
/// In tests, pass a `TestScheduler` rather than relying on the default `.main`: a test (like a
/// command-line tool, which has no run loop unless it calls `dispatchMain()` or
/// `RunLoop.main.run()`) does not serve the main queue while it waits, so work scheduled on
/// `.main` would never fire there.
///
/// ``isCurrent`` is always `true`: a leading invocation happens synchronously inside `call`.
/// Work runs on the thread that advances the scheduler, never under the scheduler's lock.
public final class TestScheduler: PaceScheduler {
  fileprivate struct Job {
    var deadline: PaceInstant
    var sequence: UInt64
    var work: @Sendable () -> Void

    func runsBefore(_ other: Job) -> Bool {
      (deadline, sequence) < (other.deadline, other.sequence)
    }
  }

  fileprivate struct State {
    var now: PaceInstant
    var nextSequence: UInt64 = 0
    var heap: [Job] = []
    /// Sequences of jobs cancelled but still in the heap; they are skipped when they surface.
    var cancelled: Set<UInt64> = []
    /// Tasks suspended in `sleep(until:)`.
    var sleepers = 0
    /// Callers suspended in a Pace primitive on this scheduler, waiting for it to let them
    /// through (a `RateLimiter` or `KeyedRateLimiter` permit).
    var suspendedCallers = 0
    /// Tests waiting for work to be scheduled, for tasks to sleep or for callers to wait
    /// (PaceTesting's `waitForPending`, `waitForSleepers`, `waitForSuspendedCallers`): work is
    /// often scheduled from another task, so a test cannot know it has been without being told.
    var pendingWaiters = CountWaiters()
    var sleeperWaiters = CountWaiters()
    var suspendedCallerWaiters = CountWaiters()
    /// Work started on this scheduler that can run now (see ``activityStarted()``).
    var runningActivities = 0
    var nextQuietWaiter: UInt64 = 0
    /// Waiters of ``waitUntilQuiet(timeout:)``: `true` once nothing runs, `false` on timeout.
    var quietWaiters: [UInt64: UnsafeContinuation<Bool, Never>] = [:]

    var pendingCount: Int { heap.count - cancelled.count }

    /// Takes the waiters whose wait is over.
    mutating func takeReadyWaiters() -> [UnsafeContinuation<Bool, Never>] {
      pendingWaiters.takeReady(current: pendingCount) + sleeperWaiters.takeReady(current: sleepers)
        + suspendedCallerWaiters.takeReady(current: suspendedCallers)
    }

    /// The waiters of one count, and the count they wait for.
    subscript(count: WaitedCount) -> (waiters: CountWaiters, current: Int) {
      get {
        switch count {
        case .pending: (pendingWaiters, pendingCount)
        case .sleepers: (sleeperWaiters, sleepers)
        case .suspendedCallers: (suspendedCallerWaiters, suspendedCallers)
        }
      }
      set {
        switch count {
        case .pending: pendingWaiters = newValue.waiters
        case .sleepers: sleeperWaiters = newValue.waiters
        case .suspendedCallers: suspendedCallerWaiters = newValue.waiters
        }
      }
    }
  }

  /// What a test may wait for a number of (PaceTesting's waits).
  package enum WaitedCount: Sendable {
    /// Work scheduled: ``pendingCount``.
    case pending
    /// Tasks sleeping on the scheduler: ``sleepingTaskCount``.
    case sleepers
    /// Callers suspended in a Pace primitive on this scheduler: requests waiting for a
    /// `RateLimiter` or `KeyedRateLimiter` permit.
    case suspendedCallers
  }

  private let state: LockedState<State>

  /// A scheduler whose clock reads `now`; ``PaceInstant/zero`` by default.
  public init(now: PaceInstant = .zero) {
    state = LockedState(State(now: now))
  }

  public var now: PaceInstant {
    state.withLock { $0.now }
  }

  /// Always `true`: the test's own thread is the scheduler's context.
  public var isCurrent: Bool { true }

  @discardableResult
  public func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    let (sequence, ready) = state.withLock { state in
      let sequence = state.nextSequence
      state.nextSequence += 1
      state.heap.push(Job(deadline: deadline, sequence: sequence, work: work), by: { $0.runsBefore($1) })
      return (sequence, state.takeReadyWaiters())
    }
    for waiter in ready { waiter.resume(returning: true) }
    return ScheduledJob(scheduler: self, sequence: sequence)
  }

  /// Schedules `work` for ``now``: it runs at the next ``advance(by:)``, even by `.zero`.
  public func enqueue(_ work: @escaping @Sendable () -> Void) {
    schedule(at: now, work)
  }

  /// Moves time forward by `duration`, running the work that falls due on the way.
  /// `advance(by: .zero)` runs what is due now.
  ///
  /// Threads that advance one scheduler at once each move time to at least `duration` after the
  /// instant they read; time never moves back.
  public func advance(by duration: Duration = .zero) {
    precondition(duration >= .zero, "TestScheduler.advance(by:): duration must not be negative (got \(duration))")
    // Not through `advance(to:)`: another thread may have moved time past this target since
    // `now` was read, which is no mistake of this caller's.
    runDueWork(through: now.advanced(by: duration))
  }

  /// Moves time forward to `instant`, running the work that falls due on the way.
  public func advance(to instant: PaceInstant) {
    precondition(instant >= now, "TestScheduler.advance(to:): \(instant) is before now (\(now))")
    runDueWork(through: instant)
  }

  private func runDueWork(through instant: PaceInstant) {
    while let work = takeNextJob(dueBy: instant) {
      work()
    }
  }

  /// Runs work until none is left, moving time to each deadline in turn.
  ///
  /// Work that keeps scheduling more work (a repeating timer) makes this run forever; advance
  /// by a bounded duration instead.
  public func run() {
    while let work = takeNextJob(dueBy: nil) {
      work()
    }
  }

  /// The deadlines of the work still scheduled, earliest first. Empty when nothing is left:
  /// `#expect(scheduler.pendingDeadlines.isEmpty)`.
  public var pendingDeadlines: [PaceInstant] {
    state.withLock { state in
      state.heap.filter { !state.cancelled.contains($0.sequence) }
        .sorted { $0.runsBefore($1) }
        .map(\.deadline)
    }
  }

  /// The number of work items still scheduled.
  public var pendingCount: Int {
    state.withLock { $0.heap.count - $0.cancelled.count }
  }

  /// The deadline of the next work item, or `nil` when nothing is scheduled.
  public var nextDeadline: PaceInstant? {
    state.withLock { state in
      state.dropCancelledTop()
      return state.heap.first?.deadline
    }
  }

  // MARK: Sleepers (for PaceTesting's deterministic async harness)

  /// The number of tasks suspended in ``sleep(until:tolerance:)`` now.
  package var sleepingTaskCount: Int {
    state.withLock { $0.sleepers }
  }

  /// Counts callers suspended in a primitive on this scheduler in (`+n`) or out (`-n`), and wakes
  /// the waiters whose count is reached. Called by the primitive with its own lock released.
  package func suspendedCallersChanged(by change: Int) {
    guard change != 0 else { return }
    let ready = state.withLock { state in
      state.suspendedCallers += change
      return state.takeReadyWaiters()
    }
    for waiter in ready { waiter.resume(returning: true) }
  }

  /// Returns `true` once at least `count` of `what` are there (at once if they are), or `false`
  /// after `timeout` of real time (`nil`: no limit).
  package func waitUntil(_ count: Int, of what: WaitedCount, timeout: Duration?) async -> Bool {
    let id = state.withLock { $0[what].waiters.makeID() }
    return await waitBounded(
      id: id, timeout: timeout,
      withdraw: { [weak self] id in self?.state.withLock { $0[what].waiters.remove(id: id) } }
    ) { continuation in
      state.withLock { state in
        state[what].waiters.add(id: id, count: count, continuation, current: state[what].current)
      }
    }
  }

  /// The current number of `what`.
  package func count(of what: WaitedCount) -> Int {
    state.withLock { $0[what].current }
  }

  // MARK: Activity (for PaceTesting's `settle`; the tasks it follows are `TrackedTask`s)

  /// Counts work in as able to run: a pacer's invocation as it starts, or a tracked task as the
  /// scheduler wakes it. Called by whoever makes the work runnable, before it can run, so the
  /// count never reads zero while the work is on its way.
  package func activityStarted() {
    state.withLock { $0.runningActivities += 1 }
  }

  /// Counts work out: it ended, or it waits for this scheduler's time.
  package func activityStopped() {
    let quiet = state.withLock { state -> [UnsafeContinuation<Bool, Never>] in
      state.runningActivities -= 1
      guard state.runningActivities == 0 else { return [] }
      defer { state.quietWaiters = [:] }
      return Array(state.quietWaiters.values)
    }
    for waiter in quiet { waiter.resume(returning: true) }
  }

  /// How many pieces of tracked work can run now.
  package var runningActivityCount: Int {
    state.withLock { $0.runningActivities }
  }

  /// Returns `true` once no tracked work can run (at once if none can), or `false` after
  /// `timeout` of real time: the work waits for something other than this scheduler.
  package func waitUntilQuiet(timeout: Duration) async -> Bool {
    let id = state.withLock { state in
      state.nextQuietWaiter &+= 1
      return state.nextQuietWaiter
    }
    let timer = Task { [weak self] in
      // Cancelled as soon as the work is quiet: a passing test never waits for it.
      guard await Task.sleepUnlessCancelled(for: timeout) else { return }
      self?.state.withLock { $0.quietWaiters.removeValue(forKey: id) }?.resume(returning: false)
    }
    let quiet = await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
      let quiet = state.withLock { state -> Bool in
        guard state.runningActivities == 0 else {
          state.quietWaiters[id] = continuation
          return false
        }
        return true
      }
      if quiet { continuation.resume(returning: true) }
    }
    timer.cancel()
    return quiet
  }

  /// Counts a sleeper in (`+1`) or out (`-1`), and wakes the waiters whose count is reached.
  func sleeperCountChanged(by change: Int) {
    let ready = state.withLock { state in
      state.sleepers += change
      return state.takeReadyWaiters()
    }
    for waiter in ready { waiter.resume(returning: true) }
  }

  /// Takes the next job due by `limit` (any job if `nil`) and moves `now` to its deadline; or,
  /// when none is due, moves `now` to `limit` and returns `nil`.
  private func takeNextJob(dueBy limit: PaceInstant?) -> (@Sendable () -> Void)? {
    state.withLock { state in
      state.dropCancelledTop()
      guard let next = state.heap.first, limit.map({ next.deadline <= $0 }) ?? true else {
        if let limit { state.now = max(state.now, limit) }
        return nil
      }
      state.heap.popFirst(by: { $0.runsBefore($1) })
      state.now = max(state.now, next.deadline)
      return next.work
    }
  }

  fileprivate func cancel(sequence: UInt64) {
    state.withLock { state in
      guard state.heap.contains(where: { $0.sequence == sequence }) else { return }
      state.cancelled.insert(sequence)
      state.dropCancelledTop()
    }
  }

  /// A strong reference, not a weak one: the scheduler holds no handles, so there is no cycle,
  /// and a weak reference cost a side-table allocation per timer (a tenth of `pace compare`).
  private struct ScheduledJob: PaceCancellable {
    let scheduler: TestScheduler
    let sequence: UInt64

    func cancel() {
      scheduler.cancel(sequence: sequence)
    }
  }
}

extension TestScheduler.State {
  fileprivate mutating func dropCancelledTop() {
    while let top = heap.first, cancelled.remove(top.sequence) != nil {
      heap.popFirst(by: { $0.runsBefore($1) })
    }
  }
}

extension Array {
  /// Adds `element` to a binary min-heap ordered by `isBefore`.
  mutating func push(_ element: Element, by isBefore: (Element, Element) -> Bool) {
    append(element)
    var child = count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard isBefore(self[child], self[parent]) else { break }
      swapAt(child, parent)
      child = parent
    }
  }

  /// Removes the first element of a binary min-heap ordered by `isBefore`.
  @discardableResult
  mutating func popFirst(by isBefore: (Element, Element) -> Bool) -> Element? {
    guard !isEmpty else { return nil }
    swapAt(0, count - 1)
    let first = removeLast()
    var parent = 0
    while true {
      let left = 2 * parent + 1
      let right = left + 1
      var smallest = parent
      if left < count, isBefore(self[left], self[smallest]) { smallest = left }
      if right < count, isBefore(self[right], self[smallest]) { smallest = right }
      if smallest == parent { break }
      swapAt(parent, smallest)
      parent = smallest
    }
    return first
  }
}
