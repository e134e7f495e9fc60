import PaceTestSupport
import Testing

@testable import Pace

@MainActor final class FakeTable {
  var reloads = 0
  func reloadData() { reloads += 1 }
}

/// `setNeedsReloadData()` without UIKit.
@Suite @MainActor struct UpdateCoalescerTests {
  @Test func requestsOfOneTurnUpdateEachObjectOnceOnTheNextTurn() {
    let scheduler = TestScheduler()
    var order: [ObjectIdentifier] = []
    let reloads = UpdateCoalescer<FakeTable>(scheduler: scheduler) { table in
      order.append(ObjectIdentifier(table))
      table.reloadData()
    }
    let first = FakeTable()
    let second = FakeTable()
    reloads.setNeedsUpdate(second)
    for _ in 0..<5 { reloads.setNeedsUpdate(first) }
    reloads.setNeedsUpdate(second)
    #expect(first.reloads == 0)
    #expect(reloads.isPending(for: first))
    #expect(reloads.pendingCount == 2)
    #expect(scheduler.pendingCount == 1, "one run for all objects")

    scheduler.advance()
    #expect(first.reloads == 1)
    #expect(second.reloads == 1)
    #expect(order == [ObjectIdentifier(second), ObjectIdentifier(first)], "in the order of the first requests")
    #expect(!reloads.isPending(for: first))
    #expect(reloads.pendingCount == 0)
  }

  @Test func windowDelaysTheUpdates() {
    let scheduler = TestScheduler()
    let reloads = UpdateCoalescer<FakeTable>(window: .milliseconds(50), scheduler: scheduler) { $0.reloadData() }
    let table = FakeTable()
    reloads.setNeedsUpdate(table)
    scheduler.advance(to: ms(49))
    #expect(table.reloads == 0)
    scheduler.advance(to: ms(50))
    #expect(table.reloads == 1)
  }

  @Test func updateIfNeededRunsNowAndOnlyOnce() {
    let scheduler = TestScheduler()
    let reloads = UpdateCoalescer<FakeTable>(scheduler: scheduler) { $0.reloadData() }
    let table = FakeTable()
    reloads.updateIfNeeded(table)
    #expect(table.reloads == 0, "nothing pending: nothing to do")
    reloads.setNeedsUpdate(table)
    reloads.updateIfNeeded(table)
    #expect(table.reloads == 1)
    scheduler.advance()
    #expect(table.reloads == 1)
  }

  @Test func flushRunsEveryPendingUpdateNow() {
    let scheduler = TestScheduler()
    let reloads = UpdateCoalescer<FakeTable>(scheduler: scheduler) { $0.reloadData() }
    let tables = [FakeTable(), FakeTable()]
    tables.forEach(reloads.setNeedsUpdate)
    reloads.flush()
    #expect(tables.map(\.reloads) == [1, 1])
    #expect(scheduler.pendingCount == 0)
    scheduler.advance()
    #expect(tables.map(\.reloads) == [1, 1])
  }

  @Test func anUpdateThatAsksAgainGetsExactlyOneMoreOnTheNextTurn() {
    let scheduler = TestScheduler()
    var coalescer: UpdateCoalescer<FakeTable>?
    coalescer = UpdateCoalescer<FakeTable>(window: .milliseconds(10), scheduler: scheduler) { table in
      table.reloadData()
      if table.reloads == 1 {
        coalescer?.setNeedsUpdate(table)
        coalescer?.setNeedsUpdate(table)
      }
    }
    let table = FakeTable()
    coalescer?.setNeedsUpdate(table)
    scheduler.advance(to: ms(10))
    #expect(table.reloads == 1)
    scheduler.advance(to: ms(20))
    #expect(table.reloads == 2)
    scheduler.advance(to: ms(100))
    #expect(table.reloads == 2)
    coalescer = nil
  }

  @Test func aReleasedObjectIsSkipped() {
    let scheduler = TestScheduler()
    var updated = 0
    let reloads = UpdateCoalescer<FakeTable>(scheduler: scheduler) { _ in updated += 1 }
    weak var weakTable: FakeTable?
    do {
      let table = FakeTable()
      weakTable = table
      reloads.setNeedsUpdate(table)
    }
    #expect(weakTable == nil)
    #expect(reloads.pendingCount == 0)
    scheduler.advance()
    #expect(updated == 0)
  }

  @Test func aNewObjectAtAReleasedObjectsAddressIsUpdated() {
    let scheduler = TestScheduler()
    let reloads = UpdateCoalescer<FakeTable>(scheduler: scheduler) { $0.reloadData() }
    for _ in 0..<50 {
      do { reloads.setNeedsUpdate(FakeTable()) }
    }
    let fresh = (0..<50).map { _ in FakeTable() }
    fresh.forEach(reloads.setNeedsUpdate)
    #expect(fresh.allSatisfy(reloads.isPending(for:)))
    scheduler.advance()
    #expect(fresh.allSatisfy { $0.reloads == 1 })
  }
}
