import PaceHTTPServer

/// libFuzzer entry point: any bytes, as text, as an address, a range and a forwarding header
/// (both kinds) from a trusted proxy. An address must read back from its own spelling; a key
/// must be short. Anything else traps, which libFuzzer reports with the input that did it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClientAddress(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
  if let address = IPAddress(text) {
    precondition(IPAddress(address.description) == address, "no round trip: \(address)")
  }
  if let range = IPAddressRange(text) {
    precondition(range.contains(range.network), "a range without its network: \(range)")
  }
  let peer = IPAddress("10.0.0.1")!
  for header in [ForwardingHeader.xForwardedFor, .forwarded] {
    let rule = ClientAddressRule(
      trustedProxies: [IPAddressRange("0.0.0.0/0")!, IPAddressRange("::/0")!], header: header, ipv4PrefixLength: 32,
      ipv6PrefixLength: 64)
    let key = rule.key(for: rule.clientAddress(peer: peer, values: [text]))
    precondition(key.hasPrefix("ip:") && key.utf8.count < 60, "bad key: \(key)")
  }
  return 0
}
