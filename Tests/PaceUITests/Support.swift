@testable import Pace

/// A milliseconds instant.
func ms(_ value: Int64) -> PaceInstant {
  PaceInstant(nanoseconds: value * 1_000_000)
}

/// A thread-safe counter.
final class Counter: Sendable {
  private let value = LockedState(0)
  func increment() { value.withLock { $0 += 1 } }
  var count: Int { value.withLock { $0 } }
}

/// A main-actor list that `@MainActor @Sendable` handlers can append to.
@MainActor final class Log<Item> {
  var items: [Item] = []
  func append(_ item: Item) { items.append(item) }
  var count: Int { items.count }
}
