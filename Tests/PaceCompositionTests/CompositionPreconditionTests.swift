import Pace
import Testing

/// Bad parameters of the composition types stop the process at once, naming the parameter, when
/// the operator is built rather than when it is first connected.
@Suite struct CompositionPreconditionTests {
  static func message(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
  }

  @Test func aNegativeDebounceIntervalOnAFuserNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Fuser<Int> { _ in AnyDisposable {} }.debounced(for: .milliseconds(-1), scheduler: TestScheduler())
    }
    #expect(Self.message(result).contains("Fuser.debounced: interval must not be negative"))
  }

  @Test func emptyThrottleEdgesOnAFuserNameTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Fuser<Int> { _ in AnyDisposable {} }.throttled(for: .seconds(1), edges: [], scheduler: TestScheduler())
    }
    #expect(Self.message(result).contains("Fuser.throttled: edges must not be empty"))
  }

  @Test func aNegativeCoalesceWindowOnAFuserNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = Fuser<Int> { _ in AnyDisposable {} }.coalesced(window: .seconds(-1), scheduler: TestScheduler())
    }
    #expect(Self.message(result).contains("Fuser.coalesced: window must not be negative"))
  }

  @Test func aNegativeUpdateCoalescerWindowNamesTheParameter() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      await MainActor.run {
        _ = UpdateCoalescer<AnyObjectBox>(window: .seconds(-1), scheduler: TestScheduler()) { _ in }
      }
    }
    #expect(Self.message(result).contains("UpdateCoalescer: window must not be negative"))
  }
}

final class AnyObjectBox {}
