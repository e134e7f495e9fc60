import Pace
import PaceSwiftUIOnStandIn
import SwiftUIStandIn
import Testing

/// A leaf view for the modifiers to apply to.
struct Leaf: View {
  var body: Never { fatalError("a leaf has no body") }
}

/// A value the test owns, behind a `Binding`, as a parent's `@State` would be.
@MainActor
final class Box<Value> {
  var value: Value
  var writes: [(Value, Duration)] = []
  let scheduler: TestScheduler

  init(_ value: Value, scheduler: TestScheduler) {
    self.value = value
    self.scheduler = scheduler
  }

  var binding: Binding<Value> {
    Binding(
      get: { self.value },
      set: {
        self.value = $0
        self.writes.append(($0, PaceInstant.zero.duration(to: self.scheduler.now)))
      }
    )
  }
}

/// The glue compiled against the SwiftUI stand-in, rendered by its host as SwiftUI would.
@MainActor
@Suite("PaceSwiftUI modifiers on the SwiftUI stand-in")
struct SwiftUIGlueTests {
  let scheduler = TestScheduler()
  let host = StandInHost()

  func advance(to milliseconds: Int) {
    scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(milliseconds)))
  }

  var time: Duration { PaceInstant.zero.duration(to: scheduler.now) }

  @Test func onChangeDebounceRunsOnceTypingPauses() {
    var received: [(String, Duration)] = []
    func render(_ query: String) {
      host.standInRender(
        Leaf().onChange(of: query, debounce: .milliseconds(300), scheduler: scheduler) { [scheduler] in
          received.append(($0, PaceInstant.zero.duration(to: scheduler.now)))
        }
      )
    }
    render("")
    render("s")
    advance(to: 100)
    render("sw")
    advance(to: 200)
    render("swi")
    advance(to: 1_000)
    #expect(received.map(\.0) == ["swi"])
    #expect(received.map(\.1) == [.milliseconds(500)])
  }

  @Test func onChangeDebounceWithLeadingEdgeAndMaxWait() {
    var received: [(Int, Duration)] = []
    func render(_ value: Int) {
      host.standInRender(
        Leaf().onChange(
          of: value, debounce: .milliseconds(100), edges: .both, maximumWait: .milliseconds(250), scheduler: scheduler
        ) {
          [scheduler] in received.append(($0, PaceInstant.zero.duration(to: scheduler.now)))
        }
      )
    }
    render(0)
    for step in 1...9 {
      advance(to: 60 * (step - 1))
      render(step)
    }
    advance(to: 2_000)
    // Changes at 0, 60, ..., 480: leading 1 at 0, maximumWait 5 at 250 and 9 at 500.
    #expect(received.map(\.0) == [1, 5, 9])
    #expect(received.map(\.1) == [.zero, .milliseconds(250), .milliseconds(500)])
  }

  @Test func onChangeThrottleKeepsACadence() {
    var received: [(Int, Duration)] = []
    func render(_ value: Int) {
      host.standInRender(
        Leaf().onChange(of: value, throttle: .milliseconds(100), scheduler: scheduler) { [scheduler] in
          received.append(($0, PaceInstant.zero.duration(to: scheduler.now)))
        }
      )
    }
    render(0)
    for step in 1...6 {
      advance(to: 40 * (step - 1))
      render(step)
    }
    advance(to: 1_000)
    #expect(received.map(\.0) == [1, 3, 5, 6])
    #expect(received.map(\.1) == [.zero, .milliseconds(100), .milliseconds(200), .milliseconds(300)])
  }

  @Test func disappearingDropsThePendingChange() {
    var received: [String] = []
    func render(_ query: String) {
      host.standInRender(
        Leaf().onChange(of: query, debounce: .milliseconds(300), scheduler: scheduler) { received.append($0) }
      )
    }
    render("")
    render("a")
    host.standInDisappear()
    #expect(scheduler.pendingCount == 0)
    advance(to: 1_000)
    #expect(received.isEmpty)
  }

  @Test func taskDebounceStartsOnAppearThenCancelsAtOnceAndRestartsWhenTheIdSettles() async {
    let log = Box<[String]>([], scheduler: scheduler)
    func render(_ query: String) {
      host.standInRender(
        Leaf().task(id: query, debounce: .milliseconds(300), scheduler: scheduler) { @MainActor [log] in
          log.value.append("start \(query)")
          try? await Task.sleep(for: .seconds(3_600))  // real-time: ends only when cancelled
          log.value.append(Task.isCancelled ? "cancelled \(query)" : "done \(query)")
        }
      )
    }
    render("")
    #expect(host.startedTasks.count == 1, "runs on appear, as task(id:)")
    advance(to: 100)
    render("s")
    #expect(host.startedTasks[0].isCancelled, "a change cancels the running work at once")
    advance(to: 200)
    render("sw")
    advance(to: 499)
    render("sw")
    // The change at 100 replaced the work with an empty run; later changes start nothing.
    #expect(host.startedTasks.count == 2, "changes start no work while the id keeps changing")
    advance(to: 500)
    render("sw")  // SwiftUI renders again: the modifier's run changed
    #expect(host.startedTasks.count == 3)
    #expect(!host.startedTasks[2].isCancelled)
    host.standInDisappear()
    #expect(host.startedTasks[2].isCancelled)
    for task in host.startedTasks { await task.value }
    // The tasks run when the test awaits, so only what happened is checked, not its interleaving.
    #expect(log.value.sorted() == ["cancelled ", "cancelled sw", "start ", "start sw"])
  }

  @Test func debouncedBindingCopiesTheSettledValue() {
    let query = Box("", scheduler: scheduler)
    func render(_ draft: String) {
      host.standInRender(Leaf().debounced(draft, into: query.binding, for: .milliseconds(300), scheduler: scheduler))
    }
    render("")
    render("s")
    advance(to: 100)
    render("sw")
    advance(to: 1_000)
    #expect(query.writes.map(\.0) == ["sw"])
    #expect(query.writes.map(\.1) == [.milliseconds(400)])
  }

  @Test func returnCopiesNowAndEscapeDropsThePendingCopy() {
    let query = Box("", scheduler: scheduler)
    func render(_ draft: String) {
      host.standInRender(Leaf().debounced(draft, into: query.binding, for: .milliseconds(300), scheduler: scheduler))
    }
    render("")
    render("swi")
    advance(to: 50)
    host.standInSubmit()
    #expect(query.value == "swi")
    advance(to: 1_000)
    #expect(query.writes.map(\.1) == [.milliseconds(50)], "the pending copy went with Return")

    render("swift")
    advance(to: 1_100)
    host.standInExitCommand()
    advance(to: 2_000)
    #expect(query.value == "swi", "Escape dropped the pending copy")
    host.standInSubmit()
    #expect(query.value == "swift", "Return after Escape copies what is typed")
    #expect(query.writes.map(\.1) == [.milliseconds(50), .milliseconds(2_000)])
  }

  @Test func escapeOnAHardwareKeyboardDropsThePendingCopyAndLetsTheSystemSeeTheKey() {
    let query = Box("", scheduler: scheduler)
    func render(_ draft: String) {
      host.standInRender(Leaf().debounced(draft, into: query.binding, for: .milliseconds(300), scheduler: scheduler))
    }
    render("")
    render("a")
    advance(to: 100)
    #expect(host.standInKeyPress(.escape) == .ignored)
    #expect(host.standInKeyPress(.return) == .ignored)
    advance(to: 1_000)
    #expect(query.writes.isEmpty)
    #expect(scheduler.pendingCount == 0)
  }

  @Test func controlFlushesAndCancelsFromElsewhereInTheView() {
    let query = Box("", scheduler: scheduler)
    let control = PacingControl()
    func render(_ draft: String) {
      host.standInRender(
        Leaf().debounced(draft, into: query.binding, for: .milliseconds(300), control: control, scheduler: scheduler)
      )
    }
    render("")
    render("a")
    #expect(control.isPending)
    advance(to: 10)
    control.flush()
    #expect(query.writes.map(\.0) == ["a"])
    #expect(query.writes.map(\.1) == [.milliseconds(10)])
    render("ab")
    control.cancel()
    advance(to: 1_000)
    #expect(query.value == "a")
  }
}

/// The example and the diagram of PaceSwiftUI.docc, checked. Keep them in sync.
@MainActor
@Suite("PaceSwiftUI article")
struct SwiftUIArticleTests {
  let scheduler = TestScheduler()
  let host = StandInHost()

  /// The modifiers of the article's `SearchView`, on a leaf view.
  @Test func searchViewExample() async {
    let query = Box("", scheduler: scheduler)
    let searches = Box<[String]>([], scheduler: scheduler)
    let control = PacingControl()
    func render(_ draft: String) {
      let current = query.value
      host.standInRender(
        Leaf()
          .debounced(
            draft, into: query.binding, for: .milliseconds(300), maximumWait: .seconds(1), control: control,
            scheduler: scheduler
          )
          .task(id: current) { @MainActor [searches] in searches.value.append(current) }
      )
    }
    // The view appears with an empty draft, then a letter every 200 ms for 1.2 s: the typing
    // never pauses for 300 ms, so maximumWait copies the draft at 1 s (before the letter typed
    // then); the rest settles 300 ms after the last letter.
    render("")
    for (step, draft) in ["s", "sw", "swi", "swif", "swift", "swiftu", "swiftui"].enumerated() {
      scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(200 * step)))
      render(draft)
      render(draft)  // SwiftUI renders again after `query` changed
      for task in host.startedTasks { await task.value }
    }
    scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(1_500)))
    render("swiftui")
    #expect(query.writes.map(\.0) == ["swift", "swiftui"])
    #expect(query.writes.map(\.1) == [.milliseconds(1_000), .milliseconds(1_500)])
    // Each search runs before the next one starts: tasks enqueued together on the main actor
    // may run in either order (one full run in four, under load).
    for task in host.startedTasks { await task.value }

    // "Search now" copies a pending draft at once.
    scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(2_000)))
    render("swiftui!")
    control.flush()
    render("swiftui!")
    #expect(query.writes.last.map(\.1) == .milliseconds(2_000))

    for task in host.startedTasks { await task.value }
    #expect(searches.value == ["", "swift", "swiftui", "swiftui!"])
  }

  @Test func diagram() {
    let query = Box("", scheduler: scheduler)
    func render(_ draft: String) {
      host.standInRender(Leaf().debounced(draft, into: query.binding, for: .milliseconds(300), scheduler: scheduler))
    }
    render("")
    // draft   s-w-i----f-↵----t⎋---
    let script: [(Int, String)] = [
      (0, "s"), (2, "sw"), (4, "swi"), (9, "swif"), (11, "↵"), (16, "swift"), (17, "⎋"),
    ]
    var draft = ""
    for (step, token) in script {
      scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(100 * step)))
      switch token {
      case "↵": host.standInSubmit()
      case "⎋": host.standInExitCommand()
      default:
        draft = token
        render(draft)
      }
    }
    scheduler.advance(to: PaceInstant.zero.advanced(by: .milliseconds(2_100)))
    let steps = Dictionary(
      query.writes.map { (Int($0.1 / .milliseconds(100)), String($0.0.last!)) }, uniquingKeysWith: +
    )
    #expect((0..<21).map { steps[$0] ?? "-" }.joined() == "-------i---f---------")
  }
}
