extension Fuser {
  /// One fuser over several: connecting it connects each of them, and disposing it disposes
  /// each of them once.
  ///
  /// ```swift
  /// let events: Fuser<ScreenEvent> = .fromAll(taps, swipes, keyboard)
  /// ```
  ///
  /// Events from one source stay in order; events from different sources interleave as they
  /// happen.
  ///
  /// - Parameter fusers: The sources, connected in this order.
  public static func fromAll(_ fusers: [Fuser<Event>]) -> Fuser<Event> {
    Fuser { dispatch in
      DisposableGroup(fusers.map { $0.connect(dispatch) })
    }
  }

  /// One fuser over several, listed as arguments; the same as the array form.
  ///
  /// - Parameter fusers: The sources, connected in this order.
  public static func fromAll(_ fusers: Fuser<Event>...) -> Fuser<Event> {
    fromAll(fusers)
  }

  /// A fuser that turns `source`'s events into this fuser's event type: Diffuser's `map`, the
  /// other way round.
  ///
  /// ```swift
  /// let taps: Fuser<ScreenEvent> = .extract({ _ in .retryTapped }, .fromEvents(retryButton, for: .touchUpInside))
  /// ```
  ///
  /// - Parameters:
  ///   - transform: Turns a source event into an event of this type.
  ///   - source: The source.
  public static func extract<Source>(
    _ transform: @escaping @Sendable (Source) -> Event,
    _ source: Fuser<Source>
  ) -> Fuser<Event> {
    source.map(transform)
  }

  /// A fuser whose events are this fuser's events passed through `transform`.
  ///
  /// - Parameter transform: Turns each event into the new event.
  public func map<Mapped>(_ transform: @escaping @Sendable (Event) -> Mapped) -> Fuser<Mapped> {
    Fuser<Mapped> { dispatch in
      connect { event in dispatch(transform(event)) }
    }
  }

  /// A fuser that forwards only the events for which `isIncluded` is `true`.
  ///
  /// - Parameter isIncluded: Decides whether an event goes on.
  public func filter(_ isIncluded: @escaping @Sendable (Event) -> Bool) -> Fuser<Event> {
    Fuser { dispatch in
      connect { event in
        if isIncluded(event) { dispatch(event) }
      }
    }
  }

  /// A fuser whose events are the non-`nil` results of `transform`.
  ///
  /// - Parameter transform: Turns each event into a new event, or `nil` to drop it.
  public func compactMap<Mapped>(_ transform: @escaping @Sendable (Event) -> Mapped?) -> Fuser<Mapped> {
    Fuser<Mapped> { dispatch in
      connect { event in
        if let mapped = transform(event) { dispatch(mapped) }
      }
    }
  }
}
