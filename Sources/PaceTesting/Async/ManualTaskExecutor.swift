/// A task executor that runs nothing until the harness says so: the jobs of the tasks that
/// prefer it wait in a queue, and ``runPending()`` runs them on the calling thread until the
/// queue is empty.
///
/// This is what makes ``VirtualTimeline`` deterministic without yielding: a consumer task that
/// prefers this executor can only run inside `runPending()`, so once the queue is empty the
/// consumer is suspended, waiting for its next element, and everything it received was recorded
/// at the virtual time it was delivered.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class ManualTaskExecutor: TaskExecutor {
  // Sendable: its only state is `state`, a `Locked` box.
  private struct State {
    var jobs: [UnownedJob] = []
    var head = 0
    /// Woken by the next enqueued job: ``waitForJob()``.
    var waiters: [CheckedContinuation<Void, Never>] = []
  }

  private let state = LockedState(State())

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    let waiters = state.withLock { state in
      state.jobs.append(job)
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Runs queued jobs (and the jobs they enqueue) on the calling thread until none is left.
  func runPending() {
    while let job = nextJob() {
      job.runSynchronously(on: asUnownedTaskExecutor())
    }
  }

  /// Returns once a job is queued (at once if one is).
  func waitForJob() async {
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.head < state.jobs.count { return true }
        state.waiters.append(waiter)
        return false
      }
      if ready { waiter.resume() }
    }
  }

  private func nextJob() -> UnownedJob? {
    state.withLock { state in
      guard state.head < state.jobs.count else {
        state.jobs.removeAll(keepingCapacity: true)
        state.head = 0
        return nil
      }
      defer { state.head += 1 }
      return state.jobs[state.head]
    }
  }
}
