import PaceTestSupport
import Testing

@testable import Pace

/// Every pattern the articles and the README show, as the build compiles it from the documents
/// (Generated/, by Scripts/extract-doc-examples.py): stored as a property of its owner, it does not
/// keep the owner alive. The tests release the owner with work pending and check that its deinit ran (a weak
/// reference is `nil`) and that nothing is left to fire.
@Suite @MainActor struct DocumentedPatternTests {
  let scheduler = TestScheduler()

  // MARK: MainActorApps.md

  @Test func theArticlesViewModelTest() {
    let scheduler = TestScheduler()
    let model = DocExample_MainActorApps_1.SearchModel(scheduler: scheduler)
    model.queryChanged("s")
    scheduler.advance(by: .milliseconds(100))
    model.queryChanged("sw")
    scheduler.advance(by: .milliseconds(299))
    #expect(model.hint == "")
    scheduler.advance(by: .milliseconds(1))
    #expect(model.hint == "sw")
  }

  @Test func searchModelWithOwnerIsFreedWithWorkPending() {
    var model: DocExample_MainActorApps_1.SearchModel? = .init(scheduler: scheduler)
    weak var released: DocExample_MainActorApps_1.SearchModel?
    released = model
    model?.queryChanged("swift")
    #expect(scheduler.pendingCount == 1)
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
    scheduler.advance(by: .seconds(1))
  }

  @Test func checkoutWithOwnerAndWeakSelfIsFreedWithWorkPending() {
    var checkout: DocExample_MainActorApps_2.Checkout? = .init(scheduler: scheduler)
    weak var released: DocExample_MainActorApps_2.Checkout?
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
    let checkout = DocExample_MainActorApps_2.Checkout(scheduler: scheduler)
    checkout.payTapped()
    scheduler.advance()
    #expect(checkout.status == "Paying…")
  }

  @Test func queryScreenWithAFuserAndACoalescingDiffuserIsFreedWithWorkPending() {
    let source = QuerySource()
    var screen: DocExample_MainActorApps_3.QueryScreen? = .init(queries: source.fuser, scheduler: scheduler)
    weak var released: DocExample_MainActorApps_3.QueryScreen?
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
    var model: DocExample_MainActorApps_4.ResultsModel? = .init(service: service, clock: scheduler)
    weak var released: DocExample_MainActorApps_4.ResultsModel?
    released = model
    model?.queryChanged("swift")
    #expect(scheduler.pendingCount == 1)
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)  // the submitted call's task does not hold the debouncer
    scheduler.advance(by: .seconds(1))
    #expect(service.queries.isEmpty)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func resultsModelShowsTheResultsOfTheLastQuery() async throws {
    let service = RecordingSearchService()
    let model = DocExample_MainActorApps_4.ResultsModel(service: service, clock: scheduler)
    let refresh = Task { try await model.refresh("swift") }
    let probe = Task { scheduler.advance(by: .milliseconds(300)) }
    await probe.value
    try await refresh.value
    #expect(model.items == [.init(title: "swift")])
    #expect(service.queries == ["swift"])
  }

  @Test func payModelWithOwnerIsFreedOnceThePaymentEnds() async {
    var model: DocExample_MainActorApps_5.PayModel? = .init(service: FixedPaymentService(), clock: scheduler)
    weak var released: DocExample_MainActorApps_5.PayModel?
    released = model
    await model?.payTapped()
    #expect(model?.receipt == "receipt")
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)
  }

  // MARK: Debouncer.md, Throttler.md, Coalescer.md, AsyncDebouncer.md

  @Test func theDebouncerArticlesModelIsFreedWithWorkPending() {
    var model: DocExample_Debouncer_1.SearchModel? = .init(scheduler: scheduler)
    weak var released: DocExample_Debouncer_1.SearchModel?
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
    var tracker: DocExample_Throttler_1.ScrollTracker? = .init(scheduler: scheduler)
    weak var released: DocExample_Throttler_1.ScrollTracker?
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
    var controller: DocExample_Coalescer_1.ListController? = .init(scheduler: scheduler)
    weak var released: DocExample_Coalescer_1.ListController?
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
    var model: DocExample_AsyncDebouncer_1.SearchModel? = .init(service: service, clock: scheduler)
    weak var released: DocExample_AsyncDebouncer_1.SearchModel?
    released = model
    model?.queryChanged("swift")
    model = nil
    #expect(released == nil)
    #expect(scheduler.pendingCount == 0)  // the submitted call's task does not hold the debouncer
    scheduler.advance(by: .seconds(1))
    #expect(service.queries.isEmpty)
    #expect(scheduler.pendingCount == 0)
  }

  // MARK: README.md

  @Test func theReadmesScreenModelPacesAndIsFreedWithWorkPending() {
    var model: DocExample_README_1.ScreenModel? = .init(scheduler: scheduler)
    weak var released: DocExample_README_1.ScreenModel?
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

// MARK: - Test doubles

/// A search service that records its queries and answers with one item per query.
final class RecordingSearchService: DocExample_MainActorApps_4.SearchService {
  private let log = LockedState<[String]>([])

  func search(_ query: String) async throws -> [DocExample_MainActorApps_4.Item] {
    log.withLock { $0.append(query) }
    return [.init(title: query)]
  }

  var queries: [String] { log.withLock { $0 } }
}

extension RecordingSearchService: DocExample_AsyncDebouncer_1.SearchService {
  func search(_ query: String) async throws -> [DocExample_AsyncDebouncer_1.Item] {
    log.withLock { $0.append(query) }
    return [.init(title: query)]
  }
}

struct FixedPaymentService: DocExample_MainActorApps_5.PaymentService {
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
