import PaceTestSupport

@testable import Pace

/// A main-actor list that `@MainActor @Sendable` handlers can append to.
@MainActor final class Log<Item> {
  var items: [Item] = []
  func append(_ item: Item) { items.append(item) }
  var count: Int { items.count }
}
