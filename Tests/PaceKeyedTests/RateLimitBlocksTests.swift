import PaceTestSupport
import Testing

@testable import Pace

/// `RateLimitBlocks`: keys refused until an instant of wall-clock time, read on a wall clock the
/// test moves itself; a block ends exactly at its instant, and ended blocks do not pile up.
@Suite(.timeLimit(.minutes(1))) struct RateLimitBlocksTests {
  /// A wall clock that moves only when the test says.
  final class WallClock: Sendable {
    let time = LockedState(UnixTime(nanosecondsSinceEpoch: 1_700_000_000_000_000_000))
    var now: UnixTime { time.withLock { $0 } }
    func advance(by duration: Duration) { time.withLock { $0 = $0 + duration } }
  }

  let wall = WallClock()
  var start: UnixTime { UnixTime(nanosecondsSinceEpoch: 1_700_000_000_000_000_000) }

  func makeBlocks() -> RateLimitBlocks<String> {
    let wall = wall
    return RateLimitBlocks(unixTime: { wall.now })
  }

  @Test func aBlockEndsExactlyAtItsInstant() {
    let blocks = makeBlocks()
    let end = start + .seconds(3600)
    blocks.block("k", until: end)
    #expect(blocks.blockedUntil(for: "k") == end)
    #expect(blocks.blockedUntil(for: "other") == nil)
    #expect(blocks.blockedUntil(for: "k", now: end + .nanoseconds(-1)) == end)
    wall.advance(by: .seconds(3600) - .nanoseconds(1))
    #expect(blocks.blockedUntil(for: "k") == end)
    wall.advance(by: .nanoseconds(1))
    #expect(blocks.blockedUntil(for: "k") == nil)
    // Ended and read: forgotten.
    #expect(blocks.heldCount == 0)
  }

  @Test func aBlockForADurationStartsNowOnTheWallClock() {
    let blocks = makeBlocks()
    wall.advance(by: .seconds(5))
    blocks.block("k", for: .seconds(60))
    #expect(blocks.blockedUntil(for: "k") == start + .seconds(65))
    #expect(blocks.blocks() == ["k": start + .seconds(65)])
    #expect(blocks.blocks(now: start + .seconds(65)) == [:])
  }

  @Test func unblockingLiftsTheBlockAndAnotherBlockReplacesIt() {
    let blocks = makeBlocks()
    blocks.block("k", for: .seconds(60))
    blocks.block("k", for: .seconds(30))
    #expect(blocks.blockedUntil(for: "k") == start + .seconds(30))
    #expect(blocks.version == 2)
    #expect(blocks.unblock("k") == start + .seconds(30))
    #expect(blocks.blockedUntil(for: "k") == nil)
    #expect(blocks.unblock("k") == nil)
    #expect(blocks.version == 3)
    // A block already ended blocks nothing.
    blocks.block("k", until: start)
    #expect(blocks.blockedUntil(for: "k") == nil)
  }

  /// Ten thousand blocks of a second each, one set every 10 ms: the table never holds more than
  /// twice those in force (at most 100) plus a few, though most are never read again.
  @Test func endedBlocksAreSweptAwayOnWrite() {
    let blocks = makeBlocks()
    var most = 0
    for index in 0..<10_000 {
      blocks.block("k\(index)", for: .seconds(1))
      most = max(most, blocks.heldCount)
      wall.advance(by: .milliseconds(10))
    }
    #expect(most <= 2 * 100 + RateLimitBlocks<String>.sweepThreshold)
    // The last block to end was set at 99.99 s, the first in force at 99.01 s.
    #expect(blocks.blocks().count == 99)
  }

  @Test func replacingTheBlocksLeavesOutThoseEnded() {
    let blocks = makeBlocks()
    blocks.block("old", for: .seconds(60))
    blocks.replaceBlocks(with: ["a": start + .seconds(10), "ended": start, "b": start - .seconds(1)])
    #expect(blocks.blocks() == ["a": start + .seconds(10)])
    #expect(blocks.heldCount == 1)
    #expect(blocks.blockedUntil(for: "old") == nil)
  }

  @Test func unixTimeArithmeticSaturatesAndDescribesItself() {
    let time = UnixTime(nanosecondsSinceEpoch: 1_700_000_000_000_000_250)
    #expect(time.description == "1700000000.000000250 s since the Unix epoch")
    #expect(UnixTime(sinceEpoch: .seconds(2)).description == "2 s since the Unix epoch")
    #expect(UnixTime(nanosecondsSinceEpoch: -500_000_000).description == "-0.500000000 s since the Unix epoch")
    #expect(time + .seconds(Int64.max) == UnixTime(nanosecondsSinceEpoch: .max))
    #expect(time + .seconds(Int64.min) == UnixTime(nanosecondsSinceEpoch: .min))
    #expect(time - .seconds(Int64.max) * 10 == UnixTime(nanosecondsSinceEpoch: .min))
    #expect(time - .seconds(Int64.min) == UnixTime(nanosecondsSinceEpoch: .max))
    // Beyond Int64 nanoseconds, but not its sum with a positive instant.
    let beyond = Duration.nanoseconds(Int64.min) - .seconds(1)
    #expect(UnixTime(nanosecondsSinceEpoch: .max) + beyond == UnixTime(nanosecondsSinceEpoch: -1_000_000_001))
    #expect(UnixTime(sinceEpoch: .seconds(Int64.max)).nanosecondsSinceEpoch == .max)
    #expect((time + .seconds(3)) - time == .seconds(3))
    #expect(UnixTime(nanosecondsSinceEpoch: .min) - UnixTime(nanosecondsSinceEpoch: .max) < .zero)
    #expect(time.sinceEpoch == .nanoseconds(1_700_000_000_000_000_250))
    // The system's wall clock: after this code was written, before the year 2262.
    #expect(UnixTime.now > time)
  }
}
