import Pace
import PaceCombine
import Testing

#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif

/// Runs `input` through `pacing` on virtual time, one character a step of 100 ms: letters are
/// values, `|` the completion, `-` nothing. The output uses the same tokens, with `[ ]` around
/// several events in one step.
func marbles(
  _ input: String,
  through pacing: (PassthroughSubject<String, Never>, TestScheduler) -> AnyPublisher<String, Never>
) -> String {
  let scheduler = TestScheduler()
  let step = Duration.milliseconds(100)
  let subject = PassthroughSubject<String, Never>()
  var steps: [Int: [String]] = [:]
  func record(_ token: String) {
    let index = Int(PaceInstant.zero.duration(to: scheduler.now) / step)
    steps[index, default: []].append(token)
  }
  let cancellable = pacing(subject, scheduler).sink(receiveCompletion: { _ in record("|") }, receiveValue: record)
  for (index, token) in input.enumerated() {
    scheduler.advance(to: PaceInstant.zero.advanced(by: step * index))
    switch token {
    case "-": break
    case "|": subject.send(completion: .finished)
    default: subject.send(String(token))
    }
  }
  scheduler.advance(by: step * 20)
  cancellable.cancel()
  let length = (steps.keys.max() ?? -1) + 1
  return (0..<length).map { index in
    guard let tokens = steps[index] else { return "-" }
    return tokens.count == 1 ? tokens[0] : "[\(tokens.joined())]"
  }.joined()
}

/// The diagrams and the example of PaceCombine.docc, checked. Keep them in sync.
@Suite struct PaceCombineArticleTests {
  let interval = Duration.milliseconds(300)

  @Test func debouncedDiagram() {
    #expect(
      marbles("ab-c------d-|") { $0.debounced(for: interval, scheduler: $1).eraseToAnyPublisher() }
        == "------c-----[d|]"
    )
  }

  @Test func debouncedLeadingDiagram() {
    #expect(
      marbles("ab-c------d-|") { $0.debounced(for: interval, edges: .both, scheduler: $1).eraseToAnyPublisher() }
        == "a-----c---d-|"
    )
  }

  @Test func debouncedMaxWaitDiagram() {
    #expect(
      marbles("abcdefghij--|") {
        $0.debounced(for: interval, maximumWait: .milliseconds(500), scheduler: $1).eraseToAnyPublisher()
      } == "-----e----j-|"
    )
  }

  @Test func throttledDiagram() {
    #expect(
      marbles("abcdefg-----h|") { $0.throttled(for: interval, scheduler: $1).eraseToAnyPublisher() }
        == "a--c--f--g--h|"
    )
  }

  // MARK: The article's example

  /// The article's example, as written there but for the scheduler, which tests pass in.
  final class SearchModel {
    @Published var query = ""
    @Published private(set) var results: [String] = []
    private var cancellables: Set<AnyCancellable> = []

    init(search: @escaping (String) -> [String], scheduler: some PaceScheduler = .main) {
      $query
        .dropFirst()
        .debounced(for: .milliseconds(300), maximumWait: .seconds(1), scheduler: scheduler)
        .removeDuplicates()
        .map(search)
        .sink { [weak self] in self?.results = $0 }
        .store(in: &cancellables)
    }
  }

  @Test func searchModelExample() {
    let scheduler = TestScheduler()
    var searches: [(String, Duration)] = []
    let model = SearchModel(
      search: { query in
        searches.append((query, PaceInstant.zero.duration(to: scheduler.now)))
        return [query.uppercased()]
      },
      scheduler: scheduler
    )
    // "swift" typed a letter every 100 ms, then a pause: one search, 300 ms after the last
    // letter. Then edits every 250 ms that never pause for 300 ms: maximumWait searches at 2 s with
    // the latest query ("swiftui"); the flurry after it settles on "swiftui" again at 2.4 s, and
    // removeDuplicates drops that search.
    let typing: [(Int, String)] = [
      (0, "s"), (100, "sw"), (200, "swi"), (300, "swif"), (400, "swift"),
      (1_000, "swiftu"), (1_250, "swiftui"), (1_500, "swiftu"), (1_750, "swiftui"), (2_000, "swiftuI"),
      (2_100, "swiftui"),
    ]
    for (time, query) in typing {
      scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(time)))
      model.query = query
    }
    scheduler.advance(by: .seconds(5))

    #expect(searches.map(\.0) == ["swift", "swiftui"])
    #expect(searches.map(\.1) == [.milliseconds(700), .milliseconds(2_000)])
    #expect(model.results == ["SWIFTUI"])
  }
}
