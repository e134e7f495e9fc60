#if PostgreSQL && Hummingbird
import Foundation
import Logging
import Pace
import PaceHTTPServer
@testable import PacePostgres
import PostgresNIO
import Testing

/// A shared limit of one place, in memory, that records the keys it is asked for.
final class OnePlaceSharedLimiter: SharedConcurrencyLimiter {
  final class Permit: SharedConcurrencyPermit {
    let priority: AdmissionPriority
    let limiter: OnePlaceSharedLimiter

    init(_ priority: AdmissionPriority, limiter: OnePlaceSharedLimiter) {
      self.priority = priority
      self.limiter = limiter
    }

    func release() { limiter.state.withLock { $0.held -= 1 } }
  }

  let state = LockedState((held: 0, keys: [String]()))
  let failure: (any Error & Sendable)?
  var maximumInFlight: Int { 1 }
  var inFlightCount: Int { state.withLock { $0.held } }
  var keys: [String] { state.withLock { $0.keys } }

  init(failure: (any Error & Sendable)? = nil) {
    self.failure = failure
  }

  func acquire(_ key: String, priority: AdmissionPriority) async throws -> Permit {
    let admitted = state.withLock { state in
      state.keys.append(key)
      guard state.held == 0 else { return false }
      state.held += 1
      return true
    }
    if let failure { throw failure }
    guard admitted else { throw ConcurrencyLimiterError.queueFull(maximumQueued: 0, waited: .zero) }
    return Permit(priority, limiter: self)
  }
}

/// `RequestConcurrencyLimit` over a shared limiter: the key it asks for, the place held until the
/// response is written, a refusal or a failure answered `503`.
@Suite("A shared concurrency limit in the middleware")
struct SharedConcurrencyMiddlewareTests {
  static func status(_ admission: ConcurrencyAdmission) -> Int? {
    if case .refused(let response) = admission { return response.status }
    return nil
  }

  static func permit(_ admission: ConcurrencyAdmission) -> RequestPermit? {
    if case .admitted(let permit) = admission { return permit }
    return nil
  }

  @Test func oneLimitForTheFleetByDefaultHeldUntilTheResponseIsWritten() async throws {
    let limiter = OnePlaceSharedLimiter()
    let limit = RequestConcurrencyLimit<String>("uploads", limiter: limiter)
    let first = try await limit.admit("a", clientKey: { "ip:1" }, shadowMode: nil)
    let held = try #require(Self.permit(first))
    #expect(limit.inFlightCount == 1)
    #expect(Self.status(try await limit.admit("b", clientKey: { "ip:2" }, shadowMode: nil)) == 503)
    held.release(.written(status: 200))
    held.release(.written(status: 200))  // once
    #expect(limiter.inFlightCount == 0)
    #expect(limiter.keys == ["uploads", "uploads"])
    let again = try #require(Self.permit(try await limit.admit("c", clientKey: { nil }, shadowMode: nil)))
    again.release(.abandoned)
  }

  @Test func aKeyPerRequestLongKeysHashedNoKeyNoPlace() async throws {
    let limiter = OnePlaceSharedLimiter()
    let limit = RequestConcurrencyLimit<String>(limiter: limiter, key: { $0 == "none" ? nil : $0 })
    let long = String(repeating: "k", count: InputRules.maximumKeyBytes + 1)
    let permit = try #require(Self.permit(try await limit.admit(long, clientKey: { nil }, shadowMode: nil)))
    #expect(limiter.keys.first?.hasPrefix("sha256:") == true)
    let unkeyed = try await limit.admit("none", clientKey: { nil }, shadowMode: nil)
    #expect(Self.permit(unkeyed) == nil && Self.status(unkeyed) == nil)  // admitted without a place
    permit.release(.written(status: 200))
  }

  @Test func aFailingSharedLimiterIsA503() async throws {
    let limit = RequestConcurrencyLimit<String>(
      limiter: OnePlaceSharedLimiter(failure: PacePostgresError.unavailable(reason: "test")))
    #expect(Self.status(try await limit.admit("a", clientKey: { nil }, shadowMode: nil)) == 503)
  }

  /// Two instances' middlewares over one PostgreSQL table with a limit of one: the second waits
  /// for nothing and is refused while the first's response is being written.
  @Test func twoInstancesShareOnePlaceInPostgreSQL() async throws {
    try await TestDatabase.withClients(2) { clients in
      let table = TestDatabase.uniqueTable("leases")
      let limiters = try clients.map { client in
        try PostgresConcurrencyLimiter(client: client, table: table, maximumInFlight: 1, timeout: .seconds(30))
      }
      try await limiters[0].migrate()
      let limits = limiters.map { RequestConcurrencyLimit<String>("api", limiter: $0) }
      let first = try #require(Self.permit(try await limits[0].admit("a", clientKey: { nil }, shadowMode: nil)))
      #expect(Self.status(try await limits[1].admit("b", clientKey: { nil }, shadowMode: nil)) == 503)
      first.release(.written(status: 200))
      // The lease is deleted in the background: the place comes back once it is.
      var admitted: RequestPermit?
      for _ in 0..<200 where admitted == nil {
        admitted = Self.permit(try await limits[1].admit("b", clientKey: { nil }, shadowMode: nil))
        if admitted == nil { try await Task.sleep(for: .milliseconds(10)) }  // real-time: the delete is a round trip
      }
      let second = try #require(admitted)
      second.release(.written(status: 200))
    }
  }
}
#endif
