extension Fuser {
  /// A fuser over an `AsyncSequence`: each connection iterates the sequence in its own task and
  /// dispatches the elements in order; disposing the connection cancels the task.
  ///
  /// ```swift
  /// let prices = Fuser.fromSequence(priceUpdates)   // any AsyncSequence & Sendable
  /// ```
  ///
  /// The source ends when the sequence ends or throws; a thrown error is not dispatched (turn
  /// errors into events inside the sequence if they matter). Each connection makes its own
  /// iterator, so the sequence must support several iterations if the fuser is connected more
  /// than once (an `AsyncStream` supports one).
  ///
  /// - Parameter sequence: The events.
  public static func fromSequence<Events: AsyncSequence & Sendable>(_ sequence: Events) -> Fuser<Event>
  where Events.Element == Event {
    Fuser { dispatch in
      let task = Task {
        do {
          for try await event in sequence {
            dispatch(event)
          }
        } catch {
          // Documented: an error ends the source.
        }
      }
      return AnyDisposable { task.cancel() }
    }
  }
}

extension Fuser where Event: Sendable {
  /// The reverse bridge: this fuser's events as an `AsyncStream`.
  ///
  /// ```swift
  /// for await event in events.stream() {
  ///   await handle(event)
  /// }
  /// ```
  ///
  /// Each call makes a new connection at once, so events produced before iteration starts are
  /// buffered by `bufferingPolicy`. The connection is disposed when the stream terminates: when
  /// the consuming task is cancelled, or when the stream and its iterators are released (leaving
  /// a `for await` loop early releases its iterator, but not the stream).
  ///
  /// - Parameter bufferingPolicy: What to keep while the consumer is behind; unbounded by default.
  /// - Returns: A stream of the events, in order.
  public func stream(
    bufferingPolicy: AsyncStream<Event>.Continuation.BufferingPolicy = .unbounded
  ) -> AsyncStream<Event> {
    AsyncStream(Event.self, bufferingPolicy: bufferingPolicy) { continuation in
      let connection = connect { event in continuation.yield(event) }
      continuation.onTermination = { _ in connection.dispose() }
    }
  }
}
