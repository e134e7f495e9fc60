import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Pace

#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// An open-loop load generator: requests go out at a fixed rate whatever the answers, each with a
/// client timeout, as users' requests arrive at a service; a closed loop would slow down with the
/// service and hide its collapse.
struct LoadGenerator: Sendable {
  let client: HTTPClient
  /// How long a client waits for its whole answer, from the instant its request was due.
  let timeout: Duration

  /// What became of one request.
  enum Outcome: Sendable, Hashable {
    /// `200` within the timeout.
    case succeeded
    /// `503`: refused by the limit.
    case refused
    /// No whole answer within the timeout (or due so late that its time was already up).
    case timedOut
    /// Another status, or a connection error.
    case failed
  }

  struct Sample: Sendable {
    var priority: AdmissionPriority
    var outcome: Outcome
    /// From the instant the request was due to its answer's end; the timeout for a timed-out one.
    var latency: Duration
    /// How late the generator sent it after the instant it was due.
    var lag: Duration
  }

  /// What a run gathered.
  struct Result: Sendable {
    var samples: [Sample]
    var duration: Duration
    /// The limit read every 100 ms while requests went out, for a run with an adaptive limit.
    var limits: [Int]
    /// The machine's load average at the run's end, over 1, 5 and 15 minutes.
    var loadAverage = ""
    /// The CPU time this process used during the run, server and generator together.
    var cpu = Duration.zero
  }

  /// Offers `rate` requests per second to `url` for `duration`, the `i`-th due at `i / rate`
  /// seconds, in the class `priority(i)`; gathers every answer (each ends by the timeout).
  func offer(
    url: String, rate: Double, duration: Duration, priority: @escaping @Sendable (Int) -> AdmissionPriority,
    limit: (@Sendable () -> Int)?
  ) async -> Result {
    let clock = ContinuousClock()
    let count = Int((rate * duration.seconds).rounded())
    let interval = Duration.seconds(1 / rate)
    let samples = NIOLockedValueBox([Sample]())
    samples.withLockedValue { $0.reserveCapacity(count) }
    let limits = NIOLockedValueBox([Int]())
    let cpuBefore = processCPU()
    let start = clock.now.advanced(by: .milliseconds(50))
    let end = start.advanced(by: duration)
    // A plain group: a discarding one needs macOS 14. A run's children (36,000 at the defaults)
    // leave only their `Void`s until the group ends.
    await withTaskGroup(of: Void.self) { group in
      if let limit {
        group.addTask {
          var next = start
          while next < end {
            try? await clock.sleep(until: next)
            limits.withLockedValue { $0.append(limit()) }
            next = next.advanced(by: .milliseconds(100))
          }
        }
      }
      var issued = 0
      while issued < count {
        let due = start.advanced(by: interval * issued)
        if due > clock.now { try? await clock.sleep(until: due) }
        // Every request due by now goes out, so that a late wake-up does not lower the rate.
        let now = clock.now
        while issued < count, start.advanced(by: interval * issued) <= now {
          let index = issued
          let due = start.advanced(by: interval * index)
          group.addTask {
            let sample = await request(url, priority: priority(index), due: due, clock: clock)
            samples.withLockedValue { $0.append(sample) }
          }
          issued += 1
        }
      }
    }
    return Result(
      samples: samples.withLockedValue { $0 }, duration: duration, limits: limits.withLockedValue { $0 },
      loadAverage: loadAverage(), cpu: processCPU() - cpuBefore)
  }

  private func request(
    _ url: String, priority: AdmissionPriority, due: ContinuousClock.Instant, clock: ContinuousClock
  ) async -> Sample {
    let lag = due.duration(to: clock.now)
    let remaining = timeout - lag
    guard remaining > .zero else { return Sample(priority: priority, outcome: .timedOut, latency: timeout, lag: lag) }
    var request = HTTPClientRequest(url: url)
    request.headers.add(name: "X-Priority", value: "\(priority)")
    let outcome: Outcome
    do {
      let response = try await client.execute(request, deadline: .now() + TimeAmount(remaining))
      _ = try await response.body.collect(upTo: 64 * 1024)
      switch response.status.code {
      case 200: outcome = .succeeded
      case 503: outcome = .refused
      default: outcome = .failed
      }
    } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
      outcome = .timedOut
    } catch {
      outcome = .failed
    }
    let latency = due.duration(to: clock.now)
    guard latency <= timeout || outcome != .succeeded else {
      return Sample(priority: priority, outcome: .timedOut, latency: timeout, lag: lag)
    }
    return Sample(priority: priority, outcome: outcome, latency: outcome == .timedOut ? timeout : latency, lag: lag)
  }
}

/// The process's user and system CPU time so far.
func processCPU() -> Duration {
  var usage = rusage()
  #if canImport(Glibc)
  getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
  #else
  getrusage(RUSAGE_SELF, &usage)
  #endif
  let user = Duration.seconds(usage.ru_utime.tv_sec) + .microseconds(usage.ru_utime.tv_usec)
  let system = Duration.seconds(usage.ru_stime.tv_sec) + .microseconds(usage.ru_stime.tv_usec)
  return user + system
}

/// The first three fields of /proc/loadavg; empty where there is none.
func loadAverage() -> String {
  guard let file = fopen("/proc/loadavg", "r") else { return "" }
  defer { fclose(file) }
  var buffer = [CChar](repeating: 0, count: 128)
  guard fgets(&buffer, Int32(buffer.count), file) != nil else { return "" }
  let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  return line.split(separator: " ").prefix(3).joined(separator: " ")
}

extension TimeAmount {
  init(_ duration: Duration) {
    self = .nanoseconds(Int64(duration.seconds * 1e9))
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  /// The duration in milliseconds, as a `Double`.
  var milliseconds: Double { seconds * 1000 }
}
