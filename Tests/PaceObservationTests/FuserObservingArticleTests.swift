import Observation
import Pace
import PaceObservation
import Testing

/// The example and the diagram of PaceObservation.docc, checked. Keep them in sync.
@MainActor
@Suite struct FuserObservingArticleTests {
  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @MainActor @Observable
  final class SearchModel {
    var query = ""
    private(set) var searches: [String] = []

    func search(_ query: String) { searches.append(query) }
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @MainActor
  final class SearchController {
    private var connection: AnyDisposable?

    init(model: SearchModel, scheduler: some PaceScheduler = .main) {
      connection = Fuser.observing(scheduler: scheduler) { [weak model] in model?.query ?? "" }
        .debounced(for: .milliseconds(300), maximumWait: .seconds(1), scheduler: scheduler)
        .connect { [weak model] query in
          MainActor.assumeIsolated { model?.search(query) }
        }
    }
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func searchControllerExample() {
    let scheduler = TestScheduler()
    let model = SearchModel()
    let controller = SearchController(model: model, scheduler: scheduler)
    var searchTimes: [Duration] = []
    for (step, letter) in "swift".enumerated() {
      scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(100 * step)))
      model.query.append(letter)
    }
    var seen = 0
    while scheduler.nextDeadline != nil {
      scheduler.advance(to: scheduler.nextDeadline!)
      if model.searches.count > seen {
        seen = model.searches.count
        searchTimes.append(PaceInstant.zero.duration(to: scheduler.now))
      }
    }
    #expect(model.searches == ["swift"])
    #expect(searchTimes == [.milliseconds(700)])
    _ = controller
  }

  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
  @Test func diagram() {
    let scheduler = TestScheduler()
    let model = SearchModel()
    let step = Duration.milliseconds(100)
    let observed = Events<(Int, String)>()
    let debounced = Events<(Int, String)>()
    let index: @Sendable () -> Int = { Int(PaceInstant.zero.duration(to: scheduler.now) / step) }
    let changes = Fuser.observing(scheduler: scheduler) { [model] in model.query }
    let first = changes.connect { observed.record((index(), $0)) }
    let second = changes.debounced(for: .milliseconds(300), scheduler: scheduler)
      .connect { debounced.record((index(), $0)) }

    // "ab-[cd]-----e--": each letter replaces the query; [cd] is two changes in one turn.
    let input: [(Int, [String])] = [(0, ["a"]), (1, ["b"]), (3, ["c", "d"]), (9, ["e"])]
    for (at, values) in input {
      scheduler.advance(to: PaceInstant.zero.advanced(by: step * at))
      for value in values { model.query = value }
    }
    scheduler.advance(to: PaceInstant.zero.advanced(by: step * 16))

    func render(_ events: Events<(Int, String)>) -> String {
      let byStep = Dictionary(events.all, uniquingKeysWith: { $0 + $1 })
      return (0..<16).map { byStep[$0] ?? "-" }.joined()
    }
    #expect(render(observed) == "ab-d-----e------")
    #expect(render(debounced) == "------d-----e---")
    first.dispose()
    second.dispose()
  }
}
