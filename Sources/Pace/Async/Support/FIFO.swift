/// A first-in first-out queue that keeps its storage between uses, so that a queue which
/// fills and empties in turn stops allocating.
struct FIFO<Element> {
  private var slots: [Element?] = []
  private var head = 0

  var isEmpty: Bool { head == slots.count }
  var count: Int { slots.count - head }

  mutating func append(_ element: Element) {
    slots.append(element)
  }

  mutating func popFirst() -> Element? {
    guard head < slots.count else { return nil }
    let element = slots[head].take()
    head += 1
    if head == slots.count {
      slots.removeAll(keepingCapacity: true)
      head = 0
    }
    return element
  }

  /// The first element, without removing it.
  var first: Element? {
    head < slots.count ? slots[head] : nil
  }

  mutating func removeAll() {
    slots.removeAll(keepingCapacity: true)
    head = 0
  }

  /// Removes every element, returning them oldest first.
  mutating func drain() -> [Element] {
    defer { removeAll() }
    return slots[head...].map { $0! }
  }
}
