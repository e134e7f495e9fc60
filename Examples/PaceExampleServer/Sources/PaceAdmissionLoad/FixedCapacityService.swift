import NIOConcurrencyHelpers
import NIOCore

/// A service that can do `capacity` things at once, each taking `serviceTime`: the excess waits
/// inside it, first come first served, however long. Like most services, it does not notice a
/// client that gave up: a request that waited past its client's timeout is still served, which is
/// what makes latency, then goodput, collapse under overload.
final class FixedCapacityService: Sendable {
  let capacity: Int
  let serviceTime: TimeAmount
  private let eventLoopGroup: any EventLoopGroup
  private let state = NIOLockedValueBox(State())

  private struct State {
    var busy = 0
    /// The requests waiting, in arrival order, from `head` on.
    var waiting: [CheckedContinuation<Bool, Never>] = []
    var head = 0
    var closed = false
    var served = 0
    var maximumBusy = 0
    /// Each served request's time in the service, its wait included, in nanoseconds.
    var times: [Int64] = []
  }

  init(capacity: Int, serviceTime: TimeAmount, eventLoopGroup: any EventLoopGroup) {
    self.capacity = capacity
    self.serviceTime = serviceTime
    self.eventLoopGroup = eventLoopGroup
  }

  /// Serves one request: waits for a place, then works for `serviceTime`. Neither the wait nor the
  /// work ends when the request's task is cancelled. `false` for a request still waiting when the
  /// service closed.
  func serve() async -> Bool {
    let arrived = ContinuousClock.now
    let admitted = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      let now = state.withLockedValue { state -> Bool? in
        if state.closed { return false }
        guard state.busy < capacity else {
          state.waiting.append(continuation)
          return nil
        }
        state.busy += 1
        state.maximumBusy = max(state.maximumBusy, state.busy)
        return true
      }
      if let now { continuation.resume(returning: now) }
    }
    guard admitted else { return false }
    // A timer on an event loop: a Task.sleep would end early when the request's task is cancelled.
    try? await eventLoopGroup.next().scheduleTask(in: serviceTime) {}.futureResult.get()
    let time = arrived.duration(to: .now)
    let next = state.withLockedValue { state -> CheckedContinuation<Bool, Never>? in
      state.served += 1
      state.times.append(time.components.seconds * 1_000_000_000 + time.components.attoseconds / 1_000_000_000)
      guard state.head < state.waiting.count else {
        state.busy -= 1
        return nil
      }
      // The place passes to the oldest waiting request: `busy` stays.
      let next = state.waiting[state.head]
      state.head += 1
      if state.head >= 1024 && state.head * 2 >= state.waiting.count {
        state.waiting.removeFirst(state.head)
        state.head = 0
      }
      return next
    }
    next?.resume(returning: true)
    return true
  }

  /// Sends the requests still waiting away, and every later one, so that a run's backlog does not
  /// load the next run.
  func close() {
    let waiting = state.withLockedValue { state -> ArraySlice<CheckedContinuation<Bool, Never>> in
      state.closed = true
      defer {
        state.waiting = []
        state.head = 0
      }
      return state.waiting[state.head...]
    }
    for continuation in waiting { continuation.resume(returning: false) }
  }

  /// How many requests it served, the most it ever served at once, and the served requests' times
  /// in the service, sorted.
  var counts: (served: Int, maximumBusy: Int, times: [Duration]) {
    let (served, maximumBusy, times) = state.withLockedValue { ($0.served, $0.maximumBusy, $0.times) }
    return (served, maximumBusy, times.sorted().map { .nanoseconds($0) })
  }
}
