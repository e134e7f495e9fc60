import Foundation

/// A scheduler on which no work ever waits: whatever is scheduled runs at once, and time jumps
/// to its deadline.
///
/// Use it in tests of code that is debounced, throttled or coalesced when the timing is not the
/// point: the code runs straight through, without advancing a `TestScheduler`.
///
/// ```swift
/// @Test func savingStoresTheDraft() {
///   let store = DraftStore()
///   let model = EditorModel(store: store, scheduler: ImmediateScheduler())
///   model.textChanged("Hello")      // debounced by 2s in the app
///   #expect(store.saved == ["Hello"])  // here it saved at once
/// }
/// ```
///
/// What `now` means: it starts at `PaceInstant.zero` (or the instant you pass) and moves to
/// the deadline of each piece of work as that work runs, never backwards; work due in the past
/// leaves it where it is. So the primitive under test sees the time pass that it asked for:
/// a `Debouncer` performs every call as soon as it is made, as if a quiet interval followed
/// each one, and a `Throttler` performs every call.
///
/// Work scheduled from inside running work runs right after it, in the order scheduled (a
/// trampoline), not nested inside it. Work scheduled from another thread while this scheduler
/// is running work is run by that thread, after what is already queued. ``isCurrent`` is always
/// `true`.
public final class ImmediateScheduler: PaceScheduler, Sendable {
  private let state: LockedState<State>

  private struct State {
    var now: PaceInstant
    var queue: [Job] = []
    var head = 0
    var isRunning = false
    var nextID: UInt64 = 0
    var cancelled: Set<UInt64> = []
  }

  private struct Job {
    var id: UInt64
    var deadline: PaceInstant
    var work: @Sendable () -> Void
  }

  /// A scheduler whose clock starts at `now`.
  public init(now: PaceInstant = .zero) {
    state = LockedState(State(now: now))
  }

  /// The deadline of the latest work run, or the starting instant.
  public var now: PaceInstant {
    withLock { $0.now }
  }

  /// Always `true`.
  public var isCurrent: Bool { true }

  /// Runs `work` now, moving ``now`` forward to `deadline` first if it is later.
  @discardableResult
  public func schedule(at deadline: PaceInstant, _ work: @escaping @Sendable () -> Void) -> any PaceCancellable {
    let (id, shouldRun) = withLock { state -> (UInt64, Bool) in
      let id = state.nextID
      state.nextID += 1
      state.queue.append(Job(id: id, deadline: deadline, work: work))
      guard !state.isRunning else { return (id, false) }
      state.isRunning = true
      return (id, true)
    }
    if shouldRun { drain() }
    return Cancellation(scheduler: self, id: id)
  }

  /// Runs `work` now.
  public func enqueue(_ work: @escaping @Sendable () -> Void) {
    schedule(at: now, work)
  }

  private func drain() {
    while let work = withLock({ state -> (@Sendable () -> Void)? in
      while state.head < state.queue.count {
        let job = state.queue[state.head]
        state.head += 1
        if state.cancelled.remove(job.id) != nil { continue }
        state.now = max(state.now, job.deadline)
        return job.work
      }
      state.queue.removeAll(keepingCapacity: true)
      state.head = 0
      state.isRunning = false
      return nil
    }) {
      work()
    }
  }

  fileprivate func cancel(id: UInt64) {
    withLock { state in
      // Only work still queued can be cancelled; what ran is done.
      if state.queue[state.head...].contains(where: { $0.id == id }) { state.cancelled.insert(id) }
    }
  }

  private func withLock<Result>(_ body: (inout State) -> Result) -> Result {
    state.withLock(body)
  }

  private struct Cancellation: PaceCancellable {
    weak var scheduler: ImmediateScheduler?
    let id: UInt64

    func cancel() {
      scheduler?.cancel(id: id)
    }
  }
}
