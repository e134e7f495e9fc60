// A server's client of a rate-limited API on AsyncHTTPClient (Pace's AsyncHTTPClient trait):
// callers at once, every request paced by what the server says (its RateLimit, RateLimit-Policy,
// X-RateLimit-* and Retry-After fields) and retried within a budget, so that it stays under the
// limit instead of collecting 429s.
//
//   swift run pace-example-server --permits 20 --per 1                 # in another terminal
//   swift run pace-example-client-asynchttpclient --requests 100 http://127.0.0.1:8080/
import ArgumentParser
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import PaceAsyncHTTPClient
import PaceHTTPClient

@main
struct PaceExampleClientAsyncHTTPClient: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pace-example-client-asynchttpclient",
    abstract: "GET a URL many times at once through AsyncHTTPClient, paced by what the server says.")

  @Argument(help: "The URL to GET.")
  var url = "http://127.0.0.1:8080/"

  @Option(help: "How many requests to send.")
  var requests = 100

  @Option(help: "How many callers send at once.")
  var callers = 16

  mutating func validate() throws {
    guard requests > 0, callers > 0 else { throw ValidationError("--requests and --callers take positive numbers") }
  }

  func run() async throws {
    // One per service (or per API): it holds each origin's requests to what its server allows.
    let paced = PacedRequests()
    let request = HTTPClientRequest(url: url)
    let clock = ContinuousClock()
    let start = clock.now
    var statuses: [UInt: Int] = [:]
    try await withThrowingTaskGroup(of: UInt.self) { group in
      var started = 0
      // `callers` requests in flight; a new one as each ends.
      while started < min(callers, requests) {
        group.addTask { try await Self.status(of: request, pacedBy: paced) }
        started += 1
      }
      while let status = try await group.next() {
        statuses[status, default: 0] += 1
        if started < requests {
          group.addTask { try await Self.status(of: request, pacedBy: paced) }
          started += 1
        }
      }
    }
    print("\(requests) requests in \(start.duration(to: clock.now))")
    for (status, count) in statuses.sorted(by: { $0.key < $1.key }) { print("  \(status): \(count)") }
  }

  static func status(of request: HTTPClientRequest, pacedBy paced: PacedRequests) async throws -> UInt {
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30), pacedBy: paced)
    // Read the body, so that the connection goes back to the pool.
    _ = try await response.body.collect(upTo: 1 << 20)
    return response.status.code
  }
}
