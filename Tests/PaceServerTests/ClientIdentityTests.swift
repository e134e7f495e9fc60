import Pace
import PaceHTTPServer
import PaceTestSupport
import Testing

// No trait needed: the client-address parser, the proxy walk, SHA-256 and long keys are plain
// Swift in PaceHTTP, checked by every `swift test`.

@Suite("SHA-256 against the FIPS 180-4 and NIST examples")
struct SHA256Tests {
  @Test(arguments: [
    ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    ),
    (
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
    ),
    ("é🙂", "7382f537af6a53054b6a72792df00fa0be0f5d2e8214db9cd6ebbcc3d57d02b9"),
  ])
  func nistExamples(message: String, digest: String) {
    #expect(SHA256.hex(message) == digest)
  }

  /// Around the padding's edges: 55 bytes fit one block with the length, 56 need a second.
  @Test(arguments: [
    (55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
    (56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
    (63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"),
    (64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
    (65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"),
    (119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"),
  ])
  func paddingEdges(count: Int, digest: String) {
    #expect(SHA256.hex(String(repeating: "a", count: count)) == digest)
  }

  @Test func aMillionAs() async {
    let digest = await offTheCooperativePool { SHA256.hex(String(repeating: "a", count: 1_000_000)) }
    #expect(digest == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
  }
}

@Suite("Long keys: hashed, or refused")
struct LongKeyTests {
  @Test func aKeyOverTheLimitIsHashedWithAPrefix() {
    let long = String(repeating: "x", count: 1025)
    #expect(
      LongKeyHandling.hash.limiterKey(for: long)
        == "sha256:c6d8e9905300876046729949cc95c2385221270d389176f7234fe7ac00c4e430")
    #expect(
      LongKeyHandling.hash.limiterKey(for: String(repeating: "x", count: 1024)) == String(repeating: "x", count: 1024))
    #expect(LongKeyHandling.refuse.limiterKey(for: long) == long)
  }

  /// A short key cannot be the hashed form of a long one: keys that start with the prefix are
  /// hashed too.
  @Test func aShortKeyCannotImpersonateALongOne() {
    let long = String(repeating: "x", count: 1025)
    let impersonation = LongKeyHandling.hash.limiterKey(for: long)
    #expect(LongKeyHandling.hash.limiterKey(for: impersonation) != impersonation)
    #expect(
      LongKeyHandling.hash.limiterKey(for: "sha256:abc")
        == "sha256:67e9bc3cfd2163c2978358dfe00d2f912cd4ee0c99f077c3583b39b48aebb124")
  }

  /// Empty keys and keys with NUL are the limiter's to refuse, whatever their length.
  @Test func invalidKeysAreLeftForTheLimiter() {
    #expect(LongKeyHandling.hash.limiterKey(for: "") == "")
    let withNUL = "a\u{0}" + String(repeating: "x", count: 2000)
    #expect(LongKeyHandling.hash.limiterKey(for: withNUL) == withNUL)
  }
}

@Suite("IP addresses and ranges from hostile text")
struct IPAddressTests {
  @Test(arguments: [
    ("192.0.2.1", "192.0.2.1"), (" 192.0.2.1 ", "192.0.2.1"), ("192.0.2.1:443", "192.0.2.1"),
    ("0.0.0.0", "0.0.0.0"), ("255.255.255.255", "255.255.255.255"),
    ("2001:db8::1", "2001:db8::1"), ("2001:DB8:0:0:0:0:0:1", "2001:db8::1"), ("[2001:db8::1]:8080", "2001:db8::1"),
    ("[2001:db8::1]", "2001:db8::1"), ("::1", "::1"), ("0:0:0:0:0:0:0:1", "::1"), ("::", "::"),
    ("fe80::1%eth0", "fe80::1"), ("[fe80::1%25en0]:1", "fe80::1"), ("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"),
    ("::ffff:1.2.3.4", "1.2.3.4"), ("::FFFF:102:304", "1.2.3.4"), ("[::ffff:1.2.3.4]:99", "1.2.3.4"),
    ("64:ff9b::192.0.2.33", "64:ff9b::c000:221"), ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
    ("2001:0:0:1:0:0:0:1", "2001:0:0:1::1"), ("1:0:2:0:3:0:4:0", "1:0:2:0:3:0:4:0"),
  ])
  func parses(text: String, canonical: String) {
    #expect(IPAddress(text)?.description == canonical, "\(text)")
  }

  @Test(arguments: [
    "", " ", "unknown", "_hidden", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4:", "1.2.3.4:123456",
    "1.2.3.4:port", ":::", "1:::2", "1::2::3", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "12345::", ":1::", "1:",
    "[::1", "[::1]x", "[1.2.3.4]", "::1%", "%eth0", "g::1", "1.2.3.4::", "::1.2.3.4:5", "1:2:3:4:5:6:7:1.2.3.4",
    "１.２.３.４", "1.2.3.4\u{0}", "1.2.3.4\u{301}", String(repeating: "1", count: 10_000),
  ])
  func refuses(text: String) {
    #expect(IPAddress(text) == nil, "\(text.debugDescription)")
  }

  @Test func masksToAPrefix() {
    let address = IPAddress("2001:db8:1:2:aaaa:bbbb:cccc:dddd")!
    #expect(address.masked(prefixLength: 64).description == "2001:db8:1:2::")
    #expect(address.masked(prefixLength: 56).description == "2001:db8:1::")
    #expect(address.masked(prefixLength: 0).description == "::")
    #expect(IPAddress("203.0.113.77")!.masked(prefixLength: 24).description == "203.0.113.0")
    #expect(IPAddress("203.0.113.77")!.masked(prefixLength: 29).description == "203.0.113.72")
  }

  @Test func rangesContainTheirAddresses() {
    let private10 = IPAddressRange("10.0.0.0/8")!
    #expect(private10.contains(IPAddress("10.255.1.2")!))
    #expect(!private10.contains(IPAddress("11.0.0.1")!))
    #expect(private10.contains(IPAddress("::ffff:10.1.1.1")!))  // mapped is the IPv4 address
    #expect(!private10.contains(IPAddress("::a01:101")!))  // an IPv6 address, not mapped
    let v6 = IPAddressRange("2001:db8::/32")!
    #expect(v6.contains(IPAddress("2001:db8:ffff::1")!) && !v6.contains(IPAddress("2001:db9::1")!))
    #expect(IPAddressRange("10.1.2.3/8")?.description == "10.0.0.0/8")  // host bits cleared
    #expect(IPAddressRange("10.0.0.2")?.description == "10.0.0.2")
    #expect(IPAddressRange("::ffff:10.0.0.0/104")?.description == "10.0.0.0/8")
    #expect(IPAddressRange("0.0.0.0/0")!.contains(IPAddress("8.8.8.8")!))
    for text in [
      "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8/8", "x/8", "[::1]/128", "10.0.0.0/+8",
      "::ffff:10.0.0.0/95", "10.0.0.0/0008",
    ] {
      #expect(IPAddressRange(text) == nil, "\(text)")
    }
  }
}

@Suite("Client addresses through trusted proxies")
struct ClientAddressRuleTests {
  func rule(_ proxies: [String], header: ForwardingHeader = .xForwardedFor, v4: Int = 32, v6: Int = 64)
    -> ClientAddressRule
  {
    ClientAddressRule(
      trustedProxies: proxies.compactMap { IPAddressRange($0) }, header: header, ipv4PrefixLength: v4,
      ipv6PrefixLength: v6)
  }

  func client(_ rule: ClientAddressRule, peer: String, _ values: [String]) -> String {
    rule.key(for: rule.clientAddress(peer: IPAddress(peer), values: values))
  }

  @Test func ipv6ClientsAreKeyedByTheirSlash64() {
    let peer = rule([])
    #expect(client(peer, peer: "2001:db8:1:2::1", []) == "ip:2001:db8:1:2::/64")
    #expect(client(peer, peer: "2001:db8:1:2:ffff:ffff:ffff:ffff", []) == "ip:2001:db8:1:2::/64")
    #expect(client(peer, peer: "2001:db8:1:3::1", []) == "ip:2001:db8:1:3::/64")
    #expect(client(peer, peer: "192.0.2.1", []) == "ip:192.0.2.1")
    #expect(client(peer, peer: "::ffff:192.0.2.1", []) == "ip:192.0.2.1")
    #expect(client(rule([], v4: 24, v6: 128), peer: "192.0.2.1", []) == "ip:192.0.2.0/24")
    #expect(client(rule([], v4: 24, v6: 128), peer: "2001:db8::1", []) == "ip:2001:db8::1")
    #expect(client(rule([], v6: 48), peer: "2001:db8:1:2::1", []) == "ip:2001:db8:1::/48")
    #expect(rule([]).key(for: nil) == "ip:unknown")
  }

  @Test func forwardedForIsReadFromTheRightPastTrustedRanges() {
    let proxies = rule(["10.0.0.0/8", "fd00::/8"])
    #expect(client(proxies, peer: "10.1.2.3", ["6.6.6.6, 198.51.100.1"]) == "ip:198.51.100.1")
    #expect(client(proxies, peer: "10.1.2.3", ["6.6.6.6", "198.51.100.1, 10.9.9.9, fd00::1"]) == "ip:198.51.100.1")
    #expect(client(proxies, peer: "fd12::7", ["2001:db8:5:6::9"]) == "ip:2001:db8:5:6::/64")
    // From anyone else, the header is the client's own words.
    #expect(client(proxies, peer: "203.0.113.7", ["198.51.100.1"]) == "ip:203.0.113.7")
    // Nonsense, or nothing, from a trusted proxy: the proxy.
    #expect(client(proxies, peer: "10.1.2.3", ["evil"]) == "ip:10.1.2.3")
    #expect(client(proxies, peer: "10.1.2.3", ["1.2.3.4, evil"]) == "ip:10.1.2.3")
    #expect(client(proxies, peer: "10.1.2.3", []) == "ip:10.1.2.3")
    #expect(client(proxies, peer: "10.1.2.3", [""]) == "ip:10.1.2.3")
    // Only trusted proxies: the leftmost.
    #expect(client(proxies, peer: "10.1.2.3", ["10.0.0.9, 10.0.0.8"]) == "ip:10.0.0.9")
    // Ports and brackets, as proxies write them.
    #expect(client(proxies, peer: "10.1.2.3", ["[2001:db8::1]:443"]) == "ip:2001:db8::/64")
  }

  @Test func forwardedIsReadFromItsForParameters() {
    let proxies = rule(["10.0.0.0/8"], header: .forwarded)
    #expect(
      client(proxies, peer: "10.0.0.1", [#"for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https"#])
        == "ip:2001:db8:cafe::/64")
    #expect(client(proxies, peer: "10.0.0.1", ["for=198.51.100.2;by=10.0.0.1, FOR=10.0.0.5"]) == "ip:198.51.100.2")
    #expect(client(proxies, peer: "10.0.0.1", ["proto=https;for=192.0.2.60"]) == "ip:192.0.2.60")
    #expect(client(proxies, peer: "10.0.0.1", ["for=unknown"]) == "ip:10.0.0.1")
    #expect(client(proxies, peer: "10.0.0.1", ["for=_hidden"]) == "ip:10.0.0.1")
    #expect(client(proxies, peer: "10.0.0.1", ["by=10.0.0.1"]) == "ip:10.0.0.1")
  }

  /// A header of a million entries costs no more than its last ``ClientAddressRule/maximumHops``.
  @Test func aHugeChainStopsAtTheHopLimit() {
    let proxies = rule(["10.0.0.0/8"])
    let trusted = Array(repeating: "10.0.0.7", count: 100_000).joined(separator: ",")
    #expect(client(proxies, peer: "10.1.2.3", ["1.1.1.1," + trusted]) == "ip:10.0.0.7")
    let junk = String(repeating: ",", count: 1_000_000)
    #expect(client(proxies, peer: "10.1.2.3", [junk]) == "ip:10.1.2.3")
  }

  /// Any text in the header, from a trusted proxy or not: an address or the peer, never a trap.
  @Test func fuzzedHeadersNeverTrap() async {
    let failures = await offTheCooperativePool {
      var failures = Failures()
      var random = SeededGenerator(seed: 30)
      let pieces = [
        "1", "2", "0", "255", "256", "9999", ".", ":", "::", "[", "]", "%", "eth0", ",", ", ", ";", "=", "for", "\"",
        "ffff", "FFFF", "db8", "2001", "::ffff:", "1.2.3.4", "10.0.0.1", "fd00::1", " ", "\t", "\u{0}", "é", "\u{301}",
        "🙂", "/", "64", "unknown", "_x",
      ]
      let rules = [
        rule(["10.0.0.0/8", "fd00::/8"]), rule(["0.0.0.0/0", "::/0"], header: .forwarded),
        rule(["::/0", "0.0.0.0/0"], v4: 0, v6: 0),
      ]
      let peers = ["10.0.0.1", "fd00::2", "203.0.113.9", "2001:db8::9"].map { IPAddress($0)! }
      for run in 0..<fuzzRuns(20_000) {
        let text = (0..<random.next(upTo: 24)).map { _ in pieces[random.next(upTo: pieces.count)] }.joined()
        if let address = IPAddress(text) {
          // An address reads back from its own spelling.
          failures.check(IPAddress(address.description) == address, "round trip of \(text.debugDescription)")
          failures.check(address.bytes.count == 4 || address.bytes.count == 16, text.debugDescription)
        }
        _ = IPAddressRange(text)
        let rule = rules[run % rules.count]
        let peer = peers[random.next(upTo: peers.count)]
        let key = rule.key(for: rule.clientAddress(peer: peer, values: [text, text]))
        failures.check(
          key.hasPrefix("ip:") && key.utf8.count < 60, "key \(key.debugDescription) for \(text.debugDescription)")
      }
      return failures
    }
    #expect(failures.isEmpty, "\(failures)")
  }
}
