import Dispatch
import PaceTestSupport
import Testing

@testable import Pace

/// A disposable with no rule of its own: counts every call, so tests see double disposal.
struct CountingDisposable: Disposable {
  let counter: Counter
  func dispose() { counter.increment() }
}

@Suite struct AnyDisposableTests {
  @Test func disposeRunsTheTeardownOnceHoweverOftenItIsCalled() {
    let teardowns = Counter()
    let disposable = AnyDisposable { teardowns.increment() }
    #expect(!disposable.isDisposed)
    disposable.dispose()
    disposable.dispose()
    #expect(teardowns.count == 1)
    #expect(disposable.isDisposed)
  }

  @Test func theRule_aReleasedDisposableDisposesItself() {
    let teardowns = Counter()
    do {
      let disposable = AnyDisposable { teardowns.increment() }
      _ = disposable
      #expect(teardowns.count == 0)
    }
    #expect(teardowns.count == 1)
  }

  @Test func releasingADisposedDisposableDoesNotDisposeAgain() {
    let teardowns = Counter()
    do {
      let disposable = AnyDisposable { teardowns.increment() }
      disposable.dispose()
    }
    #expect(teardowns.count == 1)
  }

  @Test func wrappingGivesPacesRuleToADisposableWithoutOne() {
    let counter = Counter()
    do {
      let wrapped = AnyDisposable(CountingDisposable(counter: counter))
      wrapped.dispose()
      wrapped.dispose()
    }
    #expect(counter.count == 1)

    let released = Counter()
    do { _ = AnyDisposable(CountingDisposable(counter: released)) }
    #expect(released.count == 1)
  }

  @Test func theTeardownMayDisposeOtherThings() {
    // The teardown runs outside the lock, so it may even dispose its own disposable again.
    let teardowns = Counter()
    let holder = LockedState<AnyDisposable?>(nil)
    let disposable = AnyDisposable {
      teardowns.increment()
      holder.withLock { $0 }?.dispose()
    }
    holder.withLock { $0 = disposable }
    disposable.dispose()
    #expect(teardowns.count == 1)
    holder.withLock { $0 = nil }
  }

  @Test func disposablesCompareByIdentityAndLiveInASet() {
    let teardowns = Counter()
    var set = Set<AnyDisposable>()
    let first = AnyDisposable { teardowns.increment() }
    let second = AnyDisposable { teardowns.increment() }
    first.store(in: &set)
    first.store(in: &set)
    second.store(in: &set)
    #expect(set.count == 2)
    #expect(first == first)
    #expect(first != second)
    set.removeAll()
    #expect(teardowns.count == 0, "the test still holds both")
  }
}

@Suite struct DisposableGroupTests {
  @Test func disposesEveryMemberOnceInTheOrderAdded() {
    let order = Recorder<Int>()
    let group = DisposableGroup(AnyDisposable { order.record(1) }, AnyDisposable { order.record(2) })
    group.add(AnyDisposable { order.record(3) })
    #expect(group.count == 3)
    group.dispose()
    group.dispose()
    #expect(order.values == [1, 2, 3])
    #expect(group.isDisposed)
    #expect(group.count == 0)
  }

  @Test func membersWithoutARuleOfTheirOwnAreStillDisposedOnce() {
    let counter = Counter()
    let group = DisposableGroup([CountingDisposable(counter: counter), CountingDisposable(counter: counter)])
    group.dispose()
    group.dispose()
    #expect(counter.count == 2)
  }

  @Test func aMemberAddedAfterTheGroupWasDisposedIsDisposedAtOnce() {
    let counter = Counter()
    let group = DisposableGroup()
    group.dispose()
    group.add(CountingDisposable(counter: counter))
    #expect(counter.count == 1)
    group.dispose()
    #expect(counter.count == 1)
  }

  @Test func theRule_aReleasedGroupDisposesItsMembers() {
    let counter = Counter()
    do {
      let group = DisposableGroup(CountingDisposable(counter: counter))
      group.add(CountingDisposable(counter: counter))
    }
    #expect(counter.count == 2)
  }

  @Test func anyDisposableCanBeStoredInAGroup() {
    let teardowns = Counter()
    let group = DisposableGroup()
    AnyDisposable { teardowns.increment() }.store(in: group)
    #expect(teardowns.count == 0)
    group.dispose()
    #expect(teardowns.count == 1)
  }
}
