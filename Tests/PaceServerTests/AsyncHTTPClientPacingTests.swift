#if AsyncHTTPClient
import AsyncHTTPClient
import NIOCore
import Testing

@testable import PaceAsyncHTTPClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The AsyncHTTPClient glue's own decisions: the key and which errors are a connection's. (Its
/// requests, end to end against real servers, are PacedClientProofTests and PacedClientRetryTests;
/// the latter meets `NIOConnectionError`, which only NIO makes, on a refused connection.)
@Suite struct AsyncHTTPClientPacingTests {
  @Test func theKeyIsTheOrigin() {
    #expect(HTTPClient.pacingKey(for: "https://API.example.com/v1/items?page=2") == "https://api.example.com")
    #expect(HTTPClient.pacingKey(for: "https://api.example.com:443") == "https://api.example.com")
    #expect(HTTPClient.pacingKey(for: "http://127.0.0.1:8080/") == "http://127.0.0.1:8080")
    #expect(HTTPClient.pacingKey(for: "http://user:secret@api.example.com:8443/x") == "http://api.example.com:8443")
    #expect(HTTPClient.pacingKey(for: "http://[::1]:8080/") == "http://[::1]:8080")
    #expect(HTTPClient.pacingKey(for: "http://[::1]/") == "http://[::1]")
    // Not an origin: the URL itself is the key (a Unix socket's URL, garbage).
    #expect(HTTPClient.pacingKey(for: "unix:///tmp/socket") == "unix:///tmp/socket")
    #expect(HTTPClient.pacingKey(for: "http://host:99999/") == "http://host:99999/")
    #expect(HTTPClient.pacingKey(for: "http://host:port/") == "http://host:port/")
    #expect(HTTPClient.pacingKey(for: "") == "")
  }

  @Test func connectionErrorsAreTheTransientOnes() {
    let transient: [any Error] = [
      HTTPClientError.connectTimeout, HTTPClientError.remoteConnectionClosed, HTTPClientError.readTimeout,
      HTTPClientError.getConnectionFromPoolTimeout, ChannelError.connectTimeout(.seconds(1)), ChannelError.eof,
      ChannelError.ioOnClosedChannel, IOError(errnoCode: ECONNREFUSED, reason: "connect"),
      IOError(errnoCode: ECONNRESET, reason: "read"),
    ]
    for error in transient { #expect(HTTPClient.isConnectionError(error), "\(error)") }
    let final: [any Error] = [
      HTTPClientError.invalidURL, HTTPClientError.cancelled, HTTPClientError.deadlineExceeded,
      HTTPClientError.bodyLengthMismatch, ChannelError.alreadyClosed, IOError(errnoCode: EACCES, reason: "open"),
      CancellationError(),
    ]
    for error in final { #expect(!HTTPClient.isConnectionError(error), "\(error)") }
  }
}
#endif
