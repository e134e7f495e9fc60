import Pace
import PaceTesting
import Testing

/// The marble diagrams of Coalescer.md, Fuser.md and Diffuser.md, checked against the engine.
/// One step is 100 ms throughout, as in the articles; `[ ]` is several events in one step (one
/// turn). Keep them in sync.
@Suite struct CompositionDocDiagramTests {
  let step = Duration.milliseconds(100)

  // MARK: Coalescer.md

  @Test func coalescerNextTurn() {
    expectMarbles("[abc]---[de]--f---", step: step, through: { $0.coalescer() }, equals: "c    ---e   --f---")
  }

  @Test func coalescerWindow() {
    expectMarbles(
      "ab-c---d-----", step: step, through: { $0.coalescer(window: .milliseconds(200)) }, equals: "--b--c---d---")
  }

  @Test func coalescerSum() {
    expectMarbles(
      "[112]--[13]-4", step: step,
      through: { marbles in
        Coalescer<Int>(merge: .sum, scheduler: marbles.scheduler) { marbles.emit($0) }
      },
      equals: "4    --4   -4")
  }

  @Test func coalescerFirst() {
    expectMarbles("[abc]---[de]--f", step: step, through: { $0.coalescer(merge: .first) }, equals: "a    ---d   --f")
  }

  // MARK: Fuser.md

  /// Letters before `n` come from one source, the others from a second one.
  private func twoSources(
    _ marbles: MarbleHarness,
    _ operators: (Fuser<String>) -> Fuser<String> = { $0 }
  ) -> MarbleCalls {
    let taps = DiagramSource()
    let swipes = DiagramSource()
    let connection = operators(.fromAll(taps.fuser, swipes.fuser)).connect { marbles.emit($0) }
    return MarbleCalls { value in
      withExtendedLifetime(connection) { (value < "n" ? taps : swipes).send(value) }
    }
  }

  @Test func fuserFromAll() {
    expectMarbles("a-x-b---y-c---", step: step, through: { twoSources($0) }, equals: "a-x-b---y-c---")
  }

  @Test func fuserDebounce() {
    expectMarbles(
      "ab-x------c----", step: step,
      through: { marbles in
        twoSources(marbles) { $0.debounced(for: .milliseconds(300), scheduler: marbles.scheduler) }
      },
      equals: "------x------c-")
  }

  @Test func fuserThrottle() {
    expectMarbles(
      "abcxyzg-----h", step: step,
      through: { marbles in
        twoSources(marbles) { $0.throttled(for: .milliseconds(300), scheduler: marbles.scheduler) }
      },
      equals: "a--c--z--g--h")
  }

  @Test func fuserCoalesce() {
    expectMarbles(
      "[abx]---[yd]--f", step: step,
      through: { marbles in twoSources(marbles) { $0.coalesced(scheduler: marbles.scheduler) } },
      equals: "x    ---d   --f")
  }

  @Test func fuserFilterAndMap() {
    expectMarbles(
      "a-x-b---y-c---", step: step,
      through: { marbles in twoSources(marbles) { $0.filter { $0 < "n" }.map { $0.uppercased() } } },
      equals: "A---B-----C---")
  }

  // MARK: Diffuser.md

  @Test func diffuserInto() {
    expectMarbles(
      "a-a-b-b-a", step: step,
      through: { marbles in diffusing(Diffuser<String>.into { marbles.emit($0) }) },
      equals: "a---b---a")
  }

  @Test func diffuserIntoAlways() {
    expectMarbles(
      "a-a-b-b-a", step: step,
      through: { marbles in diffusing(Diffuser<String>.intoAlways { marbles.emit($0) }) },
      equals: "a-a-b-b-a")
  }

  @Test func diffuserIntoOnce() {
    expectMarbles(
      "a-a-b-b-a", step: step,
      through: { marbles in diffusing(Diffuser<String>.intoOnce { marbles.emit($0) }) },
      equals: "a--------")
  }

  @Test func diffuserMap() {
    // map(\.isVowel): the child sees "is a vowel" only when that changes.
    expectMarbles(
      "a-e-b-c-i", step: step,
      through: { marbles in
        diffusing(Diffuser<String>.map({ "aeiou".contains($0) ? "v" : "c" }, .intoAlways { marbles.emit($0) }))
      },
      equals: "v---c---v")
  }

  @Test @MainActor func coalescingDiffuser() {
    expectMarbles(
      "[abc]--[ac]--[dd]", step: step,
      through: { marbles in
        let render = CoalescingDiffuser(Diffuser<String>.into { marbles.emit($0) }, scheduler: marbles.scheduler)
        return MarbleCalls { value in render.run(value) }
      },
      equals: "c    ---   --d")
  }

  private func diffusing(_ diffuser: Diffuser<String>) -> MarbleCalls {
    MarbleCalls { diffuser.run($0) }
  }
}

/// A source the diagrams drive.
final class DiagramSource: Sendable {
  private let listeners = LockedStateBox<[@Sendable (String) -> Void]>([])

  var fuser: Fuser<String> {
    Fuser { [self] dispatch in
      listeners.mutate { $0.append(dispatch) }
      return AnyDisposable { [self] in listeners.mutate { $0.removeAll() } }
    }
  }

  func send(_ value: String) {
    for listener in listeners.value { listener(value) }
  }
}
