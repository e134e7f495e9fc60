/// Which edges of a burst of calls invoke: its start, its end, or both.
///
/// ```swift
/// Debouncer<Void>(for: .milliseconds(500), edges: .leading) { push() }  // first tap only
/// Throttler<CGPoint>(for: .milliseconds(16), edges: [.leading, .trailing]) { render($0) }
/// ```
public struct Edges: OptionSet, Sendable, Hashable, CustomStringConvertible {
  public let rawValue: UInt8

  public init(rawValue: UInt8) {
    self.rawValue = rawValue
  }

  /// Invoke at once with the first call after a quiet period.
  public static let leading = Edges(rawValue: 1 << 0)
  /// Invoke at the end of the burst (debounce) or window (throttle) with the merged calls.
  public static let trailing = Edges(rawValue: 1 << 1)
  /// Both edges.
  public static let both: Edges = [.leading, .trailing]

  public var description: String {
    switch self {
    case .leading: "leading"
    case .trailing: "trailing"
    case .both: "leading+trailing"
    default: "none"
    }
  }
}
