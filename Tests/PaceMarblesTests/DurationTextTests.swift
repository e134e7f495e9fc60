import PaceMarbles
import Testing

@Suite struct DurationTextTests {
  @Test(arguments: [
    ("300ms", Duration.milliseconds(300)),
    ("1s", .seconds(1)),
    ("1.5s", .milliseconds(1500)),
    ("250us", .microseconds(250)),
    ("250µs", .microseconds(250)),
    ("0ms", .zero),
    ("8.333ms", .nanoseconds(8_333_000)),
    (" 40 ns ", .nanoseconds(40)),
    ("2min", .seconds(120)),
    (".5s", .milliseconds(500)),
  ])
  func parses(text: String, expected: Duration) throws {
    #expect(try DurationText.parse(text) == expected)
  }

  @Test(arguments: [
    ("", DurationSyntaxError.Reason.empty),
    ("300", .missingUnit),
    ("ms", .notANumber),
    ("1.2.3s", .notANumber),
    ("3OOms", .unknownUnit("OOms")),
    ("300 msec", .unknownUnit("msec")),
    ("-1s", .negative),
    ("0.5ns", .tooPrecise),
    ("99999999999s", .tooLarge),
  ])
  func rejects(text: String, reason: DurationSyntaxError.Reason) {
    #expect(throws: DurationSyntaxError(text: text, reason: reason)) { try DurationText.parse(text) }
  }

  @Test func describesTheProblem() {
    let error = DurationSyntaxError(text: "300", reason: .missingUnit)
    #expect(
      error.description
        == "'300' is not a duration: the unit is missing (write it like 300ms, 1.5s or 250us; units: ns, us, ms, s, min)"
    )
  }

  @Test(arguments: [
    (Duration.zero, "0ms"), (.milliseconds(300), "300ms"), (.seconds(1), "1s"), (.milliseconds(1500), "1.5s"),
    (.nanoseconds(8_333_000), "8.333ms"), (.microseconds(250), "250us"), (.nanoseconds(40), "40ns"),
    (.seconds(120), "120s"),
  ])
  func formatsAndReadsBack(duration: Duration, text: String) throws {
    #expect(DurationText.format(duration) == text)
    #expect(try DurationText.parse(text) == duration)
  }
}
