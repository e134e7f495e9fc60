import PaceTestSupport
import PaceUIOnStandIns
import Testing
import UIKitStandIn

@testable import Pace

/// A control with a value, like a slider; counts action registrations like a spy.
final class ValueControl: UIControl {
  var value = 0
  var actionsAdded = 0
  var actionsRemoved = 0

  override func addAction(_ action: UIAction, for controlEvents: UIControl.Event) {
    actionsAdded += 1
    super.addAction(action, for: controlEvents)
  }

  override func removeAction(_ action: UIAction, for controlEvents: UIControl.Event) {
    actionsRemoved += 1
    super.removeAction(action, for: controlEvents)
  }
}

/// A gesture recognizer with a value; counts target registrations.
final class ValueRecognizer: UITapGestureRecognizer {
  var value = 0
  var targetsAdded = 0
  var targetsRemoved = 0

  override func addTarget(_ target: Any, action: UIKitStandIn.Selector) {
    targetsAdded += 1
    super.addTarget(target, action: action)
  }

  override func removeTarget(_ target: Any?, action: UIKitStandIn.Selector?) {
    targetsRemoved += 1
    super.removeTarget(target, action: action)
  }
}

/// A view that counts the recognizers attached to and removed from it.
final class RecordingView: UIView {
  var attached = 0
  var detached = 0

  override func addGestureRecognizer(_ gestureRecognizer: UIGestureRecognizer) {
    attached += 1
    super.addGestureRecognizer(gestureRecognizer)
  }

  override func removeGestureRecognizer(_ gestureRecognizer: UIGestureRecognizer) {
    detached += 1
    super.removeGestureRecognizer(gestureRecognizer)
  }
}

final class RecordingTableView: UITableView {
  var reloads = 0
  var onReload: (@MainActor () -> Void)?
  override func reloadData() {
    reloads += 1
    onReload?()
  }
}

final class RecordingCollectionView: UICollectionView {
  var reloads = 0
  var onReload: (@MainActor () -> Void)?
  override func reloadData() {
    reloads += 1
    onReload?()
  }
}

// MARK: - Fuser laws on the UI sources

/// The laws' harness for a UIKit source: emits on the main actor, counts listener registrations
/// through the spies above.
struct UIKitLawHarness<Output>: LawHarness {
  let scheduler: TestScheduler
  let fuser: Fuser<Output>
  let flatten: @Sendable (Output) -> [Int]
  let emitOnMain: @MainActor @Sendable (Int) -> Void
  let connectionsOnMain: @MainActor @Sendable () -> Int
  let teardownsOnMain: @MainActor @Sendable () -> Int

  var sourcesPerConnection: Int { 1 }
  var sourceConnections: Int { MainActor.assumeIsolated { connectionsOnMain() } }
  var teardowns: Int { MainActor.assumeIsolated { teardownsOnMain() } }

  func connect(_ record: @escaping @Sendable (Int) -> Void) -> AnyDisposable {
    let flatten = self.flatten
    return MainActor.assumeIsolated { fuser.connect { output in flatten(output).forEach(record) } }
  }

  func ready() async {}

  func emit(_ value: Int) async {
    await MainActor.run { emitOnMain(value) }
    scheduler.advance(by: .milliseconds(40))
  }

  func settle() {
    scheduler.advance(by: .seconds(60))
  }
}

let uiKitLawSubjects: [FuserLawSubject] = [
  FuserLawSubject(name: "fromEvents(_:for:)") {
    MainActor.assumeIsolated {
      let control = ValueControl()
      return UIKitLawHarness(
        scheduler: TestScheduler(),
        fuser: Fuser.fromEvents(control, for: .valueChanged) { $0.value },
        flatten: { [$0] },
        emitOnMain: { value in
          control.value = value
          control.sendActions(for: .valueChanged)
        },
        connectionsOnMain: { control.actionsAdded },
        teardownsOnMain: { control.actionsRemoved }
      )
    }
  },
  FuserLawSubject(name: "fromEvents(_:for:) throttled") {
    MainActor.assumeIsolated {
      let control = ValueControl()
      let scheduler = TestScheduler()
      return UIKitLawHarness(
        scheduler: scheduler,
        fuser: Fuser.fromEvents(control, for: [.valueChanged, .touchUpInside]) { [$0.value] }
          .throttled(for: .milliseconds(100), merge: .append, scheduler: scheduler),
        flatten: { $0 },
        emitOnMain: { value in
          control.value = value
          control.sendActions(for: .touchUpInside)
        },
        connectionsOnMain: { control.actionsAdded },
        teardownsOnMain: { control.actionsRemoved }
      )
    }
  },
  FuserLawSubject(name: "fromGestures(_:)") {
    MainActor.assumeIsolated {
      let recognizer = ValueRecognizer()
      return UIKitLawHarness(
        scheduler: TestScheduler(),
        fuser: Fuser.fromGestures(recognizer) { $0.value },
        flatten: { [$0] },
        emitOnMain: { value in
          recognizer.value = value
          recognizer.standInRecognize()
        },
        connectionsOnMain: { recognizer.targetsAdded },
        teardownsOnMain: { recognizer.targetsRemoved }
      )
    }
  },
  FuserLawSubject(name: "fromGestures(on:_:)") {
    MainActor.assumeIsolated {
      let view = RecordingView()
      let value = LockedState(0)
      return UIKitLawHarness(
        scheduler: TestScheduler(),
        fuser: Fuser.fromGestures(on: view) { UITapGestureRecognizer() }.map { _ in value.withLock { $0 } },
        flatten: { [$0] },
        emitOnMain: { newValue in
          value.withLock { $0 = newValue }
          for recognizer in view.gestureRecognizers ?? [] { recognizer.standInRecognize() }
        },
        connectionsOnMain: { view.attached },
        teardownsOnMain: { view.detached }
      )
    }
  },
]

@Suite @MainActor struct UIKitFuserLawTests {
  @Test(arguments: uiKitLawSubjects)
  func eventsArriveInOrder(_ subject: FuserLawSubject) async {
    await FuserLaws.eventsArriveInOrder(subject)
  }

  @Test(arguments: uiKitLawSubjects)
  func nothingBeforeConnect(_ subject: FuserLawSubject) async {
    await FuserLaws.nothingBeforeConnect(subject)
  }

  @Test(arguments: uiKitLawSubjects)
  func nothingAfterDispose(_ subject: FuserLawSubject) async {
    await FuserLaws.nothingAfterDispose(subject)
  }

  @Test(arguments: uiKitLawSubjects)
  func disposeReachesEverySourceExactlyOnce(_ subject: FuserLawSubject) async {
    await FuserLaws.disposeReachesEverySourceExactlyOnce(subject)
  }

  @Test(arguments: uiKitLawSubjects)
  func connectionsAreIndependent(_ subject: FuserLawSubject) async {
    await FuserLaws.connectionsAreIndependent(subject)
  }
}

// MARK: - Behaviour of the glue

@Suite @MainActor struct UIKitGlueTests {
  @Test func disableTemporarilyDisablesTheControlAndItsSiblingsForTheDuration() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let button = UIButton()
    let other = UIButton()
    let barItem = UIBarButtonItem()
    button.disableTemporarily(for: .milliseconds(500), siblings: [other, barItem], gate: gate)
    #expect(!button.isEnabled)
    #expect(!other.isEnabled)
    #expect(!barItem.isEnabled)
    scheduler.advance(to: ms(499))
    #expect(!button.isEnabled)
    scheduler.advance(to: ms(500))
    #expect(button.isEnabled)
    #expect(other.isEnabled)
    #expect(barItem.isEnabled)
  }

  @Test(arguments: DeprecatedGateCall.allCases)
  func theOldGateSpellingsStillDisableTheControl(_ call: DeprecatedGateCall) {
    let scheduler = TestScheduler()
    let button = UIButton()
    let sibling = UIButton()
    // Called through a protocol, so that the deprecated spellings are tested without a warning.
    (button as any DeprecatedGateSpelling).disable(
      for: .milliseconds(500), siblings: [sibling], by: call, on: scheduler)
    #expect(!button.isEnabled)
    #expect(!sibling.isEnabled)
    scheduler.advance(to: ms(499))
    #expect(!button.isEnabled)
    scheduler.advance(to: ms(500))
    #expect(button.isEnabled)
    #expect(sibling.isEnabled)
  }

  @Test func disableTemporarilyFromTheActionIgnoresTheBashing() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let button = UIButton()
    let pushes = Log<PaceInstant>()
    button.addAction(
      UIAction { [weak button] _ in
        button?.disableTemporarily(for: .milliseconds(500), gate: gate)
        pushes.append(scheduler.now)
      },
      for: .touchUpInside
    )
    // UIKit sends no touches to a disabled control.
    func tap() { if button.isEnabled { button.sendActions(for: .touchUpInside) } }
    for time in [0, 100, 200, 300, 400, 500, 600] {
      scheduler.advance(to: ms(Int64(time)))
      tap()
    }
    #expect(pushes.items == [ms(0), ms(500)])
  }

  @Test func throttledActionRunsForTheFirstTapThenIgnoresTapsForTheInterval() {
    let scheduler = TestScheduler()
    let button = UIButton()
    let times = Log<PaceInstant>()
    let action = button.addAction(for: .touchUpInside, throttle: .milliseconds(300), scheduler: scheduler) { _ in
      times.append(scheduler.now)
    }
    for time in [0, 50, 100, 299, 300, 320, 700] {
      scheduler.advance(to: ms(Int64(time)))
      button.sendActions(for: .touchUpInside)
    }
    scheduler.advance(to: ms(2000))
    #expect(times.items == [ms(0), ms(300), ms(700)])

    button.removeAction(action, for: .touchUpInside)
    #expect(button.standInActionCount == 0)
    button.sendActions(for: .touchUpInside)
    scheduler.advance(to: ms(3000))
    #expect(times.count == 3)
  }

  @Test func throttledActionWithBothEdgesAlsoRunsOnceForTheIgnoredTaps() {
    let scheduler = TestScheduler()
    let button = UIButton()
    let runs = Log<Void>()
    button.addAction(for: .touchUpInside, throttle: .milliseconds(300), edges: .both, scheduler: scheduler) { _ in
      runs.append(())
    }
    for _ in 0..<5 { button.sendActions(for: .touchUpInside) }
    scheduler.advance(to: ms(300))
    #expect(runs.count == 2)
  }

  @Test func debouncedActionRunsOnceTypingPauses() {
    let scheduler = TestScheduler()
    let field = UITextField()
    let searched = Log<String?>()
    let senders = Log<Bool>()
    field.addAction(for: .editingChanged, debounce: .milliseconds(300), scheduler: scheduler) { [weak field] action in
      searched.append(field?.text)
      senders.append(action.sender as? UITextField === field)
    }
    for (time, text) in [(0, "s"), (100, "sw"), (250, "swi")] {
      scheduler.advance(to: ms(Int64(time)))
      field.text = text
      field.sendActions(for: .editingChanged)
    }
    scheduler.advance(to: ms(549))
    #expect(searched.items.isEmpty)
    scheduler.advance(to: ms(550))
    #expect(searched.items == ["swi"])
    #expect(senders.items == [true])
  }

  @Test func fromEventsDeliversTheControlAndStopsOnDispose() {
    let button = UIButton()
    let tapped = LockedState<[ObjectIdentifier]>([])
    let connection = Fuser.fromEvents(button, for: .touchUpInside).connect { control in
      tapped.withLock { $0.append(ObjectIdentifier(control)) }
    }
    button.sendActions(for: .touchUpInside)
    button.sendActions(for: .valueChanged)  // not listened to
    #expect(tapped.withLock { $0 } == [ObjectIdentifier(button)])
    connection.dispose()
    #expect(button.standInActionCount == 0)
    button.sendActions(for: .touchUpInside)
    #expect(tapped.withLock { $0 }.count == 1)
  }

  @Test func fromEventsReadsTheControlOnTheMainActor() {
    let scheduler = TestScheduler()
    let field = UITextField()
    let queries = LockedState<[String]>([])
    let connection = Fuser.fromEvents(field, for: .editingChanged) { $0.text ?? "" }
      .debounced(for: .milliseconds(300), scheduler: scheduler)
      .connect { query in queries.withLock { $0.append(query) } }
    for text in ["s", "sw", "swi"] {
      field.text = text
      field.sendActions(for: .editingChanged)
      scheduler.advance(by: .milliseconds(100))
    }
    scheduler.advance(by: .milliseconds(300))
    #expect(queries.withLock { $0 } == ["swi"])
    connection.dispose()
  }

  @Test func extractBuildsTheAppsEventsFromControls() {
    enum ScreenEvent: Equatable, Sendable { case retry, cancel }
    let retry = UIButton()
    let cancel = UIButton()
    let events: Fuser<ScreenEvent> = .fromAll(
      .extract({ _ in .retry }, .fromEvents(retry, for: .touchUpInside)),
      .extract({ _ in .cancel }, .fromEvents(cancel, for: .touchUpInside))
    )
    let received = LockedState<[ScreenEvent]>([])
    let connection = events.connect { event in received.withLock { $0.append(event) } }
    retry.sendActions(for: .touchUpInside)
    cancel.sendActions(for: .touchUpInside)
    retry.sendActions(for: .touchUpInside)
    #expect(received.withLock { $0 } == [.retry, .cancel, .retry])
    connection.dispose()
  }

  @Test func connectOnMainActorDeliversControlEventsAtOnce() {
    let button = UIButton()
    let taps = Log<Void>()
    let connection = Fuser.fromEvents(button, for: .touchUpInside).connectOnMainActor { _ in taps.append(()) }
    button.sendActions(for: .touchUpInside)
    #expect(taps.count == 1)
    connection.dispose()
  }

  @Test func aReleasedControlEndsItsSourceQuietly() {
    weak var weakButton: UIButton?
    let fuser: Fuser<UIButton>
    do {
      let button = UIButton()
      weakButton = button
      fuser = .fromEvents(button, for: .touchUpInside)
    }
    #expect(weakButton == nil, "a fuser does not keep its control alive")
    let connection = fuser.connect { _ in }
    connection.dispose()
  }

  @Test func fromGesturesOnAViewAttachesOneRecognizerPerConnection() {
    let view = UIView()
    let first = Counter()
    let second = Counter()
    let a = Fuser.fromGestures(on: view) { UITapGestureRecognizer() }.connect { _ in first.increment() }
    let b = Fuser.fromGestures(on: view) { UITapGestureRecognizer() }.connect { _ in second.increment() }
    #expect(view.gestureRecognizers?.count == 2)
    view.gestureRecognizers?.first?.standInRecognize()
    #expect(first.count == 1)
    #expect(second.count == 0)
    a.dispose()
    #expect(view.gestureRecognizers?.count == 1)
    b.dispose()
    #expect(view.gestureRecognizers?.isEmpty == true)
  }

  @Test func gestureEventsCarryTheRecognizerState() {
    let recognizer = UITapGestureRecognizer()
    let states = LockedState<[UIGestureRecognizer.State]>([])
    let connection = Fuser.fromGestures(recognizer) { $0.state }.connect { state in
      states.withLock { $0.append(state) }
    }
    recognizer.standInRecognize(.began)
    recognizer.standInRecognize(.ended)
    #expect(states.withLock { $0 } == [.began, .ended])
    #expect(recognizer.standInTargetCount == 1, "the connection keeps its target alive")
    connection.dispose()
    #expect(recognizer.standInTargetCount == 0)
  }

  @Test func diffusersSetTextTitleHiddenAndEnabledOnlyWhenTheyChange() {
    struct Screen: Equatable {
      var title: String?
      var query: String?
      var isLoading: Bool
      var canSubmit: Bool
    }
    let label = UILabel()
    let field = UITextField()
    let button = UIButton()
    let spinner = UIView()
    let render: Diffuser<Screen> = .intoAll(
      .map(\.title, .intoText(label)),
      .map(\.query, .intoText(field)),
      .map(\.title, .intoTitle(button)),
      .map({ !$0.isLoading }, .intoHidden(spinner)),
      .map(\.canSubmit, .intoEnabled(button))
    )
    render.run(Screen(title: "Inbox", query: nil, isLoading: true, canSubmit: false))
    #expect(label.text == "Inbox")
    #expect(field.text == nil)
    #expect(button.title(for: .normal) == "Inbox")
    #expect(!spinner.isHidden)
    #expect(!button.isEnabled)

    label.text = "edited by hand"
    render.run(Screen(title: "Inbox", query: "a", isLoading: false, canSubmit: true))
    #expect(label.text == "edited by hand", "the title did not change: the label is not touched")
    #expect(field.text == "a")
    #expect(spinner.isHidden)
    #expect(button.isEnabled)
  }

  @Test func setNeedsReloadDataReloadsOnceOnTheMainQueuesNextTurn() async {
    // real-time: the shared coalescer runs on the real main queue; nothing is timed.
    let table = RecordingTableView()
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      table.onReload = { done.resume() }
      for _ in 0..<5 { table.setNeedsReloadData() }
      #expect(table.reloads == 0)
    }
    #expect(table.reloads == 1)
  }

  @Test func reloadDataIfNeededReloadsNowAndTheTurnSkipsIt() async {
    // real-time: as above.
    let now = RecordingTableView()
    let later = RecordingTableView()
    now.setNeedsReloadData()
    later.setNeedsReloadData()
    now.reloadDataIfNeeded()
    #expect(now.reloads == 1)
    now.reloadDataIfNeeded()
    #expect(now.reloads == 1)
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      later.onReload = { done.resume() }
    }
    #expect(later.reloads == 1)
    #expect(now.reloads == 1, "the turn that reloaded `later` skipped `now`")
  }

  @Test func collectionViewsToo() async {
    // real-time: as above.
    let collection = RecordingCollectionView()
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      collection.onReload = { done.resume() }
      collection.setNeedsReloadData()
      collection.setNeedsReloadData()
    }
    #expect(collection.reloads == 1)
    collection.onReload = nil
    collection.setNeedsReloadData()
    collection.reloadDataIfNeeded()
    #expect(collection.reloads == 2)
  }
}

/// The 0.3.0 spellings of `disableTemporarily(for:siblings:gate:)`, now deprecated: the seed's
/// `debounce(delay:siblings:gate:)`, and a gate of Pace's `InteractionGate` (moved to PaceUI as
/// `ControlGate`).
enum DeprecatedGateCall: CaseIterable, Sendable {
  case debounceOnInteractionGate
  case disableTemporarilyOnInteractionGate
}

/// Lets a test call the deprecated spellings without a deprecation warning: the witness is
/// deprecated, the requirement is not.
@MainActor protocol DeprecatedGateSpelling {
  func disable(
    for duration: Duration, siblings: [any Enablable], by call: DeprecatedGateCall, on scheduler: TestScheduler)
}

extension UIControl: DeprecatedGateSpelling {
  @available(*, deprecated)
  func disable(
    for duration: Duration, siblings: [any Enablable], by call: DeprecatedGateCall, on scheduler: TestScheduler
  ) {
    let gate = InteractionGate(scheduler: scheduler)
    switch call {
    case .debounceOnInteractionGate: debounce(delay: duration, siblings: siblings, gate: gate)
    case .disableTemporarilyOnInteractionGate: disableTemporarily(for: duration, siblings: siblings, gate: gate)
    }
  }
}
