import PaceTestSupport
import Testing

@testable import Pace

/// Every pattern the articles and the README show, copied here as written (in a namespace per
/// document): each compiles, and stored as a property of its owner it does not keep the owner
/// alive. The tests release the owner with work pending and check that its deinit ran (a weak
/// reference is `nil`) and that nothing is left to fire.
@Suite @MainActor struct DocumentedPatternTests {
  let scheduler = TestScheduler()

  // MARK: MainActorApps.md

  @Test func theArticlesViewModelTest() {
    let scheduler = TestScheduler()
    let model = MainActorAppsArticle.SearchModel(scheduler: scheduler)
    model.queryChanged("s")
    scheduler.advance(by: .milliseconds(100))
    model.queryChanged("sw")
    scheduler.advance(by: .milliseconds(299))
    #expect(model.hint == "")
    scheduler.advance(by: .milliseconds(1))
    #expect(model.hint == "sw")
  }

  @Test func searchModelWithOwnerIsFreedWithWorkPending() {
    var model: MainActorAppsArticle.SearchModel? = .init(scheduler: scheduler)
    weak var released: MainActorAppsArticle.SearchModel?
    released = model
    model?.queryChanged("swift")
    #expect(scheduler.pendingCount == 1)
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(by: .seconds(1))
  }

  @Test func checkoutWithOwnerAndWeakSelfIsFreedWithWorkPending() {
    var checkout: MainActorAppsArticle.Checkout? = .init(scheduler: scheduler)
    weak var released: MainActorAppsArticle.Checkout?
    released = checkout
    checkout?.payTapped()
    checkout?.payTapped()
    #expect(checkout?.payments == 1)
    #expect(scheduler.pendingCount == 2)  // the throttle window and the status run
    checkout = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func theCheckoutsWeakSelfCoalescerRunsOnTheMainActor() {
    let checkout = MainActorAppsArticle.Checkout(scheduler: scheduler)
    checkout.payTapped()
    scheduler.advance()
    #expect(checkout.status == "Paying…")
  }

  @Test func queryScreenWithAFuserAndACoalescingDiffuserIsFreedWithWorkPending() {
    let source = QuerySource()
    var screen: MainActorAppsArticle.QueryScreen? = .init(queries: source.fuser, scheduler: scheduler)
    weak var released: MainActorAppsArticle.QueryScreen?
    released = screen
    source.send("s")
    scheduler.advance(to: ms(300))
    scheduler.advance()
    #expect(screen?.shown == ["s"])
    source.send("sw")
    #expect(scheduler.pendingCount == 1)
    screen = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
    #expect(source.listenerCount == 0)  // the connection was disposed with the screen
  }

  @Test func resultsModelIsFreedWithASearchPending() async {
    let service = RecordingSearchService()
    var model: MainActorAppsArticle.ResultsModel? = .init(service: service, clock: scheduler)
    weak var released: MainActorAppsArticle.ResultsModel?
    released = model
    model?.queryChanged("swift")
    #expect(scheduler.pendingCount == 1)
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(by: .seconds(1))
    #expect(service.queries.isEmpty)
  }

  @Test func resultsModelShowsTheResultsOfTheLastQuery() async throws {
    let service = RecordingSearchService()
    let model = MainActorAppsArticle.ResultsModel(service: service, clock: scheduler)
    let refresh = Task { try await model.refresh("swift") }
    let probe = Task { scheduler.advance(by: .milliseconds(300)) }
    await probe.value
    try await refresh.value
    #expect(model.items == [.init(title: "swift")])
    #expect(service.queries == ["swift"])
  }

  @Test func payModelWithOwnerIsFreedOnceThePaymentEnds() async {
    var model: MainActorAppsArticle.PayModel? = .init(service: FixedPaymentService(), clock: scheduler)
    weak var released: MainActorAppsArticle.PayModel?
    released = model
    await model?.payTapped()
    #expect(model?.receipt == "receipt")
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }

  // MARK: Debouncer.md, Throttler.md, Coalescer.md, AsyncDebouncer.md

  @Test func theDebouncerArticlesModelIsFreedWithWorkPending() {
    var model: DebouncerArticle.SearchModel? = .init(scheduler: scheduler)
    weak var released: DebouncerArticle.SearchModel?
    released = model
    model?.queryChanged("s")
    scheduler.advance(to: ms(300))
    #expect(model?.searches == ["s"])
    model?.queryChanged("sw")
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func theThrottlerArticlesTrackerIsFreedWithWorkPending() {
    var tracker: ThrottlerArticle.ScrollTracker? = .init(scheduler: scheduler)
    weak var released: ThrottlerArticle.ScrollTracker?
    released = tracker
    for offset in stride(from: 0.0, to: 150, by: 10) {
      scheduler.advance(to: ms(Int64(offset)))
      tracker?.didScroll(to: offset)
    }
    #expect(tracker?.drawn == [0, 90])
    tracker = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func theCoalescerArticlesControllerIsFreedWithWorkPending() {
    var controller: CoalescerArticle.ListController? = .init(scheduler: scheduler)
    weak var released: CoalescerArticle.ListController?
    released = controller
    controller?.itemsChanged(count: 50)
    scheduler.advance()
    #expect(controller?.reloads == 2)  // one per coalescer, not fifty
    controller?.itemsChanged(count: 3)
    controller = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func theAsyncDebouncerArticlesModelIsFreedWithASearchPending() {
    let service = RecordingSearchService()
    var model: AsyncDebouncerArticle.SearchModel? = .init(service: service, clock: scheduler)
    weak var released: AsyncDebouncerArticle.SearchModel?
    released = model
    model?.queryChanged("swift")
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(by: .seconds(1))
    #expect(service.queries.isEmpty)
  }

  // MARK: README.md

  @Test func theReadmesScreenModelPacesAndIsFreedWithWorkPending() {
    var model: ReadmeExample.ScreenModel? = .init(scheduler: scheduler)
    weak var released: ReadmeExample.ScreenModel?
    released = model
    model?.queryChanged("s")
    model?.didScroll(to: 1)
    model?.didScroll(to: 2)
    model?.itemChanged()
    model?.itemChanged()
    scheduler.advance(to: ms(300))
    #expect(model?.searches == ["s"])
    #expect(model?.drawnOffsets == [1, 2])
    #expect(model?.reloads == 1)
    model?.queryChanged("sw")
    model?.didScroll(to: 3)
    model?.didScroll(to: 4)
    model?.itemChanged()
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }
}

// MARK: - The documents' code, as written

enum MainActorAppsArticle {
  @MainActor final class SearchModel {
    private(set) var hint = ""
    private var search: Debouncer<String>?

    init(scheduler: any PaceScheduler = .main) {
      // `self` is held weakly and passed to each invocation as `owner`.
      search = Debouncer(for: .milliseconds(300), scheduler: scheduler, owner: self) { owner, query in
        owner.hint = query
      }
    }

    func queryChanged(_ query: String) {
      search?(query)
    }
  }

  @MainActor final class Checkout {
    private(set) var payments = 0
    private(set) var status = ""
    private var pay: Throttler<Void>?
    private var showStatus: Coalescer<String>?

    init(scheduler: any PaceScheduler = .main) {
      // The first tap pays at once; the taps of the next 500 ms are ignored.
      pay = Throttler(for: .milliseconds(500), edges: .leading, scheduler: scheduler, owner: self) { owner, _ in
        owner.payments += 1
      }
      // Without owner:, a closure that captures self weakly; `@MainActor` picks the main-actor
      // initialiser when a scheduler is passed.
      showStatus = Coalescer(scheduler: scheduler) { @MainActor [weak self] status in
        self?.status = status
      }
    }

    func payTapped() {
      pay?()
      showStatus?("Paying…")
    }
  }

  @MainActor final class QueryScreen {
    private(set) var shown: [String] = []
    private var render: CoalescingDiffuser<String>?
    private var connection: AnyDisposable?

    init(queries: Fuser<String>, scheduler: any PaceScheduler = .main) {
      render = CoalescingDiffuser(.into { [weak self] query in self?.shown.append(query) }, scheduler: scheduler)
      connection = queries.debounced(for: .milliseconds(300), scheduler: scheduler).connectOnMainActor {
        [weak self] query in self?.render?.run(query)
      }
    }
  }

  struct Item: Sendable, Equatable {
    var title: String
  }

  protocol SearchService: Sendable {
    func search(_ query: String) async throws -> [Item]
  }

  @MainActor final class ResultsModel {
    private(set) var items: [Item] = []
    private let search: AsyncDebouncer<String, [Item]>

    init(service: any SearchService, clock: some Clock<Duration> = ContinuousClock()) {
      // The operation captures the service, not self: no owner needed.
      search = AsyncDebouncer(for: .milliseconds(300), clock: clock) { query in
        try await service.search(query)
      }
    }

    /// From the text field's handler: registered now, answered after the pause.
    func queryChanged(_ query: String) {
      let results = search.submit(query)
      Task { [weak self] in
        // CancellationError: a newer query superseded this one; its results will come instead.
        guard let items = try? await results.value else { return }
        self?.items = items
      }
    }

    /// From async code: registered before the first suspension, on the main actor.
    func refresh(_ query: String) async throws {
      items = try await search(query)
    }
  }

  protocol PaymentService: Sendable {
    func pay() async throws -> String
  }

  @MainActor final class PayModel {
    let service: any PaymentService
    private(set) var receipt: String?
    private var pay: AsyncThrottler<Void, String>?

    init(service: any PaymentService, clock: some Clock<Duration> = ContinuousClock()) {
      self.service = service
      pay = AsyncThrottler(
        for: .seconds(1), edges: .leading, staleWork: .dropCallsWhileRunning, clock: clock, owner: self
      ) { owner, _ in
        try await owner.service.pay()
      }
    }

    func payTapped() async {
      receipt = try? await pay?()
    }
  }
}

enum DebouncerArticle {
  @MainActor final class SearchModel {
    private(set) var searches: [String] = []
    private var search: Debouncer<String>?

    init(scheduler: any PaceScheduler = .main) {
      search = Debouncer(for: .milliseconds(300), scheduler: scheduler, owner: self) { owner, query in
        owner.searches.append(query)  // one search, 300 ms after the user stops typing
      }
    }

    func queryChanged(_ query: String) {
      search?(query)
    }
  }
}

enum ThrottlerArticle {
  @MainActor final class ScrollTracker {
    private(set) var drawn: [Double] = []
    private var render: Throttler<Double>?

    init(scheduler: any PaceScheduler = .main) {
      // At most every 100 ms while the scroll view scrolls; stored in self, so `owner:`.
      render = Throttler(for: .milliseconds(100), scheduler: scheduler, owner: self) { owner, offset in
        owner.drawn.append(offset)
      }
    }

    func didScroll(to offset: Double) {
      render?(offset)
    }
  }
}

enum CoalescerArticle {
  struct ChangeKinds: OptionSet, Sendable {
    let rawValue: Int
    static let items = ChangeKinds(rawValue: 1)
    static let title = ChangeKinds(rawValue: 2)
  }

  @MainActor final class ListController {
    private(set) var reloads = 0
    private(set) var titleUpdates = 0
    private var reload: Coalescer<Void>?
    private var changes: Coalescer<ChangeKinds>?

    init(scheduler: any PaceScheduler = .main) {
      // Stored in self, so `owner:` (held weakly) rather than a strong capture of self.
      reload = Coalescer(scheduler: scheduler, owner: self) { owner in owner.reloads += 1 }
      changes = Coalescer(merge: .union, scheduler: scheduler, owner: self) { owner, kinds in
        if kinds.contains(.items) { owner.reloads += 1 }
        if kinds.contains(.title) { owner.titleUpdates += 1 }
      }
    }

    func itemsChanged(count: Int) {
      for _ in 0..<count { reload?() }  // setNeedsReloadData: one reload on the next turn
      changes?(.items)
    }
  }
}

enum AsyncDebouncerArticle {
  typealias Item = MainActorAppsArticle.Item
  typealias SearchService = MainActorAppsArticle.SearchService

  @MainActor final class SearchModel {
    private(set) var items: [Item] = []
    private let search: AsyncDebouncer<String, [Item]>

    init(service: any SearchService, clock: some Clock<Duration> = ContinuousClock()) {
      search = AsyncDebouncer(for: .milliseconds(300), clock: clock) { query in
        try await service.search(query)
      }
    }

    /// The text field's handler, once per keystroke.
    func queryChanged(_ query: String) {
      let results = search.submit(query)  // registered now, synchronously
      Task { [weak self] in
        do {
          let items = try await results.value
          self?.items = items
        } catch {
          // CancellationError: a newer keystroke superseded this one; its results will come instead.
        }
      }
    }
  }
}

enum ReadmeExample {
  @MainActor final class ScreenModel {
    private(set) var searches: [String] = []
    private(set) var drawnOffsets: [Double] = []
    private(set) var reloads = 0
    private var search: Debouncer<String>?
    private var render: Throttler<Double>?
    private var reload: Coalescer<Void>?

    init(scheduler: any PaceScheduler = .main) {  // a TestScheduler in tests
      // `owner: self` is held weakly and passed to each invocation: no retain cycle.
      search = Debouncer(for: .milliseconds(300), scheduler: scheduler, owner: self) { owner, query in
        owner.searches.append(query)  // one search, 300 ms after the user stops typing
      }
      render = Throttler(for: .milliseconds(100), scheduler: scheduler, owner: self) { owner, offset in
        owner.drawnOffsets.append(offset)  // at most every 100 ms, steadily
      }
      reload = Coalescer(scheduler: scheduler, owner: self) { owner in
        owner.reloads += 1  // setNeedsReloadData(): once per turn
      }
    }

    func queryChanged(_ query: String) { search?(query) }
    func didScroll(to offset: Double) { render?(offset) }
    func itemChanged() { reload?() }
  }
}

// MARK: - Test doubles

/// A search service that records its queries and answers with one item per query.
final class RecordingSearchService: MainActorAppsArticle.SearchService {
  private let log = LockedState<[String]>([])

  func search(_ query: String) async throws -> [MainActorAppsArticle.Item] {
    log.withLock { $0.append(query) }
    return [.init(title: query)]
  }

  var queries: [String] { log.withLock { $0 } }
}

struct FixedPaymentService: MainActorAppsArticle.PaymentService {
  func pay() async throws -> String { "receipt" }
}

/// A source of queries that the test sends by hand.
final class QuerySource: Sendable {
  private let listeners = LockedState<[@Sendable (String) -> Void]>([])

  var fuser: Fuser<String> {
    Fuser { [listeners] dispatch in
      listeners.withLock { $0.append(dispatch) }
      return AnyDisposable { listeners.withLock { $0.removeAll() } }
    }
  }

  func send(_ query: String) {
    for listener in listeners.withLock({ $0 }) { listener(query) }
  }

  var listenerCount: Int { listeners.withLock { $0.count } }
}
