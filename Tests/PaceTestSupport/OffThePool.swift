import Foundation
import Testing

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

/// Runs each test case of a suite (or one test) on threads outside the cooperative pool:
/// `@Suite(.offThePool)`.
///
/// For suites of long synchronous tests (reference models, property tests on random timelines):
/// their cases otherwise hold the pool's threads one after another, and the real-clock tests of
/// other suites wait behind them for a thread to fire their timers. A task executor preference
/// moves the test body, and the tasks it starts, to one of two serial queues whose threads Dispatch
/// adds beside the pool's; `#expect` works as usual.
///
/// Task executors need macOS 15 / iOS 18: before, the trait runs the cases where Swift Testing
/// runs them (``movesTests`` is `false`), slower on a busy machine but the same tests.
public struct OffThePoolTrait: SuiteTrait, TestTrait, TestScoping {
  public var isRecursive: Bool { true }

  public func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    // The suite's own scope covers no code of a case: each case gets its own thread below.
    guard testCase != nil else { return try await function() }
    if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
      try await withTaskExecutorPreference(OffThePoolExecutor()) { try await function() }
    } else {
      try await function()
    }
  }
}

extension Trait where Self == OffThePoolTrait {
  /// Runs the test cases on threads outside the cooperative pool.
  public static var offThePool: Self { Self() }
}

extension OffThePoolTrait {
  /// Whether the caller runs on a queue of ``OffThePoolTrait``.
  public static var isCurrent: Bool { DispatchQueue.getSpecific(key: offThePoolKey) != nil }

  /// Whether the trait moves test cases off the pool on this system (task executors exist).
  public static var movesTests: Bool {
    if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) { return true }
    return false
  }
}

/// A task executor on one of two serial Dispatch queues, taken in turn: Dispatch gives each a
/// thread outside the pool, and two are enough to keep both cores busy without starting a thread
/// per test case.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class OffThePoolExecutor: TaskExecutor {
  private static let queues = (0..<2).map { index in
    let queue = DispatchQueue(label: "PaceTestSupport.offThePool.\(index)")
    queue.setSpecific(key: offThePoolKey, value: ())
    return queue
  }
  private static let turns = LockedTurns()

  private let queue = OffThePoolExecutor.queues[OffThePoolExecutor.turns.next() % OffThePoolExecutor.queues.count]

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    let executor = asUnownedTaskExecutor()
    queue.async { job.runSynchronously(on: executor) }
  }
}

/// Marks the queues of ``OffThePoolExecutor``.
private let offThePoolKey = DispatchSpecificKey<Void>()

/// A counter behind a lock, for taking the queues in turn.
private final class LockedTurns: @unchecked Sendable {
  // @unchecked Sendable: `count` is only read and written while `lock` is held.
  private let lock = NSLock()
  private var count = 0

  func next() -> Int {
    lock.lock()
    defer { lock.unlock() }
    count &+= 1
    return count
  }
}
