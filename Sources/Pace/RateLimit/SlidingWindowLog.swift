/// The arithmetic of a sliding window, `permits` in any window of `rate.nanoseconds`, as a value
/// type with exact integer time: every grant is kept as (time, cost) until it stops counting.
///
/// A grant at `g` counts during `[g, g + T)`. A request of cost `c` at `t` fits iff the costs
/// counting at `t`, plus `c`, are at most the permits; when it does not, it is ready when the
/// oldest grants have stopped counting enough: at `g + T` for the first grant `g`, oldest first,
/// whose end frees enough.
///
/// **Memory per key**: 16 bytes per grant still in the window, at most `permits` grants (each
/// grant costs at least 1) and one per instant (grants at the same nanosecond share an entry),
/// in one array that a quiet key gives back; plus the array's header and the running total.
/// Grants are kept in time order: a `now` earlier than the last grant's (time never goes back)
/// adds to the last grant, which can only make it count longer.
///
/// Nothing here traps on extreme input: an end beyond the end of the timeline is `nil` (never),
/// and an age too large for `Int64` has stopped counting.
@usableFromInline
package struct SlidingWindowLog: WindowCounting, Sendable, Equatable {
  /// One grant: when, and how many permits.
  @usableFromInline
  package struct Grant: Sendable, Equatable {
    @usableFromInline var time: Int64
    @usableFromInline var cost: Int

    @inlinable init(time: Int64, cost: Int) {
      self.time = time
      self.cost = cost
    }
  }

  @usableFromInline package let rate: WindowRate
  /// The grants, oldest first; those before `head` have stopped counting.
  @usableFromInline package var grants: ContiguousArray<Grant> = []
  @usableFromInline package var head = 0
  /// The costs of `grants[head...]`.
  @usableFromInline package var used = 0
  /// When the log was last brought up to date.
  @usableFromInline package var updated: PaceInstant

  /// An empty log at `now`.
  @inlinable
  package init(rate: WindowRate, now: PaceInstant) {
    self.rate = rate
    self.updated = now
  }

  /// Drops the grants that stopped counting by `now`.
  @inlinable
  package mutating func refill(now: PaceInstant) {
    guard now > updated else { return }
    updated = now
    dropGrantsThatNoLongerCount()
  }

  /// Drops the grants that no longer count at `updated`: after a refill, or once the log is read
  /// under a shorter window at the instant it was last updated (which a refill skips).
  @inlinable
  package mutating func dropGrantsThatNoLongerCount() {
    while head < grants.count, !counts(grants[head].time) {
      used &-= grants[head].cost
      head &+= 1
    }
    if head == grants.count {
      if head > 0 { grants.removeAll(keepingCapacity: grants.capacity <= 64) }
      head = 0
    } else if head >= 32, head * 2 >= grants.count {
      grants.removeFirst(head)
      head = 0
    }
  }

  /// Whether a grant at `time` still counts at `updated`: `updated - time < T`.
  @inlinable
  package func counts(_ time: Int64) -> Bool {
    let (age, overflow) = updated.nanoseconds.subtractingReportingOverflow(time)
    return !overflow && age < rate.nanoseconds
  }

  /// Records a grant of `permits` now; grants at one instant share one entry.
  @inlinable
  package mutating func take(_ permits: Int) {
    used &+= permits
    if head < grants.count, let last = grants.last, last.time >= updated.nanoseconds {
      grants[grants.count &- 1].cost &+= permits
      return
    }
    grants.append(Grant(time: updated.nanoseconds, cost: permits))
  }

  @inlinable
  package func readyTime(for permits: Int) -> PaceInstant? {
    guard permits <= rate.permits else { return nil }
    var used = self.used
    if permits <= rate.permits &- used { return updated }
    var index = head
    while index < grants.count {
      let grant = grants[index]
      used &-= grant.cost
      if permits <= rate.permits &- used { return end(of: grant) }
      index &+= 1
    }
    return nil
  }

  /// When `grant` stops counting; `nil` beyond the end of the timeline.
  @inlinable
  package func end(of grant: Grant) -> PaceInstant? {
    let (end, overflow) = grant.time.addingReportingOverflow(rate.nanoseconds)
    return overflow ? nil : PaceInstant(nanoseconds: end)
  }

  /// When the newest grant stops counting.
  @inlinable package var idleTime: PaceInstant? {
    guard used > 0, let newest = grants.last else { return updated }
    return end(of: newest)
  }

  /// The bytes this log holds beyond its own size: its grants' array.
  @inlinable package var heldStorageBytes: Int {
    grants.capacity * MemoryLayout<Grant>.stride
  }
}
