import Testing

@testable import Pace

/// A key's shard on 64-bit platforms and as watchOS's arm64_32 (32-bit `Int`) computes it.
@Suite struct ShardIndexTests {
  /// Every shard of the 64 gets about its share of keys: within a third of the mean.
  private func expectSpread(_ shards: [Int], keys: Int) {
    var counts = [Int](repeating: 0, count: keyedShardCount)
    for shard in shards {
      #expect((0..<keyedShardCount).contains(shard))
      counts[shard] += 1
    }
    let mean = keys / keyedShardCount
    #expect(counts.min()! > mean * 2 / 3, "fullest \(counts.max()!), emptiest \(counts.min()!), mean \(mean)")
    #expect(counts.max()! < mean * 4 / 3, "fullest \(counts.max()!), emptiest \(counts.min()!), mean \(mean)")
  }

  @Test func thirtyTwoBitHashesSpreadOverEveryShard() {
    // What arm64_32 hashes: 32-bit values, here Swift's own hashes of Ints truncated to 32 bits.
    let keys = 64_000
    let shards = (0..<keys).map { key in
      keyedShardIndex(hash: Int(Int32(truncatingIfNeeded: key.hashValue)), bitWidth: 32)
    }
    expectSpread(shards, keys: keys)
  }

  @Test func thirtyTwoBitSequentialHashesSpreadToo() {
    // A weak user hash: the key itself. Its top bits never change; the multiplier spreads it.
    let keys = 64_000
    expectSpread((0..<keys).map { keyedShardIndex(hash: $0, bitWidth: 32) }, keys: keys)
  }

  @Test func sixtyFourBitHashesUseTheirTopBits() {
    #expect(keyedShardIndex(hash: 0, bitWidth: 64) == 0)
    #expect(keyedShardIndex(hash: -1, bitWidth: 64) == 63)
    #expect(keyedShardIndex(hash: Int(bitPattern: 0x0400_0000_0000_0000), bitWidth: 64) == 1)
    let keys = 64_000
    expectSpread((0..<keys).map { keyedShardIndex(hash: $0.hashValue, bitWidth: 64) }, keys: keys)
  }

  @Test func theOldShiftPutEveryThirtyTwoBitHashOnOneShard() {
    // Why 32-bit hashes are spread first: their zero-extended top bits are always 0.
    for key in 0..<1_000 {
      let hash = UInt32(truncatingIfNeeded: key.hashValue)
      #expect(UInt64(hash) >> keyedShardShift == 0)
    }
  }
}
