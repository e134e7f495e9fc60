import Foundation
import PaceMarbles

/// The traces that ship with the tool (Sources/PaceTool/Traces, made by
/// Scripts/generate-traces.py), read from the resource bundle, so `pace demo` works from any
/// directory.
public enum BundledTraces {
  /// The file names, in the order `pace demo` shows them.
  public static let names = ["search-typing.csv", "button-bashing.csv", "scrolling-120hz.csv", "complete-all.csv"]

  /// Every bundled trace, in ``names`` order.
  public static func all() throws(ToolError) -> [Trace] {
    var traces: [Trace] = []
    for name in names { traces.append(try trace(named: name)) }
    return traces
  }

  /// The bundled trace called `name`.
  public static func trace(named name: String) throws(ToolError) -> Trace {
    guard let url = url(named: name), let data = FileManager.default.contents(atPath: url.path)
    else {
      throw ToolError("the bundled trace \(name) is missing from the tool's resources")
    }
    var trace = try TraceReader.parse(data, source: name)
    trace.source = name
    return trace
  }

  /// Where the bundled trace called `name` is.
  static func url(named name: String) -> URL? {
    Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Traces")
      ?? Bundle.module.url(forResource: name, withExtension: nil)
  }

  /// The interval the trace's `# interval:` comment suggests; 300ms if none.
  static func interval(of trace: Trace) throws(ToolError) -> Duration {
    guard let text = trace.metadata["interval"] else { return .milliseconds(300) }
    return try parseDuration(text, option: "\(trace.source): # interval")
  }
}
