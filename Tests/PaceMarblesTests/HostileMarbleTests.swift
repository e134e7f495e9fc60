import Pace
import PaceTestSupport
import Testing

@testable import PaceMarbles

/// Marble notation and durations at the edges: every input is an answer or a clear error, never
/// a trap, a hang or a blow-up. The fuzz tests are seeded, so a failure repeats; the libFuzzer
/// targets in Fuzz/ search the same ground without a seed (see CONTRIBUTING.md).
@Suite(.offThePool) struct HostileMarbleTests {
  // MARK: Durations

  @Test(arguments: [
    "9223372036.9s", "9223372036.854775808s", "9223372037s", "153722867.3min", "9223372036854775808ns",
    "99999999999999999999999999ms", "9223372036854775.9ms",
  ])
  func durationTooLargeNamesTheLimit(text: String) {
    #expect(throws: DurationSyntaxError(text: text, reason: .tooLarge)) { try DurationText.parse(text) }
    let message = DurationSyntaxError(text: text, reason: .tooLarge).description
    #expect(message.contains("too large: the limit is 9223372036.854775807s (about 292 years)"))
  }

  @Test func durationAtTheLimitParses() throws {
    #expect(try DurationText.parse("9223372036.854775807s") == DurationText.maximum)
    #expect(try DurationText.parse("9223372036854775807ns") == DurationText.maximum)
  }

  @Test(arguments: [
    ("0.00000000005min", Duration.nanoseconds(3)),  // exact, though a minute is not a power of ten
    ("1.000000000000000000000000s", .seconds(1)),  // trailing zeros say nothing
    ("0.000001ms", .nanoseconds(1)),
  ])
  func fractionsAreExact(text: String, expected: Duration) throws {
    #expect(try DurationText.parse(text) == expected)
  }

  @Test func durationErrorQuotesAShortEscapedExcerpt() {
    let huge = String(repeating: "7", count: 100_000) + "\u{1B}[31m" + "ms"
    let message = DurationSyntaxError(text: huge, reason: .tooLarge).description
    #expect(message.count < 250)
    #expect(message.hasPrefix("'" + String(repeating: "7", count: 60) + "…'"))
    let escaped = DurationSyntaxError(text: "1\u{0}\u{1B}s", reason: .unknownUnit("\u{0}\u{1B}s")).description
    #expect(escaped.hasPrefix(#"'1\0\u{1B}s' is not a duration: unknown unit '\0\u{1B}s'"#))
  }

  @Test func durationFuzz() async {
    // Synchronous work of some seconds: on a thread of its own, not the cooperative pool's.
    let failures = await offTheCooperativePool {
      var failures = Failures()
      var random = SeededGenerator(seed: 8)
      let pieces = [
        "0", "1", "5", "9", "00", "922337203685", "4775807", ".", ".", " ", "-", "ns", "us", "µs", "ms", "s", "min",
        "e3", "x", "\u{0}", "٣", "\u{301}", "+",
      ]
      for _ in 0..<fuzzRuns(4_000) {
        let text = (0..<random.next(upTo: 8)).map { _ in pieces[random.next(upTo: pieces.count)] }.joined()
        do throws(DurationSyntaxError) {
          let duration = try DurationText.parse(text)
          failures.check(duration >= .zero && duration <= DurationText.maximum, text)
          failures.check((try? DurationText.parse(DurationText.format(duration))) == duration, text)
        } catch {
          failures.check(!error.description.contains("\n") && error.description.count < 300, text)
        }
      }
      return failures
    }
    #expect(failures.isEmpty, "\(failures)")
  }

  // MARK: Marble diagrams

  @Test func hugeHeaderStepIsAnErrorNotATrap() {
    #expect(throws: MarbleSyntaxError.self) { try MarbleDiagram("step: 9223372036.9s a-b") }
    do {
      _ = try MarbleDiagram("step: 9223372036.9s a-b")
    } catch {
      #expect(error.description.contains("too large: the limit is 9223372036.854775807s"))
    }
  }

  @Test func errorOnALongLineShowsAWindowAroundTheColumn() {
    let text = String(repeating: "-", count: 100_000) + "*" + String(repeating: "-", count: 100_000)
    do {
      _ = try MarbleDiagram(text)
      Issue.record("expected an error")
    } catch {
      let lines = error.description.split(separator: "\n", omittingEmptySubsequences: false)
      #expect(lines.count == 3)
      #expect(lines.allSatisfy { $0.count < 100 })
      // The caret is under the `*`.
      let star = lines[1].firstIndex(of: "*").map { lines[1].distance(from: lines[1].startIndex, to: $0) }
      #expect(star == lines[2].count - 1)
    }
  }

  @Test func errorEscapesControlCharacters() {
    do {
      _ = try MarbleDiagram("a-\u{1B}[31m-b")
      Issue.record("expected an error")
    } catch {
      #expect(
        error.description == #"""
          column 3: unexpected '\u{1B}'; a value that is not a letter or digit is quoted, like '\u{1B}'
            a-\u{1B}[31m-b
              ^
          """#)
    }
  }

  @Test func aTimelineFarOutIsRefusedBeforeAllocating() {
    let timeline = MarbleTimeline([(PaceInstant(nanoseconds: .max), "a")])
    #expect(
      throws: MarbleRenderError.tooLong(
        value: "a", instant: PaceInstant(nanoseconds: .max), stepLength: .nanoseconds(1))
    ) {
      try timeline.diagram(stepLength: .nanoseconds(1))
    }
    let far = MarbleTimeline([(PaceInstant(nanoseconds: .max), "a")])
    #expect(throws: MarbleRenderError.self) {
      try far.diagram(stepLength: .nanoseconds(1), origin: PaceInstant(nanoseconds: .min))
    }
  }

  @Test func aTimelineOfHugeStepsSaturates() throws {
    let timeline = try #require(
      try MarbleDiagram("a-----------------------b").timeline(stepLength: .seconds(Int64.max)))
    #expect(timeline.events.map(\.instant) == [.zero, PaceInstant(nanoseconds: .max)])
  }

  @Test func runnerRefusesADiagramPastTheLastInstant() {
    #expect(throws: MarbleRunError.self) {
      try MarbleRunner.run("step: 9223372036s a-b") { $0.debouncer(for: .milliseconds(300)) }
    }
  }

  @Test func runnerSettlesWithHugeStepsAndIntervals() throws {
    // The settling limit would pass the last instant; it stops short of it instead.
    let run = try MarbleRunner.run("step: 1000000000s a", settlingSteps: .max) { $0.debouncer(for: .seconds(1)) }
    #expect(try run.outputDiagram(offGrid: .floor).description == "a")
  }

  @Test func graphemesThatWouldFuseStillReadBack() throws {
    // Found by FuzzMarbleParser: after a control character a combining mark (U+06DA, which
    // `Character.isLetter` accepts) stands alone, but written after "S" it fused into "Sۚ".
    #expect(throws: MarbleSyntaxError(text: "S\u{C}\u{6DA}", column: 3, reason: .unexpectedCharacter("\u{6DA}"))) {
      try MarbleDiagram("S\u{C}\u{6DA}")
    }
    // Hangul jamo written apart stay apart: the description separates them with a space.
    let jamo = try MarbleDiagram("\u{1100} \u{1161}")
    #expect(jamo.events.count == 2)
    #expect(try MarbleDiagram(jamo.description).events == jamo.events)
    // A value that fuses with its quote cannot be drawn.
    #expect(throws: MarbleRenderError.unrepresentable(value: "\u{301}x")) {
      try MarbleTimeline([(PaceInstant.zero, "\u{301}x")]).diagram(stepLength: .milliseconds(1))
    }
  }

  /// Random strings over the marble alphabet (20,000; more in CI's fuzz step) through the parser. Any outcome is fine
  /// except a trap; an error is three short lines whose caret points into the text, and a
  /// diagram reads back from its own description.
  @Test func marbleFuzz() async {
    // Tens of seconds of synchronous work: on a thread of its own, not the cooperative pool's.
    let failures = await offTheCooperativePool {
      var failures = Failures()
      var random = SeededGenerator(seed: 100_000)
      let pieces = [
        "-", "-", "-", "a", "b", "7", "|", "^", ";", "[", "]", "'", "'w'", ",", " ", "\n", "\r\n", "*", "step:",
        "step: ", "1", "0", ".", "ms", "s", "ns", "min", "9223372036.9s", "9223372036854775807", "é", "\u{0}",
        "\u{1B}", "\u{301}", "\u{FEFF}", "👩‍💻", "\u{C}", "\u{6DA}", "\u{1100}", "\u{1161}",
      ]
      for _ in 0..<fuzzRuns(20_000) {
        let text = (0..<random.next(upTo: 14)).map { _ in pieces[random.next(upTo: pieces.count)] }.joined()
        do throws(MarbleSyntaxError) {
          let diagram = try MarbleDiagram(text)
          failures.check(diagram.length >= (diagram.events.last?.step ?? -1) + 1, text)
          if let reread = try? MarbleDiagram(diagram.description) {
            failures.check(reread.events == diagram.events, text)
          } else {
            failures.check(false, "rereading \(text)")
          }
          if let stepLength = diagram.stepLength, let timeline = diagram.timeline() {
            _ = try? timeline.diagram(stepLength: stepLength)
          }
        } catch {
          let lines = error.description.split(separator: "\n", omittingEmptySubsequences: false)
          failures.check(lines.count == 3, text)
          failures.check(lines.allSatisfy { $0.unicodeScalars.count < 400 }, text)
          failures.check(error.column >= 1 && error.column <= text.count + 1, text)
        }
      }
      return failures
    }
    #expect(failures.isEmpty, "\(failures)")
  }
}
