/// A first-in first-out queue that keeps its storage between uses, so that a queue which
/// fills and empties in turn stops allocating.
@usableFromInline
struct FIFO<Element> {
  @usableFromInline var slots: [Element?] = []
  @usableFromInline var head = 0

  @inlinable
  init() {}

  @inlinable
  var isEmpty: Bool { head == slots.count }

  @inlinable
  var count: Int { slots.count - head }

  @inlinable
  mutating func append(_ element: Element) {
    slots.append(element)
  }

  @inlinable
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
  @inlinable
  var first: Element? {
    head < slots.count ? slots[head] : nil
  }

  @inlinable
  mutating func removeAll() {
    slots.removeAll(keepingCapacity: true)
    head = 0
  }

  /// Removes every element, returning them oldest first.
  @inlinable
  mutating func drain() -> [Element] {
    defer { removeAll() }
    return slots[head...].map { $0! }
  }
}
