import Foundation
import Testing

@testable import PaceHTTPClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The URLSession glue's own decisions: the key, what may be sent twice, which errors are a
/// connection's, and the head it reads. (Its requests, end to end against real servers, are
/// PaceServerTests' PacedClientProofTests and PacedClientRetryTests.)
@Suite struct URLSessionPacingTests {
  @Test func theKeyIsTheOrigin() {
    #expect(
      URLSession.pacingKey(for: URL(string: "https://API.example.com/v1/items?page=2")) == "https://api.example.com")
    #expect(URLSession.pacingKey(for: URL(string: "https://api.example.com:443/")) == "https://api.example.com")
    #expect(URLSession.pacingKey(for: URL(string: "http://127.0.0.1:8080/")) == "http://127.0.0.1:8080")
    #expect(URLSession.pacingKey(for: URL(string: "file:///tmp/a")) == "")
    #expect(URLSession.pacingKey(for: nil) == "")
  }

  /// The public form: an origin for any URL with a scheme and a host, `nil` for the rest.
  @Test func aURLsOriginKey() {
    #expect(
      PacedRequests.originKey(for: URL(string: "HTTPS://API.example.com:443/v1?page=2")!) == "https://api.example.com")
    #expect(PacedRequests.originKey(for: URL(string: "http://[::1]:8080/x")!) == "http://[::1]:8080")
    #expect(PacedRequests.originKey(for: URL(string: "wss://example.com:444")!) == "wss://example.com:444")
    #expect(PacedRequests.originKey(for: URL(string: "file:///tmp/a")!) == nil)
    #expect(PacedRequests.originKey(for: URL(string: "/relative/path")!) == nil)
    // An IPv6 address keeps its brackets, whether the host came with them or not.
    #expect(PacedRequests.originKey(scheme: "http", host: "::1", port: 8080) == "http://[::1]:8080")
    #expect(PacedRequests.originKey(scheme: "https", host: "[FE80::1]", port: 443) == "https://[fe80::1]")
  }

  @Test func idempotentMethodsMayBeSentTwice() {
    var request = URLRequest(url: URL(string: "https://api.example.com/")!)
    #expect(URLSession.mayBeSentTwice(request, idempotent: nil))  // GET by default
    for method in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "get", "Put"] {
      request.httpMethod = method
      #expect(URLSession.mayBeSentTwice(request, idempotent: nil), "\(method)")
    }
    for method in ["POST", "PATCH", "CONNECT", "BREW"] {
      request.httpMethod = method
      #expect(!URLSession.mayBeSentTwice(request, idempotent: nil), "\(method)")
    }
    // Said explicitly: a POST with an idempotency key, a GET with side effects.
    request.httpMethod = "POST"
    #expect(URLSession.mayBeSentTwice(request, idempotent: true))
    request.httpMethod = "GET"
    #expect(!URLSession.mayBeSentTwice(request, idempotent: false))
    // A body stream is read once: never sent twice, whatever the caller says.
    request.httpMethod = "PUT"
    request.httpBodyStream = InputStream(data: Data("body".utf8))
    #expect(!URLSession.mayBeSentTwice(request, idempotent: nil))
    #expect(!URLSession.mayBeSentTwice(request, idempotent: true))
  }

  @Test func connectionErrorsAreTheTransientURLErrors() {
    for code: URLError.Code in [
      .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .networkConnectionLost, .notConnectedToInternet,
      .timedOut, .cannotParseResponse, .unknown,
    ] {
      #expect(URLSession.isConnectionError(URLError(code)), "\(code)")
    }
    for code: URLError.Code in [.badURL, .cancelled, .userAuthenticationRequired, .badServerResponse, .unsupportedURL] {
      #expect(!URLSession.isConnectionError(URLError(code)), "\(code)")
    }
    #expect(!URLSession.isConnectionError(CancellationError()))
  }

  @Test func theHeadHasTheStatusAndEveryField() throws {
    let url = URL(string: "https://api.example.com/")!
    let response = try #require(
      HTTPURLResponse(
        url: url, statusCode: 429, httpVersion: "HTTP/1.1",
        headerFields: ["Retry-After": "3", "RateLimit-Policy": "\"default\";q=10;w=60"]))
    let head = URLSession.head(of: response)
    #expect(head.status == 429)
    #expect(head["retry-after"] == "3")
    #expect(head["RateLimit-Policy"] == "\"default\";q=10;w=60")
    // Not HTTP's (a file's): a success that says nothing.
    let file = URLSession.head(
      of: URLResponse(url: url, mimeType: nil, expectedContentLength: 0, textEncodingName: nil))
    #expect(file.status == 200 && file.headerFields.isEmpty)
  }
}
