/// What Pace's two open-addressing tables share (``KeyTable``, a keyed shard's keys, and
/// ``IntegerKeyTable``, a batcher's ids): how a key's hash is spread over the slots with a table's
/// seed, the seed itself, and when a removal moves a slot back into the hole it leaves.
@usableFromInline
enum LinearProbing {
  /// `hash` mixed with `seed` and multiplied by 2⁶⁴/φ (Fibonacci hashing): a table takes a
  /// key's home from the product's top bits, which even consecutive hashes spread evenly.
  @inlinable @inline(__always)
  static func mix(_ hash: UInt64, seed: UInt64) -> UInt64 {
    (hash ^ seed) &* 0x9E37_79B9_7F4A_7C15
  }

  /// A table's seed from an address of its own: different for each table, and not known from
  /// outside, so that where a key lands cannot be predicted to make keys collide.
  @inlinable @inline(__always)
  static func seed(fromAddress address: UInt) -> UInt64 {
    UInt64(address) &* 0xBF58_476D_1CE4_E5B9
  }

  /// Whether the occupied slot `next`, whose home is `home`, may move back into the empty slot
  /// `hole` before it (indices modulo `mask + 1`): unless its home lies after the hole.
  @inlinable @inline(__always)
  static func movesBack(from next: Int, home: Int, into hole: Int, mask: Int) -> Bool {
    (next &- home) & mask >= (next &- hole) & mask
  }
}
