extension Dictionary {
  /// Gives back the storage of a table that has shrunk to a quarter of its capacity, so that
  /// evicted keys take no memory; amortised O(1) per removal.
  @inlinable
  mutating func shrinkIfSparse() {
    if isEmpty {
      if capacity > 0 { self = [:] }
    } else if capacity > 64, count < capacity / 4 {
      var smaller = Dictionary(minimumCapacity: count * 2)
      for (key, value) in self { smaller[key] = value }
      self = smaller
    }
  }
}
