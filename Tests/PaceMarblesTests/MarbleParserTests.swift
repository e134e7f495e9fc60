import PaceMarbles
import Testing

@Suite struct MarbleParserTests {
  typealias Entry = MarbleDiagram.Entry

  @Test func stepsValuesAndEnd() throws {
    let diagram = try MarbleDiagram("a--b--c---|")
    #expect(
      diagram.events == [
        Entry(step: 0, event: .value("a")), Entry(step: 3, event: .value("b")), Entry(step: 6, event: .value("c")),
        Entry(step: 10, event: .finish),
      ])
    #expect(diagram.length == 11)
    #expect(diagram.stepLength == nil)
  }

  @Test func groupsQuotedValuesFailureAndCancel() throws {
    let diagram = try MarbleDiagram("[ab]-'word';7^")
    #expect(
      diagram.events == [
        Entry(step: 0, event: .value("a")), Entry(step: 0, event: .value("b")), Entry(step: 2, event: .value("word")),
        Entry(step: 3, event: .cancel), Entry(step: 4, event: .value("7")), Entry(step: 5, event: .failure),
      ])
  }

  @Test func spacesAndNewlinesAreIgnored() throws {
    #expect(try MarbleDiagram("a -    -b- -") == MarbleDiagram("a--b--"))
    #expect(try MarbleDiagram("a-\n-b") == MarbleDiagram("a--b"))
  }

  @Test func headerSaysTheStepLength() throws {
    let diagram = try MarbleDiagram("step: 100ms a-b")
    #expect(diagram.stepLength == .milliseconds(100))
    #expect(diagram.events == [Entry(step: 0, event: .value("a")), Entry(step: 2, event: .value("b"))])
    #expect(try MarbleDiagram("step: 1.5 s\na").stepLength == .milliseconds(1500))
    #expect(diagram.descriptionWithHeader == "step: 100ms a-b")
  }

  @Test func groupMayEndTheTimeline() throws {
    let diagram = try MarbleDiagram("--[c|]--")
    #expect(diagram.events == [Entry(step: 2, event: .value("c")), Entry(step: 2, event: .finish)])
    #expect(diagram.length == 5)
  }

  @Test(arguments: [
    ("a*b", 2, MarbleSyntaxError.Reason.unexpectedCharacter("*")),
    ("a-'bc", 3, .unterminatedValue),
    ("a''", 2, .emptyValue),
    ("[a[b]]", 3, .nestedGroup),
    ("a-[bc", 3, .unterminatedGroup),
    ("ab]", 3, .unmatchedGroupEnd),
    ("a[]", 2, .emptyGroup),
    ("a-[b-c]", 5, .stepInGroup),
    ("a|b", 3, .eventAfterEnd),
    ("^-a", 3, .eventAfterEnd),
    ("[|a]", 3, .eventAfterEnd),
    (",[a,]b", 1, .delayNotSupported),
    ("step: 0ms a", 7, .zeroStepLength),
  ])
  func reportsTheColumnAndReason(text: String, column: Int, reason: MarbleSyntaxError.Reason) {
    #expect(throws: MarbleSyntaxError(text: text, column: column, reason: reason)) { try MarbleDiagram(text) }
  }

  @Test func malformedHeader() {
    let text = "step: 10 parsecs a-b"
    #expect(
      throws: MarbleSyntaxError(
        text: text, column: 7,
        reason: .malformedStepLength(DurationSyntaxError(text: "10 parsecs", reason: .unknownUnit("parsecs")))
      )
    ) { try MarbleDiagram(text) }
  }

  @Test func errorDescriptionPointsAtTheColumn() {
    #expect(throws: MarbleSyntaxError.self) { try MarbleDiagram("a-[b-c]") }
    do {
      _ = try MarbleDiagram("a-[b-c]")
    } catch {
      #expect(
        error.description == """
          column 5: '-' inside a group; a group is a single step
            a-[b-c]
                ^
          """)
    }
  }

  @Test func errorOnASecondLinePointsIntoThatLine() {
    do {
      _ = try MarbleDiagram("a-b\n-c*")
      Issue.record("expected an error")
    } catch {
      #expect(error.column == 7)
      #expect(error.description.hasSuffix("\n  -c*\n    ^"))
    }
  }
}
