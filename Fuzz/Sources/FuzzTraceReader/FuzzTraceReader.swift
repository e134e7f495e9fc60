import Foundation
import PaceTool

/// libFuzzer entry point: the first byte picks the file name (CSV, JSON lines, or sniffed), the
/// rest is the trace. A trace that reads is run through a debounce and a throttle; an error must
/// be one short line without control characters.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTraceReader(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: start, count: count)
  guard let first = bytes.first else { return 0 }
  let source = ["trace.csv", "trace.jsonl", "trace"][Int(first) % 3]
  do {
    let trace = try TraceReader.parse(Data(bytes.dropFirst()), source: source)
    precondition(
      !trace.times.isEmpty && zip(trace.times, trace.times.dropFirst()).allSatisfy { $0 <= $1 }, "out of order")
    precondition(trace.times.allSatisfy { $0 >= 0 && $0 <= ToolLimits.maximumTime }, "time out of range")
    for strategy in [
      Strategy(.debounce, interval: .milliseconds(300), maxWait: .seconds(1)),
      Strategy(.throttle, interval: .seconds(1)),
    ] {
      let result = try Simulator.run(trace, strategy: strategy)
      precondition(result.statistics.calls == trace.count, "lost calls")
    }
  } catch {
    let message = error.message
    precondition(
      !message.contains("\n") && message.unicodeScalars.count < 500
        && message.unicodeScalars.allSatisfy { $0.value >= 0x20 && !(0x7F...0x9F).contains($0.value) },
      "bad message: \(message)")
  }
  return 0
}
