/// What a ``PacingControl`` drives: the pacer of one modifier.
@MainActor
protocol PacingTarget: AnyObject {
  func flush()
  func cancel()
  var isPending: Bool { get }
}

/// Flush and cancel, from anywhere in a view, for the pacing modifier it is passed to.
///
/// ```swift
/// @State private var search = PacingControl()
///
/// TextField("Search", text: $draft)
///   .debounced(draft, into: $query, for: .milliseconds(300), control: search)
/// Button("Search now") { search.flush() }
/// ```
///
/// A control drives the modifier it was passed to most recently; before that, and after that
/// view goes away, its methods do nothing.
@MainActor
public final class PacingControl {
  weak var target: (any PacingTarget)?

  public init() {}

  /// Runs the pending invocation now, if there is one.
  public func flush() { target?.flush() }

  /// Drops the pending invocation and its timer.
  public func cancel() { target?.cancel() }

  /// Whether an invocation is waiting.
  public var isPending: Bool { target?.isPending ?? false }
}
