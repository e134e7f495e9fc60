#if Hummingbird
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Pace
import PaceTestSupport

/// A server that misbehaves on a schedule, for the resilient client's end-to-end proof: its
/// tokens expire every `tokenLifetime`, it fails every request (500) in `failing`, and answers
/// each request `slowBy` late in `slow`; the rest of the time it answers 200 at once. Times are
/// seconds from `start`, on the wall clock, set by ``begin()`` once the test's clients are ready
/// (a loaded machine can take seconds to start the server and the clients). It counts what it did.
final class ScheduledServer: Sendable {
  private let started: LockedBox<Double>
  /// The instant the schedule began, in seconds since the Unix epoch.
  var start: Double { started.withLock { $0 } }
  let tokenLifetime: Double
  let failing: Range<Double>
  let slow: Range<Double>
  let slowBy: Duration

  struct Counts: Sendable {
    /// How many times each token generation was handed out by `/token`.
    var issued: [Int: Int] = [:]
    /// Requests refused with an expired token.
    var unauthorized = 0
    /// Requests answered 500 in the failing span, and the instants they arrived.
    var failed: [Double] = []
    /// Requests answered 200, and the instants they arrived.
    var succeeded: [Double] = []
  }

  private let counts = LockedBox(Counts())

  init(tokenLifetime: Double, failing: Range<Double>, slow: Range<Double>, slowBy: Duration) {
    started = LockedBox(unixNow())
    self.tokenLifetime = tokenLifetime
    self.failing = failing
    self.slow = slow
    self.slowBy = slowBy
  }

  var snapshot: Counts { counts.withLock { $0 } }

  /// Starts the schedule now.
  func begin() { started.withLock { $0 = unixNow() } }

  /// The token valid at `now`: one generation per `tokenLifetime`.
  func generation(at now: Double) -> Int { Int(((now - start) / tokenLifetime).rounded(.down)) }

  var router: Router<BasicRequestContext> {
    let router = Router()
    router.get("/token") { _, _ -> Response in
      let generation = self.generation(at: unixNow())
      self.counts.withLock { $0.issued[generation, default: 0] += 1 }
      return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "t\(generation)")))
    }
    router.get("/") { request, _ -> Response in
      let now = unixNow()
      let elapsed = now - self.start
      guard request.headers[.authorization] == "Bearer t\(self.generation(at: now))" else {
        self.counts.withLock { $0.unauthorized += 1 }
        return Response(status: .unauthorized)
      }
      if self.failing.contains(elapsed) {
        self.counts.withLock { $0.failed.append(elapsed) }
        return Response(status: .internalServerError)
      }
      if self.slow.contains(elapsed) {
        // real-time: the slow span is the server's own behaviour under test, in wall time.
        try await Task.sleep(for: self.slowBy)
      }
      self.counts.withLock { $0.succeeded.append(elapsed) }
      return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "ok")))
    }
    return router
  }
}
#endif
