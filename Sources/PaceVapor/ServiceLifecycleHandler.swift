#if Vapor
import Logging
import Pace
import ServiceLifecycle
import Vapor

/// Runs swift-service-lifecycle `Service`s (`PostgresClient`, `PostgresRateLimitStore`'s purge
/// loop, `PostgresDebouncer`'s worker) for as long as a Vapor application runs.
///
/// Register it before the application boots; the services start with the application, and on
/// shutdown they are shut down gracefully, the last one first (so list the client before what
/// uses it), and the application waits until they have drained:
///
/// ```swift
/// app.lifecycle.use(ServiceLifecycleHandler(services: [client, store, debouncer]) {
///   try await store.migrate()  // runs once the client runs, before the server takes requests
/// })
/// ```
///
/// The services run in one `ServiceGroup` that logs to the application's `Logger`; pass
/// `app.logger` to the services themselves to get their lines there too. `beforeServerStarts`
/// runs once every service's `run()` has begun (a client is running before a migration asks it
/// for a connection). A service that fails, or ends while the application runs, takes the
/// application down, as a `ServiceGroup` takes its other services down: the error is logged, and
/// the application stops (`app.running?.stop()`), rather than serving on without its store or
/// worker. Vapor calls the
/// handler's async hooks for an application made with `Application.make` and run with `execute()`
/// (or started with `startup()` and stopped with `asyncShutdown()`). Vapor handles the signals:
/// the group listens to none. In a VaporTesting test, call `app.asyncBoot()` before
/// `app.testing()`, whose synchronous boot would otherwise skip the async hooks.
public final class ServiceLifecycleHandler: LifecycleHandler {
  /// The services, started in this order and shut down in the reverse one.
  public let services: [any Service]
  private let beforeServerStarts: @Sendable () async throws -> Void
  private let runner = Runner()

  /// A handler that runs `services` under the application's lifecycle.
  ///
  /// - Parameters:
  ///   - services: What to run, in order; the last is shut down first.
  ///   - beforeServerStarts: Work that needs the services running, such as migrations; run once
  ///     they have started, before the server takes requests. If it throws, the services are
  ///     shut down and the application does not start.
  public init(services: [any Service], beforeServerStarts: @escaping @Sendable () async throws -> Void = {}) {
    self.services = services
    self.beforeServerStarts = beforeServerStarts
  }

  /// Starts the services, waits until each has begun running, then runs `beforeServerStarts`.
  public func willBootAsync(_ application: Application) async throws {
    await runner.start(services, application: application)
    do {
      try await beforeServerStarts()
    } catch {
      await runner.stop()
      throw error
    }
  }

  /// Shuts the services down gracefully, the last one first, and waits for them.
  public func shutdownAsync(_ application: Application) async {
    await runner.stop()
  }

  /// The running group, if any; an actor so that start and stop see one another in order.
  private actor Runner {
    private var group: ServiceGroup?
    private var task: Task<Void, Never>?

    func start(_ services: [any Service], application: Application) async {
      guard task == nil else { return }
      let logger = application.logger
      let (begun, begin) = AsyncStream<Void>.makeStream()
      let started = services.map { StartSignal($0, begin: begin) }
      let group = ServiceGroup(
        configuration: ServiceGroupConfiguration(
          services: started.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) }, logger: logger))
      self.group = group
      let stopping = self.stopping
      // Logged when it happens: a service that fails ends the group (and the others) long
      // before the application shuts down, and takes the application down with it.
      task = Task {
        defer { begin.finish() }
        do {
          try await group.run()
        } catch {
          logger.error(
            "Pace: a service failed; the other services were shut down and the application stops",
            metadata: ["error": "\(String(reflecting: error))"])
          application.running?.stop()
          return
        }
        if !stopping.value {
          logger.error("Pace: the services ended while the application runs; the application stops")
          application.running?.stop()
        }
      }
      // Every service's `run()` has begun once each has signalled (the group starts them all at
      // once); a group that ends first ends the wait too.
      var count = 0
      for await _ in begun {
        count += 1
        if count == started.count { break }
      }
      await Task.yield()
    }

    /// Whether ``stop()`` ended the group, so that its end is not a failure.
    private let stopping = StopFlag()

    func stop() async {
      guard let group, let task else { return }
      stopping.value = true
      self.group = nil
      self.task = nil
      await group.triggerGracefulShutdown()
      await task.value
    }
  }
}

/// A service that signals when its `run()` begins, then runs the service it wraps.
private struct StartSignal: Service, CustomStringConvertible {
  let service: any Service
  let begin: AsyncStream<Void>.Continuation

  init(_ service: any Service, begin: AsyncStream<Void>.Continuation) {
    self.service = service
    self.begin = begin
  }

  var description: String { "\(service)" }

  func run() async throws {
    begin.yield()
    try await service.run()
  }
}

/// Set once the application stops the services.
private final class StopFlag: Sendable {
  private let state = LockedState(false)
  var value: Bool {
    get { state.withLock { $0 } }
    set { state.withLock { $0 = newValue } }
  }
}
#endif
