#if Hummingbird
import Foundation
import Pace
import PaceHTTPClient
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A server on loopback that cuts its first `cuts` answers (mid-head or mid-body, then closes
/// the connection) and answers the next ones whole: `200`, `hello`. Plain sockets, one thread.
final class CuttingServer: Sendable {
  enum Cut: Sendable, CaseIterable, CustomStringConvertible {
    case midHead, midBody
    var description: String { self == .midHead ? "mid-head" : "mid-body" }
  }

  let port: Int
  private let listener: Int32
  /// How many connections were answered: `LockedState` guards it.
  private let answered = LockedState(0)

  init(cuts: Int, at cut: Cut) throws {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var yes: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
        bind(listener, pointer, length) == 0 && listen(listener, 16) == 0
          && getsockname(listener, pointer, &length) == 0
      }
    }
    guard bound else { throw POSIXError(.EADDRINUSE) }
    self.listener = listener
    port = Int(UInt16(bigEndian: address.sin_port))
    let answered = answered
    Thread.detachNewThread {
      while true {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var request: [UInt8] = []
        while !request.ends(with: Array("\r\n\r\n".utf8)) {
          let count = read(connection, &buffer, buffer.count)
          guard count > 0 else { break }
          request += buffer[..<count]
        }
        let index = answered.withLock { count -> Int in
          defer { count += 1 }
          return count
        }
        let whole = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".utf8)
        let answer: [UInt8] =
          index >= cuts
          ? whole
          : cut == .midHead
            ? Array("HTTP/1.1 200 OK\r\nContent-Len".utf8)
            : Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nhello".utf8)
        _ = answer.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
        close(connection)
      }
    }
  }

  /// How many connections were answered, cut or whole.
  var connections: Int { answered.withLock { $0 } }

  func stop() {
    shutdown(listener, Int32(SHUT_RDWR))
    close(listener)
  }
}

extension Array where Element == UInt8 {
  func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

/// A connection cut mid-answer is a connection error: an idempotent request is tried again, on
/// both libraries, mid-head and mid-body (AsyncHTTPClient's body read within the attempt with
/// `collectingBodyUpTo`); a POST is not.
@Suite(.timeLimit(.minutes(1))) struct CutMidAnswerTests {
  static let fast = RetryStrategy(maximumAttempts: 3, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(10))

  /// Each library with each cut, but URLSession cut mid-head: FoundationNetworking on Linux traps
  /// on it ("Transfer completed, but there's no response"), in the test process.
  static let cases: [(ClientLibrary, CuttingServer.Cut)] = ClientLibrary.allCases.flatMap { library in
    CuttingServer.Cut.allCases.compactMap { cut in
      #if canImport(FoundationNetworking)
      if library == .urlSession, cut == .midHead { return nil }
      #endif
      return (library, cut)
    }
  }

  @Test(arguments: cases)
  func aCutAnswerIsTriedAgain(_ library: ClientLibrary, _ cut: CuttingServer.Cut) async throws {
    let server = try CuttingServer(cuts: 1, at: cut)
    defer { server.stop() }
    let body = try await Clients.with { clients in
      try await library.body(
        "GET", "http://127.0.0.1:\(server.port)/", through: PacedRequests(retry: Self.fast, budget: nil),
        client: clients)
    }
    #expect(body == "hello")
    #expect(server.connections == 2)
  }

  @Test(arguments: ClientLibrary.allCases)
  func aCutPostIsNotTriedAgain(_ library: ClientLibrary) async throws {
    let server = try CuttingServer(cuts: 1, at: .midBody)
    defer { server.stop() }
    await #expect(throws: (any Error).self) {
      try await Clients.with { clients in
        try await library.body(
          "POST", "http://127.0.0.1:\(server.port)/", through: PacedRequests(retry: Self.fast, budget: nil),
          client: clients)
      }
    }
    #expect(server.connections == 1)
  }
}
#endif
