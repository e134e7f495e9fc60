import Pace
import PaceTestSupport
import Testing

/// The marble diagrams of KeyedPacing.md, checked: one keyed primitive, two keys called on one
/// timeline, each key's output as its own line. One step is 100 ms and the interval 300 ms.
/// Keep them in sync with the article.
@Suite struct KeyedDocDiagramTests {
  let step: Int64 = 100

  /// Calls each key's letters at their steps on one scheduler, and renders each key's output.
  func run(
    _ calls: [String: String], length: Int,
    make: (TestScheduler, KeyedRecorder<String, String>) -> (String, String) -> Void
  ) -> [String: String] {
    let scheduler = TestScheduler()
    let recorder = KeyedRecorder<String, String>(clock: scheduler)
    let call = make(scheduler, recorder)
    for position in 0..<length {
      scheduler.advance(to: ms(Int64(position) * step))
      for (key, line) in calls.sorted(by: { $0.key < $1.key }) {
        let marble = Array(line)[position]
        if marble != "-" { call(key, String(marble)) }
      }
    }
    scheduler.advance(by: .seconds(10))
    return calls.keys.reduce(into: [:]) { lines, key in
      lines[key] = marbles(recorder.invocations(of: key), stepMilliseconds: step, length: length)
    }
  }

  @Test func keyedDebouncerTrailing() {
    let output = run(["x": "ab-c------d----", "y": "--p-q----------"], length: 15) { scheduler, recorder in
      let debouncer = KeyedDebouncer<String, String>(
        for: .milliseconds(300), scheduler: scheduler, perform: recorder.record
      )
      return { debouncer.call($0, $1) }
    }
    #expect(output["x"] == "------c------d-")
    #expect(output["y"] == "-------q-------")
  }

  @Test func keyedThrottlerBothEdges() {
    let output = run(["x": "abcdefg-----h", "y": "--pq---------"], length: 13) { scheduler, recorder in
      let throttler = KeyedThrottler<String, String>(
        for: .milliseconds(300), scheduler: scheduler, perform: recorder.record
      )
      return { throttler.call($0, $1) }
    }
    #expect(output["x"] == "a--c--f--g--h")
    #expect(output["y"] == "--p--q-------")
  }
}
