import Pace
import PaceMarbles

/// How the calls an invocation covers combine into its value, as the tool spells it.
public enum MergeChoice: String, CaseIterable, Sendable {
  /// The last call's value (Pace's default).
  case latest
  /// The first call's value.
  case first
  /// The values added up; every value must be a number.
  case sum
  /// The values concatenated in call order.
  case append
}

/// One way to pace a trace: a primitive and its options.
public struct Strategy: Sendable, Hashable {
  /// The primitive.
  public enum Kind: String, CaseIterable, Sendable {
    case debounce, throttle, coalesce
  }

  /// The primitive.
  public var kind: Kind
  /// The debounce or throttle interval, or the coalescing window (`.zero`: the next turn).
  public var interval: Duration
  /// Which edges invoke (not used by coalesce).
  public var edges: Edges
  /// The debounce's maxWait.
  public var maxWait: Duration?
  /// How covered calls combine.
  public var merge: MergeChoice

  /// A strategy; `edges` defaults to the primitive's own default.
  public init(
    _ kind: Kind, interval: Duration, edges: Edges? = nil, maxWait: Duration? = nil, merge: MergeChoice = .latest
  ) {
    self.kind = kind
    self.interval = interval
    self.edges = edges ?? (kind == .throttle ? .both : .trailing)
    self.maxWait = maxWait
    self.merge = merge
  }

  /// A short name for tables and diagrams: `debounce`, `debounce leading`, `debounce both`,
  /// `debounce maxWait`, `throttle`, `throttle trailing`, `coalesce`, `coalesce next turn`.
  public var label: String {
    switch kind {
    case .debounce:
      var label = "debounce"
      if edges == .leading { label += " leading" }
      if edges == .both { label += " both" }
      if maxWait != nil { label += " maxWait" }
      return label
    case .throttle:
      if edges == .leading { return "throttle leading" }
      if edges == .trailing { return "throttle trailing" }
      return "throttle"
    case .coalesce:
      return interval == .zero ? "coalesce next turn" : "coalesce"
    }
  }

  /// The full settings: `debounce 300ms, edges trailing, maxWait 900ms, merge latest`.
  public var settings: String {
    var parts: [String] = []
    switch kind {
    case .debounce, .throttle:
      parts.append("\(kind.rawValue) \(DurationText.format(interval))")
      parts.append("edges \(edges)")
      if let maxWait { parts.append("maxWait \(DurationText.format(maxWait))") }
    case .coalesce:
      parts.append(interval == .zero ? "coalesce on the next turn" : "coalesce \(DurationText.format(interval)) window")
    }
    parts.append("merge \(merge.rawValue)")
    return parts.joined(separator: ", ")
  }

  /// Every strategy `pace compare` and `pace demo` run, for `interval`: debounce on each edge,
  /// debounce with maxWait (three intervals), throttle on each edge, and coalesce with a window
  /// of `interval` and on the next turn.
  public static func all(interval: Duration, maxWait: Duration? = nil) -> [Strategy] {
    [
      Strategy(.debounce, interval: interval),
      Strategy(.debounce, interval: interval, edges: .leading),
      Strategy(.debounce, interval: interval, edges: .both),
      Strategy(.debounce, interval: interval, maxWait: maxWait ?? interval * 3),
      Strategy(.throttle, interval: interval),
      Strategy(.throttle, interval: interval, edges: .leading),
      Strategy(.throttle, interval: interval, edges: .trailing),
      Strategy(.coalesce, interval: interval),
      Strategy(.coalesce, interval: .zero),
    ]
  }
}
