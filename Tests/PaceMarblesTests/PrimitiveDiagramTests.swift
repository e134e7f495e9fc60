import PaceTesting
import Testing

/// Pace's own timing cases as diagrams: one step is 100 ms, the interval 300 ms (three steps).
/// Inputs are handed to the primitive after `advance(to:)` has fired the timers due at their
/// step, so a call made exactly at a deadline belongs to what follows it.
@Suite struct PrimitiveDiagramTests {
  let step = Duration.milliseconds(100)
  let interval = Duration.milliseconds(300)

  // MARK: Debouncer

  @Test func debounceTrailing() {
    expectMarbles("a-b-c------d---", step: step, through: { $0.debouncer(for: interval) }, equals: "-------c------d")
  }

  @Test func debounceLeading() {
    expectMarbles(
      "a-b-c------d---", step: step, through: { $0.debouncer(for: interval, edges: .leading) },
      equals: "a----------d")
  }

  @Test func debounceBothEdgesInvokesALoneCallOnce() {
    expectMarbles(
      "a-b-c------d---", step: step, through: { $0.debouncer(for: interval, edges: .both) },
      equals: "a------c---d")
  }

  @Test func debounceMaxWaitBoundsTheWait() {
    expectMarbles(
      "abcdefghij", step: step, through: { $0.debouncer(for: interval, maximumWait: .milliseconds(500)) },
      equals: "-----e----j")
  }

  @Test func debounceAppendBatchesEveryValue() {
    expectMarbles(
      "a-b-c------d", step: step, through: { $0.debouncer(for: interval, merge: .append) },
      equals: "-------'abc'------d")
  }

  @Test func debounceCallAtTheDeadlineStartsANewBurst() {
    // The timer due at step 3 fires before the call at step 3.
    expectMarbles("a--b", step: step, through: { $0.debouncer(for: interval) }, equals: "---a--b")
  }

  @Test func debounceSumOfIntegers() {
    expectMarbles(
      "1-2-3------4", step: step,
      through: { marbles in
        Debouncer<Int>(for: interval, merge: .sum, scheduler: marbles.scheduler) { marbles.emit($0) }
      }, equals: "-------6------4")
  }

  @Test func finishFlushesAndEnds() {
    expectMarbles("a-b|", step: step, through: { $0.debouncer(for: interval) }, equals: "---[b|]")
  }

  @Test func failureCancelsAndFails() {
    expectMarbles("a-^", step: step, through: { $0.debouncer(for: interval) }, equals: "--^")
  }

  @Test func cancelDropsThePendingCall() {
    expectMarbles("a-;--b", step: step, through: { $0.debouncer(for: interval) }, equals: "--------b")
  }

  @Test func cancelLetsTheNextCallLeadAgain() {
    expectMarbles("a-;b", step: step, through: { $0.debouncer(for: interval, edges: .leading) }, equals: "a--b")
  }

  // MARK: Throttler

  @Test func throttleBothEdgesKeepsASteadyCadence() {
    expectMarbles("abcdefg---h", step: step, through: { $0.throttler(for: interval) }, equals: "a--c--f--g--h")
  }

  @Test func throttleLeading() {
    expectMarbles(
      "abcdefg---h", step: step, through: { $0.throttler(for: interval, edges: .leading) },
      equals: "a--d--g---h")
  }

  @Test func throttleTrailing() {
    expectMarbles(
      "abcdefg---h", step: step, through: { $0.throttler(for: interval, edges: .trailing) },
      equals: "---c--f--g--h")
  }

  @Test func throttleFirstKeepsTheWindowsFirstValue() {
    // d at step 3 comes after the window ending at 3 invoked b, so it is the next window's first.
    expectMarbles(
      "abcdefg", step: step, through: { $0.throttler(for: interval, merge: .first) },
      equals: "a--b--d--g")
  }

  @Test func throttleQuietsDownAfterAnEmptyWindow() {
    expectMarbles("a------b", step: step, through: { $0.throttler(for: interval) }, equals: "a------b")
  }

  // MARK: Coalescer

  @Test func coalesceNextTurnMergesOneInstant() {
    expectMarbles("a-[bc]-d", step: step, through: { $0.coalescer() }, equals: "a-c-d")
    expectMarbles("a-[bc]-d", step: step, through: { $0.coalescer(merge: .append) }, equals: "a-'bc'-d")
  }

  @Test func coalesceWindow() {
    expectMarbles("abcd---e", step: step, through: { $0.coalescer(window: interval) }, equals: "---c--d---e")
  }

  @Test func coalesceSum() {
    expectMarbles(
      "[111]-[11]", step: step,
      through: { marbles in
        Coalescer<Int>(merge: .sum, scheduler: marbles.scheduler) { marbles.emit($0) }
      }, equals: "3-2")
  }

  // MARK: The runner

  @Test func runnerRecordsExactInstants() throws {
    let run = try MarbleRunner.run("step: 10ms a-b", through: { $0.debouncer(for: .milliseconds(25)) })
    #expect(run.output == MarbleTimeline([(PaceInstant(.milliseconds(45)), "b")]))
    #expect(throws: MarbleRenderError.self) { try run.outputDiagram() }
    #expect(try run.outputDiagram(offGrid: .floor).description == "----b")
  }

  @Test func runnerStartsAtTheSchedulersTime() throws {
    let scheduler = TestScheduler(now: PaceInstant(.seconds(5)))
    let run = try MarbleRunner.run(
      "a", stepLength: step, scheduler: scheduler, through: { $0.debouncer(for: interval) })
    #expect(run.output == MarbleTimeline([(PaceInstant(.milliseconds(5300)), "a")]))
    #expect(try run.outputDiagram().description == "---a")
  }

  @Test func runnerErrors() {
    #expect(throws: MarbleRunError.self) { try MarbleRunner.run("a", through: { $0.debouncer(for: interval) }) }
    #expect {
      try MarbleRunner.run("step: 10ms a", stepLength: .milliseconds(20), through: { $0.debouncer(for: interval) })
    } throws: { error in
      (error as? MarbleRunError)?.description == "the diagram's header says step: 10ms but stepLength is 20ms"
    }
    #expect {
      try MarbleRunner.run(
        "1-x", stepLength: step,
        through: { marbles in
          Debouncer<Int>(for: interval, scheduler: marbles.scheduler) { marbles.emit($0) }
        })
    } throws: { error in
      (error as? MarbleRunError)?.description == "step 2 (x): 'x' is not a valid Int"
    }
  }

  @Test func settlingStopsARepeatingTimer() throws {
    // Work that reschedules itself forever: the run stops `settlingSteps` past the input.
    let run = try MarbleRunner.run(
      "a", stepLength: step, settlingSteps: 5,
      through: { marbles in
        MarbleCalls { _ in
          @Sendable func tick() {
            marbles.emit("t")
            marbles.scheduler.schedule(after: .milliseconds(200)) { tick() }
          }
          tick()
        }
      })
    #expect(try run.outputDiagram().description == "t-t-t-t")  // up to step 1 + 5
  }
}
