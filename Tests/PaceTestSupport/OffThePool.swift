import Foundation

/// Runs `body` on a thread of its own and returns its result.
///
/// The cooperative pool has one thread per core (two on CI): a long synchronous loop there (a fuzz
/// run) holds one of them for its whole length, and the real-clock tests running beside it wait
/// for a thread to fire their timers. On a thread of its own it holds none.
///
/// Swift Testing attributes `#expect` to a test through the task, which a plain thread does not
/// have: `body` collects what it finds in ``Failures`` and the caller expects them empty.
public func offTheCooperativePool<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
  await withCheckedContinuation { continuation in
    let thread = Thread { continuation.resume(returning: body()) }
    thread.stackSize = 16 << 20  // the tool's parsers recurse on hostile input
    thread.start()
  }
}

/// The failed checks of work done off the cooperative pool, each with its line and context.
public struct Failures: Sendable, CustomStringConvertible {
  public private(set) var messages: [String] = []

  public init() {}

  /// Records `context` when `condition` is false.
  public mutating func check(_ condition: Bool, _ context: @autoclosure () -> String, line: Int = #line) {
    if !condition { messages.append("line \(line): \(context())") }
  }

  /// Records an error that stopped a piece of the work.
  public mutating func record(_ error: any Error, _ context: String, line: Int = #line) {
    messages.append("line \(line): \(context): \(error)")
  }

  public var isEmpty: Bool { messages.isEmpty }

  /// The first 20 failures, one per line, and how many more there were.
  public var description: String {
    let more = messages.count > 20 ? "\n… and \(messages.count - 20) more" : ""
    return messages.prefix(20).joined(separator: "\n") + more
  }
}
