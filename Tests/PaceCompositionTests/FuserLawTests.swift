import Testing

@testable import Pace

/// Every constructor and operator of `Fuser`, under the laws in `FuserLaws.swift`.
let fuserLawSubjects: [FuserLawSubject] = [
  .sync("init(_:) over a source") { sources, _ in sources[0] },
  .sync("init(_:) wrapping another fuser") { sources, _ in
    Fuser { dispatch in sources[0].connect(dispatch) }
  },
  .sync("fromAll(_:) of three", sources: 3) { sources, _ in .fromAll(sources) },
  .sync("fromAll(_:) variadic", sources: 2) { sources, _ in .fromAll(sources[0], sources[1]) },
  .sync("fromAll(_:) nested", sources: 3) { sources, _ in .fromAll(.fromAll(sources[0], sources[1]), sources[2]) },
  .sync("map(_:)", expected: { $0.map { $0 * 10 } }) { sources, _ in sources[0].map { $0 * 10 } },
  .sync("extract(_:_:)", expected: { $0.map { $0 + 100 } }) { sources, _ in .extract({ $0 + 100 }, sources[0]) },
  .sync("filter(_:)", expected: { $0.filter { $0 % 2 == 1 } }) { sources, _ in sources[0].filter { $0 % 2 == 1 } },
  .sync("compactMap(_:)", expected: { $0.filter { $0 % 3 != 0 }.map { -$0 } }) { sources, _ in
    sources[0].compactMap { $0 % 3 == 0 ? nil : -$0 }
  },
  .sync("debounce trailing", flatten: { $0 }) { sources, scheduler in
    sources[0].map { [$0] }.debounced(for: .milliseconds(100), merge: .append, scheduler: scheduler)
  },
  .sync("debounce both edges with maximumWait", flatten: { $0 }) { sources, scheduler in
    sources[0].map { [$0] }
      .debounced(
        for: .milliseconds(100), edges: .both, maximumWait: .milliseconds(150), merge: .append, scheduler: scheduler)
  },
  .sync("debounce leading", flatten: { $0 }) { sources, scheduler in
    // Leading only, with a 30 ms interval shorter than the harness's 40 ms step: every event leads.
    sources[0].map { [$0] }.debounced(for: .milliseconds(30), edges: .leading, merge: .append, scheduler: scheduler)
  },
  .sync("throttle both edges", flatten: { $0 }) { sources, scheduler in
    sources[0].map { [$0] }.throttled(for: .milliseconds(100), merge: .append, scheduler: scheduler)
  },
  .sync("throttle trailing", flatten: { $0 }) { sources, scheduler in
    sources[0].map { [$0] }.throttled(for: .milliseconds(100), edges: .trailing, merge: .append, scheduler: scheduler)
  },
  .sync("coalesce next turn", flatten: { $0 }) { sources, scheduler in
    sources[0].map { [$0] }.coalesced(merge: .append, scheduler: scheduler)
  },
  .sync("coalesce window", flatten: { $0 }) { sources, scheduler in
    sources[0].map { [$0] }.coalesced(window: .milliseconds(90), merge: .append, scheduler: scheduler)
  },
  .sync("operators chained", sources: 2, expected: { $0.filter { $0 != 5 } }, flatten: { $0 }) { sources, scheduler in
    Fuser<Int>.fromAll(sources[0].filter { $0 != 5 }, sources[1].compactMap { $0 == 5 ? nil : $0 })
      .map { [$0] }
      .coalesced(merge: .append, scheduler: scheduler)
      .throttled(for: .milliseconds(70), merge: .append, scheduler: scheduler)
  },
  FuserLawSubject(name: "fromSequence(_:)") { AsyncSequenceLawHarness() },
]

@Suite struct FuserLawTests {
  @Test(arguments: fuserLawSubjects)
  func eventsArriveInOrder(_ subject: FuserLawSubject) async {
    await FuserLaws.eventsArriveInOrder(subject)
  }

  @Test(arguments: fuserLawSubjects)
  func nothingBeforeConnect(_ subject: FuserLawSubject) async {
    await FuserLaws.nothingBeforeConnect(subject)
  }

  @Test(arguments: fuserLawSubjects)
  func nothingAfterDispose(_ subject: FuserLawSubject) async {
    await FuserLaws.nothingAfterDispose(subject)
  }

  @Test(arguments: fuserLawSubjects)
  func disposeReachesEverySourceExactlyOnce(_ subject: FuserLawSubject) async {
    await FuserLaws.disposeReachesEverySourceExactlyOnce(subject)
  }

  @Test(arguments: fuserLawSubjects)
  func connectionsAreIndependent(_ subject: FuserLawSubject) async {
    await FuserLaws.connectionsAreIndependent(subject)
  }
}
