#if Hummingbird
import Foundation
import Pace
import PaceHTTPClient
import PaceTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if AsyncHTTPClient
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import PaceAsyncHTTPClient
#endif

/// The resilient client end to end on loopback, in real time, through each glue: callers send
/// with a deadline, a credential that the server expires every second, and a circuit breaker,
/// against a ``ScheduledServer`` that fails every request for 1.5 s and answers 800 ms late for
/// 1 s. No send outlives its deadline, each expiry is refreshed exactly once, the breaker stops
/// the traffic to the failing server within its window and lets it back through its probes.
@Suite("A resilient client, end to end over loopback", .serialized, .timeLimit(.minutes(3)))
struct ResilientClientEndToEndTests {
  static let callers = 6
  static let run = 5.5
  static let deadline = Duration.milliseconds(400)
  /// What a send may take beyond its deadline on a loaded 2-core machine (a neighbour building,
  /// or two busy processes beside the suite, where 0.6 s was exceeded by 0.08 s): the scheduling
  /// of the timer that cuts it and of the caller's task.
  static let slack = 1.0

  struct Send: Sendable {
    let start: Double
    let end: Double
    let outcome: String
  }

  /// One send through `library`'s credentials glue.
  static func send(
    _ library: ClientLibrary, port: Int, requests: PacedRequests, credentials: CredentialRefresher<String>,
    clients: Clients
  ) async throws -> Int {
    switch library {
    case .urlSession:
      let request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/")!)
      let (_, response) = try await clients.session.data(
        for: request, pacedBy: requests, credentials: credentials, deadline: deadline
      ) { request, token in
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
      }
      return (response as? HTTPURLResponse)?.statusCode ?? 0
    #if AsyncHTTPClient
    case .asyncHTTPClient:
      let request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/")
      let response = try await clients.httpClient.execute(
        request, timeout: .seconds(5), pacedBy: requests, credentials: credentials, collectingBodyUpTo: 1 << 16,
        deadline: deadline
      ) { request, token in
        request.headers.replaceOrAdd(name: "Authorization", value: "Bearer \(token)")
      }
      return Int(response.status.code)
    #endif
    }
  }

  @Test(arguments: ClientLibrary.allCases)
  func deadlinesRefreshesAndTheBreakerHoldEndToEnd(_ library: ClientLibrary) async throws {
    let server = ScheduledServer(
      tokenLifetime: 1, failing: 1.5..<3.0, slow: 3.5..<4.5, slowBy: .milliseconds(800))
    let transitions = LockedBox<[(Double, CircuitBreakerState)]>([])
    let breaker = KeyedCircuitBreaker<String>(
      failureRatio: 0.5, minimumCalls: 5, window: .seconds(1), coolDown: .milliseconds(500), probes: 1
    ) { _, _, to in
      transitions.withLock { $0.append((unixNow() - server.start, to)) }
    }
    let requests = PacedRequests(
      retry: RetryStrategy(maximumAttempts: 3, baseDelay: .milliseconds(20), maximumDelay: .milliseconds(50)),
      breaker: breaker)
    let sends = try await TestServer.run(server.router) { port in
      try await Clients.with { clients in
        // The schedule starts once the server and the clients are up.
        server.begin()
        let start = server.start
        let credentials = CredentialRefresher<String> { _ in
          let (data, _) = try await clients.session.data(from: URL(string: "http://127.0.0.1:\(port)/token")!)
          return String(decoding: data, as: UTF8.self)
        }
        return try await withThrowingTaskGroup(of: [Send].self) { group in
          for _ in 0..<Self.callers {
            group.addTask {
              var sends: [Send] = []
              while unixNow() - start < Self.run {
                let began = unixNow() - start
                let outcome: String
                do {
                  outcome =
                    "\(try await Self.send(library, port: port, requests: requests, credentials: credentials, clients: clients))"
                } catch let error as CircuitBreakerError {
                  outcome = "breaker: \(error)"
                  // real-time: a caller whose breaker is open comes back a little later, as an app's would.
                  try await Task.sleep(for: .milliseconds(20))
                } catch {
                  outcome = "\(error)"
                }
                sends.append(Send(start: began, end: unixNow() - start, outcome: outcome))
              }
              return sends
            }
          }
          return try await group.reduce(into: []) { $0 += $1 }
        }
      }
    }
    let counts = server.snapshot
    let longest = sends.map { $0.end - $0.start }.max() ?? 0
    print(
      "\(library): \(sends.count) sends, \(counts.succeeded.count) ok, \(counts.failed.count) failed at the server, "
        + "\(counts.unauthorized) 401, tokens \(counts.issued.sorted { $0.key < $1.key }), longest send "
        + String(format: "%.3f s", longest) + ", breaker \(transitions.withLock { $0 })")

    // No send outlives its deadline.
    let bound = Double(Self.deadline.components.attoseconds) / 1e18 + Double(Self.deadline.components.seconds)
    #expect(longest <= bound + Self.slack, "a send took \(longest) s")
    #expect(sends.contains { $0.outcome.contains("deadline") }, "the slow span cut sends at their deadline")

    // Each token expiry is refreshed exactly once, however many requests it refused.
    #expect(counts.issued.values.allSatisfy { $0 == 1 }, "\(counts.issued)")
    #expect(counts.issued.count >= 4, "\(counts.issued)")
    #expect(counts.unauthorized >= counts.issued.count - 1)

    // The breaker stops the traffic to the failing server within its window: it opens less than
    // a window (1 s) after the failures begin (a ratio over the window: the successes before them
    // count too, so with a busy server that takes as many failures as there were successes in
    // the window before); from then on the failures that reach the server are the probes, and
    // the calls each short closed spell lets through before the ratio opens it again.
    let changes = transitions.withLock { $0 }
    let opened = changes.first { if case .open = $0.1 { true } else { false } }?.0 ?? .infinity
    #expect(opened <= 1.5 + 1.0 + Self.slack, "opened at \(opened) s")
    let halfOpenings = changes.filter { $0.1 == .halfOpen }.count
    let afterOpening = counts.failed.filter { $0 > opened + 0.05 }
    #expect(
      afterOpening.count <= halfOpenings * (1 + 5 + Self.callers),
      "\(afterOpening.count) failures after it opened, \(halfOpenings) half-openings, of \(counts.failed.count)")
    // And lets it back through its probes: closed for good within a cool-down (and slack) of the
    // end of the failing span, and the server answering again.
    let lastChange = changes.last
    #expect(lastChange?.1 == .closed, "\(changes)")
    #expect(
      (lastChange?.0 ?? .infinity) <= 3.0 + 0.5 + Self.slack, "closed for good at \(lastChange?.0 ?? .infinity) s")
    #expect(counts.succeeded.contains { $0 >= 3.0 && $0 < 3.0 + 0.5 + Self.slack })
  }
}
#endif
