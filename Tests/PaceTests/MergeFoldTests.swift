import Pace
import PaceTestSupport
import Testing

/// `Merge.fold`, the package's fold for calls read back from a store: the same result as an
/// invocation covering the same calls.
@Suite struct MergeFoldTests {
  @Test func foldsInCallOrder() {
    #expect(Merge<Int>.latest.fold([1, 2, 3]) == 3)
    #expect(Merge<Int>.first.fold([1, 2, 3]) == 1)
    #expect(Merge<Int>.sum.fold([1, 2, 3]) == 6)
    #expect(Merge<[Int]>.append.fold([[1], [2, 3], []]) == [1, 2, 3])
    #expect(Merge<Set<Int>>.union.fold([[1], [1, 2]]) == [1, 2])
    #expect(Merge<String>.custom { $0 + "," + $1 }.fold(["a", "b", "c"]) == "a,b,c")
  }

  @Test func nothingToFoldIsNil() {
    #expect(Merge<Int>.sum.fold([]) == nil)
    #expect(Merge<Int>.latest.fold([7]) == 7)
  }

  @Test func foldsAsACoalescerInvocationDoes() {
    let scheduler = TestScheduler()
    let merge = Merge<[Int]>.custom { accumulated, next in accumulated + next.reversed() }
    let delivered = Recorder<[Int]>()
    let coalescer = Coalescer<[Int]>(merge: merge, scheduler: scheduler) { delivered.record($0) }
    let calls = [[1, 2], [3, 4], [5]]
    for call in calls { coalescer.signal(call) }
    scheduler.run()
    #expect(delivered.values == [merge.fold(calls)!])
  }
}
