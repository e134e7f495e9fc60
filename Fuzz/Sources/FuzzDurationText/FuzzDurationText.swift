import PaceMarbles

/// libFuzzer entry point: any bytes, as text, through `DurationText.parse`. A duration must read
/// back from its own spelling; an error must be one short line. Anything else traps, which
/// libFuzzer reports with the input that did it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDurationText(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
  do {
    let duration = try DurationText.parse(text)
    precondition(duration >= .zero && duration <= DurationText.maximum, "out of range: \(duration)")
    precondition((try? DurationText.parse(DurationText.format(duration))) == duration, "no round trip")
  } catch {
    let message = error.description
    precondition(!message.contains("\n") && message.unicodeScalars.count < 400, "bad message: \(message)")
  }
  return 0
}
