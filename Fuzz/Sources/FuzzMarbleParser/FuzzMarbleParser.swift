import PaceMarbles

/// libFuzzer entry point: any bytes, as text, through the marble parser. A diagram must read back
/// from its own description and draw as a timeline; an error must be three short lines.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMarbleParser(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
  do {
    let diagram = try MarbleDiagram(text)
    let reread = try MarbleDiagram(diagram.description)
    precondition(reread.events == diagram.events, "no round trip: \(diagram.description)")
    if let stepLength = diagram.stepLength, let timeline = diagram.timeline() {
      _ = try? timeline.diagram(stepLength: stepLength)
    }
  } catch {
    let lines = error.description.split(separator: "\n", omittingEmptySubsequences: false)
    precondition(lines.count == 3 && lines.allSatisfy { $0.unicodeScalars.count < 400 }, "bad message: \(error)")
  }
  return 0
}
