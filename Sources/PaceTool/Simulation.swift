import Foundation
import Pace
import PaceMarbles

/// One invocation of a paced function: when, with what, and which calls it covered.
public struct Invocation: Sendable, Equatable {
  /// When it happened, in nanoseconds.
  public var time: Int64
  /// The merged value it received.
  public var value: String
  /// The index of the first call it covers (0-based).
  public var firstCall: Int
  /// How many calls it covers: `firstCall ..< firstCall + callCount`.
  public var callCount: Int
}

/// What a strategy did with a trace.
public struct SimulationResult: Sendable {
  /// The strategy.
  public var strategy: Strategy
  /// The invocations, in order.
  public var invocations: [Invocation]
  /// The statistics.
  public var statistics: Statistics
}

/// Runs traces through the real engine — `Debouncer`, `Throttler`, `Coalescer` — on a
/// `TestScheduler`, so every time shown is what the library does.
///
/// For each call at time `t`, the simulator runs `scheduler.advance(to: t)` (timers due at `t`
/// fire first), then makes the call; calls at the same time are one run-loop turn, so it
/// advances only before the first of them. At the end it runs what is left. Each call carries its
/// index, and the merge keeps the range of calls an invocation covers next to the merged
/// value, so the delay of every call is exact.
public enum Simulator {
  /// Runs `trace` through `strategy`.
  ///
  /// - Throws: ``ToolError`` if `--merge sum` meets a value that is not a number.
  public static func run(_ trace: Trace, strategy: Strategy) throws(ToolError) -> SimulationResult {
    let numbers = try strategy.merge == .sum ? numericValues(of: trace) : []
    let scheduler = TestScheduler()
    let recorder = InvocationRecorder(capacity: 64)
    let merge = coveredMerge(strategy.merge)
    let perform: @Sendable (Covered) -> Void = { covered in
      recorder.append(covered, at: scheduler.now.nanoseconds)
    }

    let call: (Covered) -> Void
    let primitive: AnyObject
    switch strategy.kind {
    case .debounce:
      let debouncer = Debouncer(
        for: strategy.interval, edges: strategy.edges, maximumWait: strategy.maxWait, merge: merge,
        scheduler: scheduler,
        perform: perform)
      primitive = debouncer
      call = debouncer.call
    case .throttle:
      let throttler = Throttler(
        for: strategy.interval, edges: strategy.edges, merge: merge, scheduler: scheduler, perform: perform)
      primitive = throttler
      call = throttler.call
    case .coalesce:
      let coalescer = Coalescer(window: strategy.interval, merge: merge, scheduler: scheduler, perform: perform)
      primitive = coalescer
      call = coalescer.signal
    }

    withExtendedLifetime(primitive) {
      var previous: Int64?
      for index in trace.times.indices {
        // Calls at one instant are one run-loop turn: advance once, before the first of them.
        if trace.times[index] != previous {
          scheduler.advance(to: PaceInstant(nanoseconds: trace.times[index]))
          previous = trace.times[index]
        }
        call(Covered(first: index, count: 1, text: trace.values[index], number: numbers.isEmpty ? 0 : numbers[index]))
      }
      scheduler.run()
    }

    let invocations = recorder.invocations(sum: strategy.merge == .sum)
    return SimulationResult(
      strategy: strategy, invocations: invocations, statistics: Statistics(trace: trace, invocations: invocations))
  }

  /// Runs every strategy over `trace`, two at a time on this machine's cores.
  ///
  /// - Parameter keepingInvocations: Whether the results keep their invocations; without them a
  ///   result is its statistics, and nine strategies over a million calls need a fifth of the memory.
  public static func runAll(
    _ trace: Trace, strategies: [Strategy], keepingInvocations: Bool = true
  ) throws(ToolError) -> [SimulationResult] {
    let results = ResultBox(count: strategies.count)
    DispatchQueue.concurrentPerform(iterations: strategies.count) { index in
      results.set(
        index,
        Result { () throws(ToolError) in
          var result = try run(trace, strategy: strategies[index])
          if !keepingInvocations { result.invocations = [] }
          return result
        })
    }
    return try results.values.map { result throws(ToolError) in try result.get() }
  }

  /// The values as numbers, for `--merge sum`.
  static func numericValues(of trace: Trace) throws(ToolError) -> [Double] {
    var numbers: [Double] = []
    numbers.reserveCapacity(trace.count)
    for (index, value) in trace.values.enumerated() {
      guard let number = Double(value), number.isFinite else {
        let place =
          trace.source == "--events" ? "--events: event \(trace.lines[index])" : "\(trace.source):\(trace.lines[index])"
        throw ToolError("\(place): value '\(value)' is not a number, and --merge sum adds the values")
      }
      numbers.append(number)
    }
    return numbers
  }

  /// The merge on ``Covered``: the user's choice for the value, and the covered range kept.
  static func coveredMerge(_ choice: MergeChoice) -> Merge<Covered> {
    switch choice {
    case .latest:
      Merge { accumulated, next in
        accumulated.count += next.count
        accumulated.text = next.text
      }
    case .first:
      Merge { accumulated, next in accumulated.count += next.count }
    case .sum:
      Merge { accumulated, next in
        accumulated.count += next.count
        accumulated.number += next.number
      }
    case .append:
      Merge { accumulated, next in
        accumulated.count += next.count
        accumulated.text += next.text
      }
    }
  }
}

/// The engine's value in the simulator: the calls covered so far and their merged value.
///
/// Pace merges the calls an invocation covers in call order, and a leading invocation covers
/// only its own call, so the calls covered are always consecutive: `first ..< first + count`.
struct Covered: Sendable {
  var first: Int
  var count: Int
  var text: String
  var number: Double
}

/// The invocations recorded by `perform`.
private final class InvocationRecorder: Sendable {
  private let storage: LockedState<[(Int64, Covered)]>

  init(capacity: Int) {
    var storage: [(Int64, Covered)] = []
    storage.reserveCapacity(capacity)
    self.storage = LockedState(storage)
  }

  func append(_ covered: Covered, at time: Int64) {
    storage.withLock { $0.append((time, covered)) }
  }

  func invocations(sum: Bool) -> [Invocation] {
    storage.withLock { $0 }.map { time, covered in
      Invocation(
        time: time, value: sum ? formatNumber(covered.number) : covered.text, firstCall: covered.first,
        callCount: covered.count)
    }
  }
}

/// Results written by concurrent workers, each to its own slot.
private final class ResultBox: Sendable {
  private let slots: LockedState<[Result<SimulationResult, ToolError>?]>

  init(count: Int) {
    slots = LockedState(Array(repeating: nil, count: count))
  }

  func set(_ index: Int, _ result: Result<SimulationResult, ToolError>) {
    slots.withLock { $0[index] = result }
  }

  var values: [Result<SimulationResult, ToolError>] {
    slots.withLock { $0 }.map { $0! }
  }
}

/// `6` for 6.0, `2.5` for 2.5.
func formatNumber(_ number: Double) -> String {
  if number == number.rounded(), abs(number) < 1e15 { return String(Int64(number)) }
  return String(number)
}
