extension Clock where Duration == Swift.Duration {
  /// The scheduler that Pace's async primitives read the time from and arm their timers on.
  ///
  /// A ``TestScheduler`` is used as it is, so that its timers fire synchronously inside
  /// ``TestScheduler/advance(by:)`` at their exact deadlines; any other clock is wrapped in a
  /// ``ClockScheduler``, whose timers are tasks sleeping on the clock.
  var pacingScheduler: any PaceScheduler {
    if let scheduler = self as? TestScheduler { return scheduler }
    return ClockScheduler(self)
  }
}
