import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// Main-actor code: `owner:` initialisers and main-actor closures on an injected `TestScheduler`
/// advanced on the main actor, as a view model's tests would.
@Suite @MainActor struct MainActorOwnerTests {
  let scheduler = TestScheduler()

  // MARK: owner:

  @Test func debouncerPassesTheOwnerToEachInvocation() {
    let model = SearchModel(scheduler: scheduler)
    model.queryChanged("s")
    scheduler.advance(to: ms(100))
    model.queryChanged("sw")
    scheduler.advance(to: ms(399))
    #expect(model.hints.isEmpty)
    scheduler.advance(to: ms(400))
    #expect(model.hints == [at(400, "sw")])
  }

  @Test func releasingTheOwnerDropsThePendingInvocation() {
    let released = DeinitProbe()
    let fired = Recorder<String>(clock: scheduler)
    var model: SearchModel? = SearchModel(scheduler: scheduler, fired: fired, probe: released)
    model?.queryChanged("swift")
    #expect(scheduler.pendingCount == 1)
    model = nil
    #expect(released.count == 1)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(by: .seconds(10))
    #expect(fired.count == 0)
  }

  @Test func onceTheOwnerIsGonePendingWorkIsDroppedAndCallsDoNothing() {
    let fired = Recorder<String>(clock: scheduler)
    var owner: Owner? = Owner()
    // Held apart from its owner, so it outlives it.
    let debouncer = Debouncer<String>(for: .milliseconds(300), scheduler: scheduler, owner: owner!) { _, value in
      fired.record(value)
    }
    debouncer("a")
    owner = nil
    scheduler.advance(to: ms(300))
    #expect(fired.count == 0)
    debouncer("b")
    #expect(!debouncer.isPending)
    scheduler.advance(to: ms(1000))
    #expect(fired.count == 0)
  }

  @Test func throttlerWithALeadingEdgeIgnoresTheBashing() {
    let model = CheckoutModel(scheduler: scheduler)
    for time: Int64 in [0, 100, 200, 499, 500, 650] {
      scheduler.advance(to: ms(time))
      model.payTapped()
    }
    scheduler.advance(to: ms(2000))
    #expect(model.payments == [ms(0), ms(500)])
  }

  @Test func throttlerOwnerGoneDropsTheTrailingInvocation() {
    let fired = Recorder<Int>(clock: scheduler)
    var owner: Owner? = Owner()
    let throttler = Throttler<Int>(for: .milliseconds(100), scheduler: scheduler, owner: owner!) { _, value in
      fired.record(value)
    }
    throttler(1)
    throttler(2)
    owner = nil
    scheduler.advance(to: ms(100))
    #expect(fired.timeline == [at(0, 1)])
    throttler(3)
    #expect(!throttler.isPending)
  }

  @Test func coalescerReloadsOncePerTurnThroughItsOwner() {
    let controller = ListController(scheduler: scheduler)
    for _ in 0..<5 { controller.itemChanged() }
    #expect(controller.reloads == 0)
    scheduler.advance()
    #expect(controller.reloads == 1)
    controller.itemChanged()
    scheduler.advance(to: ms(10))
    #expect(controller.reloads == 2)
  }

  @Test func coalescerWithAValueAndAnOwnerMergesTheSignals() {
    let fired = Recorder<Int>(clock: scheduler)
    let owner = Owner()
    let count = Coalescer<Int>(window: .milliseconds(50), merge: .sum, scheduler: scheduler, owner: owner) {
      _, total in fired.record(total)
    }
    count(2)
    scheduler.advance(to: ms(20))
    count(3)
    scheduler.advance(to: ms(50))
    #expect(fired.timeline == [at(50, 5)])
  }

  // MARK: Main-actor closures with scheduler:

  @Test func aMainActorClosureRunsOnTheInjectedScheduler() {
    let fired = Recorder<String>(clock: scheduler)
    let state = MainActorState()
    let debouncer = Debouncer<String>(for: .milliseconds(300), edges: .both, scheduler: scheduler) {
      @MainActor value in
      state.values.append(value)
      fired.record(value)
    }
    debouncer("a")
    scheduler.advance(to: ms(100))
    debouncer("b")
    scheduler.advance(to: ms(400))
    #expect(fired.timeline == [at(0, "a"), at(400, "b")])
    #expect(state.values == ["a", "b"])
  }

  @Test func aMainActorThrottlerAndCoalescerRunOnTheInjectedScheduler() {
    let fired = Recorder<String>(clock: scheduler)
    let throttler = Throttler<String>(for: .milliseconds(100), scheduler: scheduler) { @MainActor value in
      fired.record("t" + value)
    }
    let coalescer = Coalescer<String>(window: .milliseconds(30), scheduler: scheduler) { @MainActor value in
      fired.record("c" + value)
    }
    let reload = Coalescer(scheduler: scheduler) { @MainActor in fired.record("reload") }
    throttler("1")
    throttler("2")
    coalescer("1")
    coalescer("2")
    reload()
    scheduler.advance(to: ms(100))
    #expect(fired.timeline == [at(0, "t1"), at(0, "reload"), at(30, "c2"), at(100, "t2")])
  }

  @Test func theMainQueueIsAcceptedForAMainActorClosure() {
    // Made on `.main`: the initialiser accepts it; nothing is called, so nothing waits for the queue.
    _ = Debouncer<Int>(for: .seconds(1), scheduler: .main) { @MainActor _ in }
    _ = Debouncer<Int>(for: .seconds(1), owner: Owner()) { _, _ in }
    _ = Throttler<Int>(for: .seconds(1), scheduler: DispatchScheduler(.main)) { @MainActor _ in }
    _ = Coalescer(owner: Owner()) { _ in }
  }
}

// MARK: - Fixtures: the patterns of the doc comments

/// The view model of `Debouncer`'s doc comment: the debouncer is a stored property of its owner.
@MainActor final class SearchModel {
  private(set) var hints: [Event<String>] = []
  private var search: Debouncer<String>?
  private let probe: DeinitProbe?

  init(scheduler: any PaceScheduler = .main, fired: Recorder<String>? = nil, probe: DeinitProbe? = nil) {
    self.probe = probe
    search = Debouncer(for: .milliseconds(300), scheduler: scheduler, owner: self) { owner, query in
      owner.hints.append(at(scheduler.now.nanoseconds / 1_000_000, query))
      fired?.record(query)
    }
  }

  func queryChanged(_ query: String) {
    search?(query)
  }

  deinit {
    probe?.record()
  }
}

/// The view model of `Throttler`'s doc comment: a Pay button bashed.
@MainActor final class CheckoutModel {
  private(set) var payments: [PaceInstant] = []
  private var pay: Throttler<Void>?
  private let probe: DeinitProbe?

  init(scheduler: any PaceScheduler = .main, probe: DeinitProbe? = nil) {
    self.probe = probe
    pay = Throttler(for: .milliseconds(500), edges: .leading, scheduler: scheduler, owner: self) { owner, _ in
      owner.payments.append(scheduler.now)
    }
  }

  func payTapped() {
    pay?()
  }

  deinit {
    probe?.record()
  }
}

/// The controller of `Coalescer`'s doc comment: `setNeedsReloadData()`.
@MainActor final class ListController {
  private(set) var reloads = 0
  private var reload: Coalescer<Void>?
  private let probe: DeinitProbe?

  init(scheduler: any PaceScheduler = .main, probe: DeinitProbe? = nil) {
    self.probe = probe
    reload = Coalescer(scheduler: scheduler, owner: self) { owner in owner.reloads += 1 }
  }

  func itemChanged() {
    reload?()
  }

  deinit {
    probe?.record()
  }
}

/// An owner with nothing to it.
final class Owner: Sendable {}

/// State that only the main actor may touch.
@MainActor final class MainActorState {
  var values: [String] = []
}

/// Counts deinitialisations.
final class DeinitProbe: Sendable {
  private let counter = LockedState(0)

  func record() {
    counter.withLock { $0 += 1 }
  }

  var count: Int { counter.withLock { $0 } }
}

/// The `Value == Void` spellings of the `owner:` initialisers, whose closures take only the owner.
@Suite @MainActor struct VoidOwnerTests {
  let scheduler = TestScheduler()

  @Test func plainCallsPassOnlyTheOwner() {
    let owner = Owner()
    let fired = Recorder<String>(clock: scheduler)
    let save: Debouncer<Void> = Debouncer(for: .milliseconds(300), scheduler: scheduler, owner: owner) { owner in
      fired.record("save \(type(of: owner))")
    }
    let pay = Throttler(for: .milliseconds(500), edges: .leading, scheduler: scheduler, owner: owner) { (_: Owner) in
      fired.record("pay")
    }
    save()
    pay()
    pay()
    scheduler.advance(to: ms(300))
    #expect(fired.timeline == [at(0, "pay"), at(300, "save Owner")])
  }
}
