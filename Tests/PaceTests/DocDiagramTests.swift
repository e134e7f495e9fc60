import Pace
import PaceTesting
import Testing

/// The marble diagrams of the DocC articles, checked against the engine. One step is 100 ms and
/// the interval is 300 ms (three steps) throughout, as in the articles. Keep them in sync.
@Suite struct DocDiagramTests {
  let step = Duration.milliseconds(100)
  let interval = Duration.milliseconds(300)

  // MARK: Debouncer.md

  @Test func debounceTrailing() {
    expectMarbles("ab-c------d----", step: step, through: { $0.debouncer(for: interval) }, equals: "------c------d-")
  }

  @Test func debounceLeading() {
    expectMarbles(
      "ab-c------d----", step: step, through: { $0.debouncer(for: interval, edges: .leading) },
      equals: "a---------d----")
  }

  @Test func debounceBothEdges() {
    expectMarbles(
      "ab-c------d----", step: step, through: { $0.debouncer(for: interval, edges: .both) },
      equals: "a-----c---d----")
  }

  @Test func debounceMaxWait() {
    expectMarbles(
      "abcdefghij----", step: step, through: { $0.debouncer(for: interval, maximumWait: .milliseconds(500)) },
      equals: "-----e----j---")
  }

  // MARK: Throttler.md

  @Test func throttleBothEdges() {
    expectMarbles("abcdefg-----h", step: step, through: { $0.throttler(for: interval) }, equals: "a--c--f--g--h")
  }

  @Test func throttleLeading() {
    expectMarbles(
      "abcdefg-----h", step: step, through: { $0.throttler(for: interval, edges: .leading) },
      equals: "a--d--g-----h")
  }

  @Test func throttleTrailing() {
    expectMarbles(
      "abcdefg-----h---", step: step, through: { $0.throttler(for: interval, edges: .trailing) },
      equals: "---c--f--g-----h")
  }
}
