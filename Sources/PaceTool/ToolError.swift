import PaceMarbles

/// A problem with what the user gave the tool: one line naming the file, the line and the
/// reason. The tool prints it and exits with status 2, never a stack trace.
public struct ToolError: Error, Equatable, CustomStringConvertible {
  /// The whole message, such as `search.csv:7: time 120ms goes backwards (line 6 is at 130ms)`.
  public var message: String

  /// An error with `message`.
  public init(_ message: String) {
    self.message = message
  }

  /// An error at `line` of `file`; `file` is a name from ``name(_:)``.
  static func at(_ file: String, line: Int, _ reason: String) -> ToolError {
    ToolError("\(file):\(line): \(reason)")
  }

  /// A file name as messages show it: escaped, and cut short if it is absurdly long.
  static func name(_ path: String) -> String {
    Excerpt.escaped(path, limit: 200)
  }

  public var description: String { message }
}
