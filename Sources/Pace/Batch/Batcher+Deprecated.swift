// The initialisers of Pace 0.3.0, whose labels the glossary spells out ("maximum" + noun).

extension Batcher where Item: Hashable {
  /// A batcher sending with `send`, which returns each item's output.
  @available(
    *, deprecated,
    renamed: "init(maximumCount:maximumWait:maximumInFlight:bufferCapacity:overflow:clock:onFailure:send:)"
  )
  @inlinable
  public convenience init<C: Clock>(
    maxCount: Int, maxWait: Duration, maxInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    send: @escaping @Sendable ([Item]) async throws -> [Item: Output]
  ) where C.Duration == Duration {
    self.init(
      maximumCount: maxCount, maximumWait: maxWait, maximumInFlight: maxInFlight, bufferCapacity: bufferCapacity,
      overflow: overflow, clock: clock, send: send)
  }
}

extension Batcher where Item: Hashable, Output == Void {
  /// A batcher for items that have no output: `send` delivers a batch or throws.
  @available(
    *, deprecated,
    renamed: "init(maximumCount:maximumWait:maximumInFlight:bufferCapacity:overflow:clock:onFailure:send:)"
  )
  @inlinable
  public convenience init<C: Clock>(
    maxCount: Int, maxWait: Duration, maxInFlight: Int = 1, bufferCapacity: Int = 10_000,
    overflow: BatchOverflow = .suspend, clock: C = ContinuousClock(),
    send: @escaping @Sendable ([Item]) async throws -> Void
  ) where C.Duration == Duration {
    self.init(
      maximumCount: maxCount, maximumWait: maxWait, maximumInFlight: maxInFlight, bufferCapacity: bufferCapacity,
      overflow: overflow, clock: clock, send: send)
  }
}
