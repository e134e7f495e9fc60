import Foundation
import PaceTestSupport
import PaceUI
import Testing

@testable import Pace

let valueChanged = Notification.Name("PaceUITests.valueChanged")

/// Lives exactly as long as one connection's observer: the observer's block holds it.
final class Sentinel: Sendable {}

/// The laws' harness for `fromNotifications`: posting is synchronous on the posting thread.
///
/// NotificationCenter's observer methods cannot be overridden on Linux, so the harness sees the
/// observers through what they retain: each connection's dispatch holds a sentinel, which the
/// center releases when the observer is removed. A connection's teardown is its sentinel's
/// release.
struct NotificationLawHarness: LawHarness {
  private struct WeakSentinel {
    weak var sentinel: Sentinel?
  }

  let center = NotificationCenter()
  private let sentinels = LockedState<[WeakSentinel]>([])

  var sourcesPerConnection: Int { 1 }
  var sourceConnections: Int { sentinels.withLock { $0.count } }
  var teardowns: Int { sentinels.withLock { $0.count { $0.sentinel == nil } } }

  func connect(_ record: @escaping @Sendable (Int) -> Void) -> AnyDisposable {
    let sentinel = Sentinel()
    sentinels.withLock { $0.append(WeakSentinel(sentinel: sentinel)) }
    return Fuser.fromNotifications(named: valueChanged, center: center)
      .compactMap { $0.userInfo?["value"] as? Int }
      .connect { value in
        withExtendedLifetime(sentinel) { record(value) }
      }
  }

  func ready() async {}

  func emit(_ value: Int) async {
    center.post(name: valueChanged, object: nil, userInfo: ["value": value])
  }

  func settle() {}
}

let notificationLawSubjects = [
  FuserLawSubject(name: "fromNotifications(named:object:center:)") { NotificationLawHarness() }
]

@Suite struct NotificationFuserTests {
  @Test(arguments: notificationLawSubjects)
  func eventsArriveInOrder(_ subject: FuserLawSubject) async {
    await FuserLaws.eventsArriveInOrder(subject)
  }

  @Test(arguments: notificationLawSubjects)
  func nothingBeforeConnect(_ subject: FuserLawSubject) async {
    await FuserLaws.nothingBeforeConnect(subject)
  }

  @Test(arguments: notificationLawSubjects)
  func nothingAfterDispose(_ subject: FuserLawSubject) async {
    await FuserLaws.nothingAfterDispose(subject)
  }

  @Test(arguments: notificationLawSubjects)
  func disposeReachesEverySourceExactlyOnce(_ subject: FuserLawSubject) async {
    await FuserLaws.disposeReachesEverySourceExactlyOnce(subject)
  }

  @Test(arguments: notificationLawSubjects)
  func connectionsAreIndependent(_ subject: FuserLawSubject) async {
    await FuserLaws.connectionsAreIndependent(subject)
  }

  @Test func onlyNotificationsFromTheGivenObjectArrive() {
    final class Sender: Sendable {}
    let center = NotificationCenter()
    let mine = Sender()
    let other = Sender()
    let received = Counter()
    let connection = Fuser.fromNotifications(named: valueChanged, object: mine, center: center).connect { _ in
      received.increment()
    }
    center.post(name: valueChanged, object: mine)
    center.post(name: valueChanged, object: other)
    center.post(name: Notification.Name("another"), object: mine)
    #expect(received.count == 1)
    connection.dispose()
  }

  @Test func notificationsCanBeCoalescedOnceExtracted() {
    // The DispatchSourceUserDataAdd article's example: five "item changed" notifications in one
    // turn, one reload.
    let center = NotificationCenter()
    let scheduler = TestScheduler()
    let reloads = LockedState<[Int]>([])
    let connection = Fuser.fromNotifications(named: valueChanged, center: center)
      .map { _ in 1 }
      .coalesced(merge: .sum, scheduler: scheduler)
      .connect { count in reloads.withLock { $0.append(count) } }
    for _ in 0..<5 { center.post(name: valueChanged, object: nil) }
    scheduler.advance()
    #expect(reloads.withLock { $0 } == [5])
    connection.dispose()
  }
}
