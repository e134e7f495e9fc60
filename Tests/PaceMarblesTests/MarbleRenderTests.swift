import Pace
import PaceMarbles
import Testing

@Suite struct MarbleRenderTests {
  @Test(arguments: ["a--b--c---|", "[ab]-'word'-7^", "---", "a;b", "--[c|]", "'a b'-[x'yz']"])
  func roundTrips(text: String) throws {
    let diagram = try MarbleDiagram(text)
    #expect(diagram.description == text)
    #expect(try MarbleDiagram(diagram.description) == diagram)
  }

  @Test func canonicalFormDropsSpacesAndUnneededQuotes() throws {
    #expect(try MarbleDiagram("'a' - [b] 'cd'").description == "a-b'cd'")
  }

  @Test func timelineToDiagramAndBack() throws {
    let ms = { (value: Int64) in PaceInstant(.milliseconds(value)) }
    let timeline = MarbleTimeline(
      [(ms(0), "a"), (ms(300), "b"), (ms(300), "c"), (ms(500), "hello")], end: .finished(at: ms(700)))
    let diagram = try timeline.diagram(stepLength: .milliseconds(100))
    #expect(diagram.description == "a--[bc]-'hello'-|")
    #expect(diagram.timeline() == timeline)
  }

  @Test func numbersAreDrawnWithTheirDescription() throws {
    let timeline = MarbleTimeline([(PaceInstant(.milliseconds(20)), 6), (PaceInstant(.milliseconds(40)), 15)])
    #expect(try timeline.diagram(stepLength: .milliseconds(10)).description == "--6-'15'")
  }

  @Test func offGridIsAnErrorByDefault() {
    let timeline = MarbleTimeline([(PaceInstant(.milliseconds(250)), "c")])
    #expect(
      throws: MarbleRenderError.offGrid(
        value: "c", instant: PaceInstant(.milliseconds(250)), stepLength: .milliseconds(100))
    ) {
      try timeline.diagram(stepLength: .milliseconds(100))
    }
    let message = MarbleRenderError.offGrid(
      value: "c", instant: PaceInstant(.milliseconds(250)), stepLength: .milliseconds(100)
    ).description
    #expect(
      message
        == "c at 250ms is not on the 100ms step grid (it falls between steps 2 and 3); draw with offGrid: .floor to put it in step 2"
    )
  }

  @Test func floorPutsAnEventInTheStepThatContainsIt() throws {
    let timeline = MarbleTimeline([(PaceInstant(.milliseconds(250)), "c"), (PaceInstant(.milliseconds(299)), "d")])
    #expect(try timeline.diagram(stepLength: .milliseconds(100), offGrid: .floor).description == "--[cd]")
  }

  @Test func originShiftsStepZero() throws {
    let timeline = MarbleTimeline([(PaceInstant(.seconds(10)), "a"), (PaceInstant(.milliseconds(10_200)), "b")])
    #expect(
      try timeline.diagram(stepLength: .milliseconds(100), origin: PaceInstant(.seconds(10))).description == "a-b")
    #expect(throws: MarbleRenderError.beforeOrigin(value: "a", instant: PaceInstant(.seconds(10)))) {
      try timeline.diagram(stepLength: .milliseconds(100), origin: PaceInstant(.seconds(11)))
    }
  }

  @Test func valuesThatCannotBeDrawn() {
    #expect(throws: MarbleRenderError.unrepresentable(value: "it's")) {
      try MarbleTimeline([(PaceInstant.zero, "it's")]).diagram(stepLength: .seconds(1))
    }
    #expect(throws: MarbleRenderError.unrepresentable(value: "")) {
      try MarbleTimeline([(PaceInstant.zero, "")]).diagram(stepLength: .seconds(1))
    }
  }

  @Test func alignedDiagramsShareColumns() throws {
    let lines = MarbleDiagram.aligned([
      try MarbleDiagram("a-'bc'-d"), try MarbleDiagram("-e-[fg]"), try MarbleDiagram("x"),
    ])
    #expect(
      lines == [
        "a-'bc'-   d",
        "-e-   [fg]",
        "x",
      ])
    // Spaces are ignored, so each line still reads as its diagram.
    #expect(try MarbleDiagram(lines[1]) == MarbleDiagram("-e-[fg]"))
  }

  @Test func tableLabelsLines() throws {
    let table = MarbleDiagram.table(
      [("input", try MarbleDiagram("a-b")), ("expected", try MarbleDiagram("--[ab]"))], indent: "  ")
    #expect(
      table == """
          input     a-b
          expected  --[ab]
        """)
  }
}
