extension PaceInstant {
  /// The instant `value` milliseconds after the origin, so that expectations read like the
  /// timelines in the docs: `#expect(scheduler.now == .milliseconds(550))`.
  public static func milliseconds(_ value: Int64) -> PaceInstant {
    PaceInstant(.milliseconds(value))
  }

  /// The instant `value` seconds after the origin: `#expect(saved.times == [.seconds(1)])`.
  public static func seconds(_ value: Int64) -> PaceInstant {
    PaceInstant(.seconds(value))
  }

  /// The instant `value` microseconds after the origin.
  public static func microseconds(_ value: Int64) -> PaceInstant {
    PaceInstant(.microseconds(value))
  }
}
