extension AsyncSequence {
  /// Paces the elements through `limiter`: each element waits for `cost(element)` permits
  /// before it is returned.
  ///
  /// ```swift
  /// let limiter = RateLimiter(permits: 5, per: .seconds(1))
  /// for await request in requests.rateLimited(by: limiter) { try await send(request) }
  /// ```
  ///
  /// The base sequence is read on demand: an element is read, then waits for its permits, then
  /// is returned. If the consuming task is cancelled while an element waits, the element is
  /// dropped and the sequence ends; the element takes no permit, unless it costs more than the
  /// burst, whose earlier parts keep the permits they took.
  ///
  /// An element that costs more than the limiter's burst takes its permits in parts of at most
  /// the burst, one after another, and is returned once the last part is granted: so the
  /// long-run rate holds for any element size (a big chunk of bytes, for instance), under every
  /// policy.
  ///
  /// - Parameters:
  ///   - limiter: The rate limiter; it may be shared with other code, which then shares its rate.
  ///   - cost: How many permits an element takes; 1 by default. Not negative.
  /// - Returns: The rate-limited sequence.
  public func rateLimited(
    by limiter: RateLimiter, cost: @escaping @Sendable (Element) -> Int = { _ in 1 }
  ) -> AsyncRateLimitedSequence<Self> {
    AsyncRateLimitedSequence(base: self, limiter: limiter, cost: cost)
  }

  /// Paces the elements under `limit`, through a ``RateLimiter`` of their own that every iterator
  /// of the returned sequence shares.
  ///
  /// ```swift
  /// for await upload in uploads.rateLimited(to: .slidingWindow(permits: 3, per: .seconds(10))) {
  ///   try await send(upload)   // at most 3 in any 10 s
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - limit: The limit and its policy.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  ///   - cost: How many permits an element takes; 1 by default. Not negative. An element that
  ///     costs more than the burst takes its permits in parts, as
  ///     ``rateLimited(by:cost:)`` says.
  /// - Returns: The rate-limited sequence.
  public func rateLimited<C: Clock>(
    to limit: RateLimit, clock: C = ContinuousClock(), cost: @escaping @Sendable (Element) -> Int = { _ in 1 }
  ) -> AsyncRateLimitedSequence<Self> where C.Duration == Duration {
    rateLimited(by: RateLimiter(limit: limit, clock: clock), cost: cost)
  }
}

extension AsyncSequence where Element: Collection & Sendable, Element.Element == UInt8 {
  /// Limits a sequence of byte chunks to `bytesPerSecond`: each chunk waits until its bytes fit
  /// in the budget, like the bandwidth throttle of a download or an upload.
  ///
  /// ```swift
  /// for try await chunk in file.chunks.rateLimited(bytesPerSecond: 64 * 1024) {
  ///   try await socket.write(chunk)   // 64 KiB a second on average
  /// }
  /// ```
  ///
  /// The first `burst` bytes pass at once; after that bytes are granted at the steady rate.
  /// Chunks are never split: a chunk larger than the burst takes its bytes in parts of at most
  /// the burst and passes once the last part is granted, so the average rate holds. The iterators
  /// of the returned sequence share one budget.
  ///
  /// - Parameters:
  ///   - bytesPerSecond: The rate. Positive.
  ///   - burst: How many bytes may pass at once after a quiet period; `bytesPerSecond` by default.
  ///   - clock: The clock that measures time: `ContinuousClock` by default, or a ``TestScheduler``.
  /// - Returns: The rate-limited sequence.
  public func rateLimited<C: Clock>(
    bytesPerSecond: Int, burst: Int? = nil, clock: C = ContinuousClock()
  ) -> AsyncRateLimitedSequence<Self> where C.Duration == Duration {
    rateLimited(by: RateLimiter(permits: bytesPerSecond, per: .seconds(1), burst: burst, clock: clock)) { $0.count }
  }
}

/// An asynchronous sequence whose elements wait for permits of a ``RateLimiter``; made by
/// ``_Concurrency/AsyncSequence/rateLimited(by:cost:)``,
/// ``_Concurrency/AsyncSequence/rateLimited(to:clock:cost:)`` and
/// ``_Concurrency/AsyncSequence/rateLimited(bytesPerSecond:burst:clock:)``.
public struct AsyncRateLimitedSequence<Base: AsyncSequence>: AsyncSequence {
  /// The base sequence's element.
  public typealias Element = Base.Element

  let base: Base
  let limiter: RateLimiter
  let cost: @Sendable (Element) -> Int

  /// Makes an iterator over the base sequence's elements, each returned once its permits are granted.
  public func makeAsyncIterator() -> Iterator {
    Iterator(base: base.makeAsyncIterator(), limiter: limiter, cost: cost)
  }

  /// The iterator of a rate-limited sequence.
  public struct Iterator: AsyncIteratorProtocol {
    var base: Base.AsyncIterator
    let limiter: RateLimiter
    let cost: @Sendable (Element) -> Int

    /// The next element, once its permits are granted; `nil` at the end of the base sequence or
    /// when the task is cancelled. Throws the base sequence's error.
    public mutating func next() async rethrows -> Element? {
      guard let element = try await base.next() else { return nil }
      var cost = cost(element)
      precondition(cost >= 0, "rateLimited: a cost must not be negative (got \(cost))")
      do {
        // Above the burst, in parts the limiter can grant, so that the long-run rate holds.
        let burst = limiter.limit.burst
        while cost > burst {
          try await limiter.acquire(cost: burst)
          cost -= burst
        }
        try await limiter.acquire(cost: cost)
      } catch {
        return nil  // cancelled: the element is dropped
      }
      return element
    }
  }
}

extension AsyncRateLimitedSequence: Sendable where Base: Sendable {}

@available(*, unavailable)
extension AsyncRateLimitedSequence.Iterator: Sendable {}
