#if Hummingbird && canImport(FoundationNetworking)
import Foundation
import FoundationNetworking
import Hummingbird
@testable import PaceHTTPClient
import PaceTestSupport
import Testing

/// FoundationNetworking's `data(for:)` can deadlock when its task is cancelled as the transfer
/// finishes (swift-corelibs-foundation#5412): the paced requests' attempts on Linux go through
/// `URLSession.cancellableData(for:)` instead.
@Suite("URLSession attempts cancelled as their answers arrive", .timeLimit(.minutes(2)))
struct URLSessionCancellationTests {
  /// Attempts against a server on loopback, each cancelled after a seeded random delay of 0 to
  /// 3 ms, so that many cancellations race with the transfer's end: every attempt ends, with its
  /// answer or an error, and the process goes on.
  @Test func attemptsCancelledAsTheirAnswersArriveAllEnd() async throws {
    let router = Router()
    router.get("/") { _, _ in Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "ok"))) }
    let (answered, failed) = try await TestServer.run(router) { port in
      let session = URLSession(configuration: .ephemeral)
      defer { session.finishTasksAndInvalidate() }
      let request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/")!)
      var random = SeededGenerator(seed: 5412)
      var (answered, failed) = (0, 0)
      for _ in 0..<400 {
        let delay = Int.random(in: 0...3_000, using: &random)
        let attempt = Task { try await session.attempt(request) }
        // real-time: a cancellation that races with a real transfer's end
        try await Task.sleep(for: .microseconds(delay))
        attempt.cancel()
        switch await attempt.result {
        case .success(let (data, _)):
          #expect(data == Data("ok".utf8))
          answered += 1
        case .failure:
          failed += 1
        }
      }
      return (answered, failed)
    }
    print("400 attempts cancelled: \(answered) answered first, \(failed) cancelled")
    #expect(answered + failed == 400)
  }
}
#endif
