import PaceTestSupport
import Testing

@testable import Pace

struct Screen: Equatable {
  var title: String
  var count: Int
  var isLoading: Bool
}

/// `count` random screens from a small alphabet, so repeats and changes both happen often.
func randomScreens(seed: UInt64, count: Int = 200) -> [Screen] {
  var generator = SeededGenerator(seed: seed)
  return (0..<count).map { _ in
    Screen(
      title: ["a", "b"].randomElement(using: &generator)!,
      count: Int.random(in: 0...2, using: &generator),
      isLoading: Bool.random(using: &generator)
    )
  }
}

/// The Diffuser laws, checked on seeded random sequences of states.
@Suite struct DiffuserLawTests {
  static let seeds: [UInt64] = Array(1...25)

  @Test(arguments: seeds)
  func intoEqualsIntoWhenNotEqual(seed: UInt64) {
    var viaInto: [Screen] = []
    var viaWhen: [Screen] = []
    let into = Diffuser<Screen>.into { viaInto.append($0) }
    let when = Diffuser<Screen>.intoWhen(didChange: !=) { viaWhen.append($0) }
    for screen in randomScreens(seed: seed) {
      into.run(screen)
      when.run(screen)
    }
    #expect(viaInto == viaWhen)
    #expect(!viaInto.isEmpty)
  }

  @Test(arguments: seeds)
  func intoRunsOnTheFirstRunAndExactlyWhenTheStateChanged(seed: UInt64) {
    let screens = randomScreens(seed: seed)
    var ran: [Screen] = []
    let into = Diffuser<Screen>.into { ran.append($0) }
    screens.forEach(into.run)
    // The reference: drop consecutive duplicates.
    let expected = screens.enumerated().filter { $0.offset == 0 || screens[$0.offset - 1] != $0.element }.map(\.element)
    #expect(ran == expected)
  }

  @Test(arguments: seeds)
  func intoOnceRunsExactlyOnce(seed: UInt64) {
    let screens = randomScreens(seed: seed)
    var ran: [Screen] = []
    let once = Diffuser<Screen>.intoOnce { ran.append($0) }
    screens.forEach(once.run)
    #expect(ran == [screens[0]])
  }

  @Test(arguments: seeds)
  func mapRunsItsChildOnlyWhenTheProjectedValueChanged(seed: UInt64) {
    let screens = randomScreens(seed: seed)
    var titles: [String] = []
    var counts: [Int] = []
    // `intoAlways` children: every run they see comes from map's own diffing.
    let render = Diffuser<Screen>.intoAll(
      .map(\.title, .intoAlways { titles.append($0) }),
      .map({ $0.count }, .intoAlways { counts.append($0) })
    )
    screens.forEach(render.run)
    func changes<T: Equatable>(_ values: [T]) -> [T] {
      values.enumerated().filter { $0.offset == 0 || values[$0.offset - 1] != $0.element }.map(\.element)
    }
    #expect(titles == changes(screens.map(\.title)))
    #expect(counts == changes(screens.map(\.count)))
  }

  @Test(arguments: seeds)
  func childrenRunInOrder(seed: UInt64) {
    var log: [String] = []
    let render = Diffuser<Screen>.intoAll([
      .intoAlways { _ in log.append("a") },
      .intoAll(.intoAlways { _ in log.append("b") }, .intoAlways { _ in log.append("c") }),
      .intoAlways { _ in log.append("d") },
    ])
    let screens = randomScreens(seed: seed, count: 10)
    screens.forEach(render.run)
    #expect(log == Array(repeating: ["a", "b", "c", "d"], count: screens.count).flatMap { $0 })
  }
}

@Suite struct DiffuserTests {
  @Test func intoAlwaysRunsEveryTime() {
    var runs = 0
    let always = Diffuser<Int>.intoAlways { _ in runs += 1 }
    for value in [1, 1, 1, 2] { always.run(value) }
    #expect(runs == 4)
  }

  @Test func intoWhenUsesTheGivenChangeTest() {
    var ran: [[Int]] = []
    let counts = Diffuser<[Int]>.intoWhen(didChange: { $0.count != $1.count }) { ran.append($0) }
    for value in [[1], [2], [2, 3], [4, 5], []] { counts.run(value) }
    #expect(ran == [[1], [2, 3], []])
  }

  @Test func intoWhenRunsOnTheFirstRunWhateverTheChangeTestSays() {
    var runs = 0
    let never = Diffuser<Int>.intoWhen(didChange: { _, _ in false }) { _ in runs += 1 }
    for value in [1, 2, 3] { never.run(value) }
    #expect(runs == 1)
  }

  @Test func intoTreatsOptionalStatesLikeAnyOther() {
    var ran: [String?] = []
    let text = Diffuser<String?>.into { ran.append($0) }
    for value: String? in [nil, nil, "a", "a", nil] { text.run(value) }
    #expect(ran == [nil, "a", nil])
  }

  @Test func keyPathAndClosureMapAgree() {
    var viaKeyPath: [Int] = []
    var viaClosure: [Int] = []
    let a = Diffuser<Screen>.map(\.count, .intoAlways { viaKeyPath.append($0) })
    let b = Diffuser<Screen>.map({ $0.count }, .intoAlways { viaClosure.append($0) })
    for screen in randomScreens(seed: 99) {
      a.run(screen)
      b.run(screen)
    }
    #expect(viaKeyPath == viaClosure)
  }

  @Test func aRunFromInsideASideEffectComparesWithTheStateItWasGiven() {
    var ran: [Int] = []
    var diffuser: Diffuser<Int>?
    diffuser = .into { value in
      ran.append(value)
      // A side effect that normalises the state feeds it back.
      if value < 0 { diffuser?.run(0) }
    }
    diffuser?.run(-5)
    diffuser?.run(0)  // the same as the inner run's state: nothing to do
    diffuser?.run(3)
    #expect(ran == [-5, 0, 3])
    diffuser = nil
  }

  @Test func assignWritesChangedValuesAndHoldsItsObjectWeakly() {
    final class Label { var text: String? }
    var label: Label? = Label()
    let render = Diffuser<String?>.assign(to: \.text, on: label!)
    render.run("a")
    #expect(label?.text == "a")
    label?.text = "edited"
    render.run("a")
    #expect(label?.text == "edited", "unchanged state: no write")
    render.run("b")
    #expect(label?.text == "b")
    weak let weakLabel = label
    label = nil
    #expect(weakLabel == nil)
    render.run("c")  // the label is gone: nothing happens
  }
}

/// Many `run` calls in one turn render once, with the latest state.
@Suite @MainActor struct CoalescingDiffuserTests {
  @Test func manyRunsInOneTurnRenderOnceWithTheLatestState() {
    let scheduler = TestScheduler()
    var rendered: [Int] = []
    let render = CoalescingDiffuser(.intoAlways { rendered.append($0) }, scheduler: scheduler)
    render.run(1)
    render.run(2)
    render.run(3)
    #expect(rendered == [])
    #expect(render.isPending)
    scheduler.advance()
    #expect(rendered == [3])
    #expect(!render.isPending)
    render.run(4)
    scheduler.advance()
    #expect(rendered == [3, 4])
  }

  @Test func itsDiffuserStillSkipsUnchangedStates() {
    let scheduler = TestScheduler()
    var rendered: [Int] = []
    let render = CoalescingDiffuser(.into { rendered.append($0) }, scheduler: scheduler)
    render.run(1)
    scheduler.advance()
    render.run(2)
    render.run(1)
    scheduler.advance()
    #expect(rendered == [1], "the turn's latest state equals the previous render")
  }

  @Test func windowFlushAndCancel() {
    let scheduler = TestScheduler()
    var rendered: [Int] = []
    let render = CoalescingDiffuser(
      .intoAlways { rendered.append($0) }, window: .milliseconds(16), scheduler: scheduler)
    render.run(1)
    scheduler.advance(to: ms(15))
    #expect(rendered == [])
    scheduler.advance(to: ms(16))
    #expect(rendered == [1])

    render.run(2)
    render.flush()
    #expect(rendered == [1, 2])

    render.run(3)
    render.cancel()
    scheduler.advance(by: .seconds(1))
    #expect(rendered == [1, 2])
    #expect(scheduler.pendingCount == 0)
  }

  @Test func aReleasedCoalescingDiffuserNeverRenders() {
    let scheduler = TestScheduler()
    var rendered: [Int] = []
    weak var weakRender: CoalescingDiffuser<Int>?
    do {
      let render = CoalescingDiffuser(.intoAlways { rendered.append($0) }, scheduler: scheduler)
      weakRender = render
      render.run(1)
    }
    #expect(weakRender == nil)
    scheduler.run()
    #expect(rendered == [])
  }
}

/// `Diffuser.intoEnabled`, on a control without UIKit.
@Suite @MainActor struct IntoEnabledTests {
  @Test func intoEnabledDiffusesABooleanIntoATarget() {
    let button = FakeControl(isEnabled: false)
    let render = Diffuser<Bool>.intoEnabled(button)
    render.run(true)
    #expect(button.isEnabled)
    button.isEnabled = false
    render.run(true)
    #expect(!button.isEnabled, "unchanged state: no write")
    render.run(false)
    render.run(true)
    #expect(button.isEnabled)
  }
}
