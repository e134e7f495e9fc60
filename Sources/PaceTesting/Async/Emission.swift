/// One thing an async sequence did, and the virtual time it did it at: what a
/// ``VirtualTimeline`` records.
public enum Emission<Value: Equatable & Sendable>: Equatable, Sendable, CustomStringConvertible {
  /// An element.
  case value(Value, at: PaceInstant)
  /// The normal end of the sequence.
  case finished(at: PaceInstant)
  /// The end of the sequence by an error.
  case failed(at: PaceInstant)

  /// `value@time`, `|@time` for the end, `^@time` for a failure.
  public var description: String {
    switch self {
    case .value(let value, let time): "\(value)@\(time)"
    case .finished(let time): "|@\(time)"
    case .failed(let time): "^@\(time)"
    }
  }

  /// The element, or `nil` for an end.
  public var value: Value? {
    if case .value(let value, _) = self { return value }
    return nil
  }

  /// When it happened.
  public var time: PaceInstant {
    switch self {
    case .value(_, let time), .finished(let time), .failed(let time): time
    }
  }
}
