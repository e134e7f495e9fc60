import Foundation
import Pace
import PaceTesting
import PaceUI
import Testing

/// The marble diagrams in doc comments, checked against the engine like the articles' are
/// (DocDiagramTests), and a scan that fails when a doc comment's diagram is not one of them: a
/// diagram cannot be added or edited in a doc comment without its check here.
@Suite @MainActor struct DocCommentDiagramTests {
  let step = Duration.milliseconds(100)

  /// Every diagram block of Sources/Pace and Sources/PaceUI doc comments, verbatim (without the
  /// `/// ` prefix), with the file it is in. Each has a test below.
  static let checked: [(file: String, diagram: String)] = [
    (
      "Shared/ControlGate.swift",
      """
      taps       a--------b-------
      isEnabled  ____-----____----   (`_`: disabled for 4 steps after each tap)
      """
    ),
    (
      "Debounce/Debouncer.swift",
      """
      calls        a-b-c-------d-----   (one step: 100 ms; interval: 300 ms, trailing)
      invocations  -------c-------d--
      """
    ),
    (
      "Diffuser/CoalescingDiffuser.swift",
      """
      runs         [abc]---d---   (three runs in one turn, then one: one render each turn)
      renders      c    ---d---
      """
    ),
  ]

  @Test func debouncerDocComment() {
    expectMarbles(
      "a-b-c-------d-----", step: step, through: { $0.debouncer(for: .milliseconds(300)) },
      equals: "-------c-------d--")
  }

  @Test func controlGateDocComment() {
    final class Control: Enablable {
      var isEnabled = true
    }
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let control = Control()
    let taps: Set = [0, 9]
    var enabled = ""
    for index in 0..<17 {
      scheduler.advance(to: PaceInstant(step * index))
      if taps.contains(index) { gate.close([control], for: step * 4) }
      enabled += control.isEnabled ? "-" : "_"
    }
    #expect(enabled == "____-----____----")
  }

  @Test func coalescingDiffuserDocComment() {
    // A CoalescingDiffuser is a Coalescer with `.latest` and no window in front of a diffuser.
    expectMarbles("[abc]---d---", step: step, through: { $0.coalescer() }, equals: "c    ---d---")
  }

  /// Finds the diagram blocks of the doc comments: fenced blocks without a language whose lines
  /// are all `label  marbles`, optionally followed by a parenthesised remark.
  @Test func everyDocCommentDiagramIsChecked() throws {
    let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources")
    let row = /^[A-Za-z][A-Za-z ]*?\s{2,}[-a-z_|^\[\]][-a-z_|^\[\] ]*?(\s{2,}\(.*\))?$/
    var found: [(file: String, diagram: String)] = []
    for module in ["Pace", "PaceUI"] {
      let root = sources.appendingPathComponent(module)
      let files = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String } ?? []
      for file in files.sorted() where file.hasSuffix(".swift") {
        let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
          .map { $0.trimmingCharacters(in: .whitespaces) }
        var block: [String]?  // the rows of an open fence without a language
        var inCode = false  // inside a fence with a language: code, not a diagram
        for line in lines {
          guard line.hasPrefix("///") else {
            (block, inCode) = (nil, false)
            continue
          }
          let content = line.dropFirst(3).hasPrefix(" ") ? String(line.dropFirst(4)) : String(line.dropFirst(3))
          if inCode {
            if content == "```" { inCode = false }
          } else if let rows = block {
            if content == "```" {
              if !rows.isEmpty, rows.allSatisfy({ $0.wholeMatch(of: row) != nil }) {
                found.append((file, rows.joined(separator: "\n")))
              }
              block = nil
            } else {
              block = rows + [content]
            }
          } else if content == "```" {
            block = []
          } else if content.hasPrefix("```") {
            inCode = true
          }
        }
      }
    }
    let isSame = { (one: (file: String, diagram: String), other: (file: String, diagram: String)) in
      one.file == other.file && one.diagram == other.diagram
    }
    let unchecked = found.filter { item in !Self.checked.contains { isSame($0, item) } }
    #expect(unchecked.isEmpty, "doc-comment diagrams without a check in DocCommentDiagramTests: \(unchecked)")
    let gone = Self.checked.filter { item in !found.contains { isSame($0, item) } }
    #expect(gone.isEmpty, "checked diagrams no longer in the doc comments: \(gone)")
  }
}
