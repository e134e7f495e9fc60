#if Hummingbird && Vapor
import Hummingbird
import PaceHummingbird
import PaceVapor
import Testing

/// The one encoder says which draft it writes, alike on every framework's middleware.
@Suite struct FieldsDraftTests {
  @Test func theEncoderSaysWhichDraftItWrites() {
    let draft = "draft-ietf-httpapi-ratelimit-headers-11"
    #expect(PaceHummingbird.RateLimitMiddleware<BasicRequestContext>.rateLimitFieldsDraft == draft)
    #expect(PaceVapor.RateLimitMiddleware.rateLimitFieldsDraft == draft)
  }
}
#endif
