import Pace

/// What happened and when: values at instants, and perhaps an end.
///
/// The runner records one of these from a primitive's output; the `pace` tool builds them from
/// traces. ``diagram(stepLength:offGrid:)`` draws it in marble notation.
///
/// ```swift
/// let timeline = MarbleTimeline([(PaceInstant(.milliseconds(300)), "c")], end: .finished(at: PaceInstant(.milliseconds(500))))
/// try timeline.diagram(stepLength: .milliseconds(100)).description   // "---c-|"
/// ```
public struct MarbleTimeline<Value> {
  /// A value at an instant.
  public struct Event {
    /// When it happened.
    public var instant: PaceInstant
    /// What it carried.
    public var value: Value

    /// `value` at `instant`.
    public init(instant: PaceInstant, value: Value) {
      self.instant = instant
      self.value = value
    }
  }

  /// How a timeline ends.
  public enum End: Hashable, Sendable {
    /// `|`: it finished at the instant.
    case finished(at: PaceInstant)
    /// `^`: it failed at the instant.
    case failed(at: PaceInstant)

    /// When it ended.
    public var instant: PaceInstant {
      switch self {
      case .finished(let instant), .failed(let instant): instant
      }
    }
  }

  /// The values in the order they happened; instants never go backwards.
  public var events: [Event]
  /// How the timeline ended, if it did.
  public var end: End?

  /// A timeline of `events`, which must be in time order.
  public init(_ events: [Event] = [], end: End? = nil) {
    self.events = events
    self.end = end
  }

  /// A timeline of `(instant, value)` pairs, which must be in time order.
  public init(_ events: [(PaceInstant, Value)], end: End? = nil) {
    self.init(events.map { Event(instant: $0.0, value: $0.1) }, end: end)
  }
}

extension MarbleTimeline: Sendable where Value: Sendable {}
extension MarbleTimeline.Event: Sendable where Value: Sendable {}
extension MarbleTimeline: Equatable where Value: Equatable {}
extension MarbleTimeline.Event: Equatable where Value: Equatable {}

/// What to do with an event that falls between two steps of the grid.
public enum OffGridHandling: Sendable, Hashable {
  /// Refuse to draw: ``MarbleRenderError/offGrid(value:instant:stepLength:)``. The default, so a
  /// diagram never hides when something really happened.
  case reject
  /// Draw the event in the step that contains it (`floor(instant / step)`): a step is then a
  /// bin of time. Order is kept, so a group holds the events of one bin in time order.
  case floor
}

/// Why a timeline cannot be drawn at a step length.
public enum MarbleRenderError: Error, Hashable, CustomStringConvertible {
  /// An event is not on the step grid (and the handling is ``OffGridHandling/reject``).
  case offGrid(value: String, instant: PaceInstant, stepLength: Duration)
  /// An event is before the origin of the diagram.
  case beforeOrigin(value: String, instant: PaceInstant)
  /// A value is empty or contains `'`, so no marble token can show it.
  case unrepresentable(value: String)
  /// The step length is zero or negative.
  case nonPositiveStepLength(Duration)
  /// An event is further from the origin than ``MarbleDiagram/maximumLength`` steps: drawing it
  /// would take more memory than a diagram is worth.
  case tooLong(value: String, instant: PaceInstant, stepLength: Duration)

  public var description: String {
    switch self {
    case .offGrid(let value, let instant, let stepLength):
      let nanos = instant.nanoseconds
      let step = stepLength.paceNanoseconds
      let below = nanos / step
      return "\(Excerpt.escaped(value, limit: Excerpt.limit)) at \(DurationText.format(instant.offset)) is not on the "
        + "\(DurationText.format(stepLength)) step grid (it falls between steps \(below) and \(below + 1)); "
        + "draw with offGrid: .floor to put it in step \(below)"
    case .beforeOrigin(let value, let instant):
      return "\(Excerpt.escaped(value, limit: Excerpt.limit)) at \(instant.nanoseconds) ns "
        + "is before the origin of the diagram"
    case .tooLong(let value, let instant, let stepLength):
      return "\(Excerpt.escaped(value, limit: Excerpt.limit)) at \(DurationText.format(instant.offset)) is more than "
        + "\(MarbleDiagram.maximumLength) steps of \(DurationText.format(stepLength)) from the origin, "
        + "the most a diagram draws: draw with a longer step length"
    case .unrepresentable(let value):
      return "the value \(Excerpt.quoted(value)) cannot be drawn: marble values are not empty and contain no '"
    case .nonPositiveStepLength(let stepLength):
      return "the step length must be longer than zero (got \(DurationText.format(stepLength)))"
    }
  }
}

extension MarbleTimeline {
  /// The timeline in marble notation: the event at instant `t` goes to step `t / stepLength`.
  ///
  /// Values are drawn with `String(describing:)`: a letter or digit as itself, anything else
  /// quoted; several events in one step form a `[group]`; the end is `|` or `^`. An event
  /// between grid lines is an error by default, or goes to the step that contains it with
  /// ``OffGridHandling/floor``. The diagram's length runs to its last event, and at most
  /// ``MarbleDiagram/maximumLength`` steps: an event further out is an error.
  ///
  /// - Parameters:
  ///   - stepLength: How long a step is.
  ///   - origin: The instant of step 0; `PaceInstant.zero` by default.
  ///   - offGrid: What to do with an event between two steps.
  public func diagram(
    stepLength: Duration, origin: PaceInstant = .zero, offGrid: OffGridHandling = .reject
  ) throws(MarbleRenderError) -> MarbleDiagram {
    let step = stepLength.paceNanoseconds
    guard step > 0 else { throw .nonPositiveStepLength(stepLength) }

    func stepIndex(of instant: PaceInstant, describing value: String) throws(MarbleRenderError) -> Int {
      let (offset, overflow) = instant.nanoseconds.subtractingReportingOverflow(origin.nanoseconds)
      guard instant >= origin else { throw .beforeOrigin(value: value, instant: instant) }
      // Checked before anything is allocated: one step per nanosecond over a year is 3e16 steps.
      guard !overflow, offset / step < MarbleDiagram.maximumLength else {
        throw .tooLong(value: value, instant: instant, stepLength: stepLength)
      }
      if offset % step != 0, offGrid == .reject {
        throw .offGrid(value: value, instant: PaceInstant(nanoseconds: offset), stepLength: stepLength)
      }
      return Int(offset / step)
    }

    var entries: [MarbleDiagram.Entry] = []
    entries.reserveCapacity(events.count + 1)
    for event in events {
      let text = String(describing: event.value)
      guard MarbleEvent.isRepresentable(text) else { throw .unrepresentable(value: text) }
      entries.append(MarbleDiagram.Entry(step: try stepIndex(of: event.instant, describing: text), event: .value(text)))
    }
    switch end {
    case .finished(let instant)?:
      entries.append(MarbleDiagram.Entry(step: try stepIndex(of: instant, describing: "|"), event: .finish))
    case .failed(let instant)?:
      entries.append(MarbleDiagram.Entry(step: try stepIndex(of: instant, describing: "^"), event: .failure))
    case nil:
      break
    }
    return MarbleDiagram(events: entries, stepLength: stepLength)
  }
}

extension MarbleDiagram {
  /// The diagram's values and end as a timeline: step `k` happens at `origin + k * stepLength`,
  /// saturating at the last instant a `PaceInstant` holds.
  /// Cancellations (`;`) are not part of a timeline and are left out.
  ///
  /// - Parameters:
  ///   - stepLength: How long a step is; the diagram's own ``stepLength`` if `nil`.
  ///   - origin: The instant of step 0.
  /// - Returns: `nil` if no step length is given either way.
  public func timeline(stepLength: Duration? = nil, origin: PaceInstant = .zero) -> MarbleTimeline<String>? {
    guard let stepLength = stepLength ?? self.stepLength else { return nil }
    let step = stepLength.paceNanoseconds
    var timeline = MarbleTimeline<String>()
    for entry in events {
      // In nanoseconds, saturating: `Duration * Int` traps past 1.7e38 attoseconds.
      let (offset, overflow) = step.multipliedReportingOverflow(by: Int64(entry.step))
      let (nanoseconds, sumOverflow) = origin.nanoseconds.addingReportingOverflow(offset)
      let instant = PaceInstant(nanoseconds: overflow || sumOverflow ? (step < 0 ? .min : .max) : nanoseconds)
      switch entry.event {
      case .value(let value): timeline.events.append(.init(instant: instant, value: value))
      case .finish: timeline.end = .finished(at: instant)
      case .failure: timeline.end = .failed(at: instant)
      case .cancel: break
      }
    }
    return timeline
  }
}

/// What to do with an event that falls between two steps of the grid: ``OffGridHandling``, its
/// name before the glossary kept "policy" for a named limit.
@available(*, deprecated, renamed: "OffGridHandling")
public typealias OffGridPolicy = OffGridHandling
