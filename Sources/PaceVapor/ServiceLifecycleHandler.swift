#if Vapor
import Logging
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
/// `app.logger` to the services themselves to get their lines there too. Vapor calls the
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

  public func willBootAsync(_ application: Application) async throws {
    await runner.start(services, logger: application.logger)
    do {
      try await beforeServerStarts()
    } catch {
      await runner.stop()
      throw error
    }
  }

  public func shutdownAsync(_ application: Application) async {
    await runner.stop()
  }

  /// The running group, if any; an actor so that start and stop see one another in order.
  private actor Runner {
    private var group: ServiceGroup?
    private var task: Task<Void, Never>?

    func start(_ services: [any Service], logger: Logger) {
      guard task == nil else { return }
      let group = ServiceGroup(
        configuration: ServiceGroupConfiguration(
          services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) }, logger: logger))
      self.group = group
      // Logged when it happens: a service that fails ends the group (and the others) long
      // before the application shuts down.
      task = Task {
        do {
          try await group.run()
        } catch {
          logger.error("Pace: the services stopped with an error", metadata: ["error": "\(String(reflecting: error))"])
        }
      }
    }

    func stop() async {
      guard let group, let task else { return }
      self.group = nil
      self.task = nil
      await group.triggerGracefulShutdown()
      await task.value
    }
  }
}
#endif
