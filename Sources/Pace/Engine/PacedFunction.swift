/// A function whose calls a synchronous pacer paces: what ``Debouncer`` and ``Throttler`` offer,
/// so that code can hold either.
///
/// ```swift
/// func paceSaves(_ pacer: some PacedFunction<Draft>, _ drafts: [Draft]) {
///   for draft in drafts { pacer(draft) }
///   pacer.flush()  // the last draft is saved now, not at the end of the interval
/// }
/// ```
public protocol PacedFunction<Value>: AnyObject, Sendable {
  /// The value each call carries.
  associatedtype Value: Sendable

  /// Records a call with `value`; the function runs when the pacer's edges and timing say so.
  func call(_ value: Value)
  /// Drops the pending invocation and resets, so the next call may lead again.
  func cancel()
  /// Performs the pending invocation now; does nothing if nothing is pending.
  ///
  /// It runs synchronously when called on the scheduler (always on ``TestScheduler``),
  /// otherwise it is dispatched there at once.
  func flush()
  /// Whether an invocation is waiting to happen.
  var isPending: Bool { get }
  /// When the pending invocation happens if no call arrives meanwhile; `nil` when nothing is
  /// pending.
  ///
  /// Read this, not a ``TestScheduler``'s deadlines, to see when a burst ends: a call inside a
  /// burst arms no timer (it costs no allocation), so the armed timer is the one the burst
  /// started with, re-armed for the true deadline only when it fires. After calls at 0, 100,
  /// 200 and 250 ms on a 300 ms debouncer, the timer is due at 300 ms and `nextInvocation` is
  /// 550 ms.
  var nextInvocation: PaceInstant? { get }
  /// The driver that paces the calls: Pace's own, not for use outside it.
  var _driver: any _PacingDriver { get }
}

/// The driver a paced function forwards to: Pace's own, neither for use nor for conformance
/// outside it (its name starts with an underscore so that the docs leave it out).
public protocol _PacingDriver: AnyObject, Sendable {
  /// See ``PacedFunction/flush()``.
  func flush()
  /// See ``PacedFunction/cancel()``.
  func cancel()
  /// See ``PacedFunction/isPending``.
  var isPending: Bool { get }
  /// See ``PacedFunction/nextInvocation``.
  var nextInvocation: PaceInstant? { get }
}

// The members every paced function answers alike, written once.
extension PacedFunction {
  /// Drops the pending invocation and resets, so the next call may lead again.
  public func cancel() { _driver.cancel() }
  /// Performs the pending invocation now; does nothing if nothing is pending.
  public func flush() { _driver.flush() }
  /// Whether an invocation is waiting to happen.
  public var isPending: Bool { _driver.isPending }
  /// When the pending invocation happens if no call arrives meanwhile; `nil` when nothing is pending.
  public var nextInvocation: PaceInstant? { _driver.nextInvocation }

  /// Records a call with `value`; the same as ``call(_:)``.
  @inlinable
  public func callAsFunction(_ value: Value) {
    call(value)
  }
}

extension PacedFunction where Value == Void {
  /// Records a call.
  @inlinable
  public func call() {
    call(())
  }

  /// Records a call; the same as ``call()``.
  @inlinable
  public func callAsFunction() {
    call(())
  }
}

/// A function whose calls an async pacer paces, each caller awaiting the result of the invocation
/// that covers its call: what ``AsyncDebouncer`` and ``AsyncThrottler`` offer.
public protocol AsyncPacedFunction<Input, Output>: AnyObject, Sendable {
  /// The value each call carries.
  associatedtype Input: Sendable
  /// The result of an invocation, given to every call it covers.
  associatedtype Output: Sendable

  /// Calls the paced function with `input` and waits for the result of the invocation that
  /// covers the call.
  ///
  /// The call runs on the caller's actor until it is registered, so from the main actor a call
  /// is registered before `call` first suspends: a ``TestScheduler`` advanced right after
  /// starting it sees it.
  ///
  /// - Parameters:
  ///   - input: The call's value.
  ///   - isolation: The caller's actor; leave the default.
  /// - Throws: `CancellationError` if the call is superseded, dropped, or cancelled, or if
  ///   ``cancel()`` is called; otherwise whatever the operation throws.
  func call(_ input: Input, isolation: isolated (any Actor)?) async throws -> Output
  /// Calls the paced function with `input` now, synchronously, and returns a task that gives the
  /// result of the invocation that covers the call.
  ///
  /// The call is registered before `submit` returns, from any context, so the pacer's state
  /// (``isPending``, a ``TestScheduler``'s deadlines) already reflects it. Cancelling the task
  /// cancels the call, as cancelling the caller of ``call(_:isolation:)`` does.
  ///
  /// - Parameter input: The call's value.
  /// - Returns: A task whose value is the result; it throws what ``call(_:isolation:)`` throws.
  func submit(_ input: Input) -> Task<Output, any Error>
  /// Starts the pending invocation now; does nothing if nothing is pending.
  func flush()
  /// Drops the pending invocation and resets, so the next call may lead again; every waiting
  /// caller throws `CancellationError`, and work in flight is cancelled.
  func cancel()
  /// Whether an invocation will start: a value is pending and a caller still waits for it.
  /// `false` once every caller covered by it has cancelled.
  var isPending: Bool { get }
  /// When the pending invocation happens if no call arrives meanwhile; `nil` when nothing is
  /// pending. Read this, not a ``TestScheduler``'s deadlines, to see when a burst ends.
  var nextInvocation: PaceInstant? { get }
  /// The driver that paces the calls: Pace's own, not for use outside it.
  var _driver: any _PacingDriver { get }
}

extension AsyncPacedFunction {
  /// Starts the pending invocation now; does nothing if nothing is pending.
  public func flush() { _driver.flush() }
  /// Drops the pending invocation and resets; every waiting caller throws `CancellationError`.
  public func cancel() { _driver.cancel() }
  /// Whether an invocation will start: a value is pending and a caller still waits for it.
  public var isPending: Bool { _driver.isPending }
  /// When the pending invocation happens if no call arrives meanwhile; `nil` when nothing is pending.
  public var nextInvocation: PaceInstant? { _driver.nextInvocation }

  /// Calls the paced function with `input`; the same as `call(_:isolation:)`.
  ///
  /// - Parameters:
  ///   - input: The call's value.
  ///   - isolation: The caller's actor; leave the default.
  public func callAsFunction(_ input: Input, isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await call(input, isolation: isolation)
  }
}

extension AsyncPacedFunction where Input == Void {
  /// Calls the paced function and waits for the result of the invocation that covers it.
  ///
  /// - Parameter isolation: The caller's actor; leave the default.
  public func call(isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await call((), isolation: isolation)
  }

  /// Calls the paced function; the same as `call(isolation:)`.
  ///
  /// - Parameter isolation: The caller's actor; leave the default.
  public func callAsFunction(isolation: isolated (any Actor)? = #isolation) async throws -> Output {
    try await call((), isolation: isolation)
  }

  /// Calls the paced function now, synchronously; the same as `submit(_:)` with no value.
  @discardableResult
  public func submit() -> Task<Output, any Error> {
    submit(())
  }
}

/// A function paced per key, each key as if it had a pacer of its own: what ``KeyedDebouncer``
/// and ``KeyedThrottler`` offer.
public protocol KeyedPacedFunction<Key, Value>: AnyObject, Sendable {
  /// What the calls are told apart by.
  associatedtype Key: Hashable & Sendable
  /// The value each call carries.
  associatedtype Value: Sendable

  /// Records a call for `key` with `value`.
  func call(_ key: Key, _ value: Value)
  /// Performs `key`'s pending invocation now.
  func flush(_ key: Key)
  /// Performs every key's pending invocation now.
  func flushAll()
  /// Drops `key`'s pending invocation, so its next call may lead again.
  func cancel(_ key: Key)
  /// Drops every pending invocation.
  func cancelAll()
  /// Whether an invocation is waiting to happen for `key`.
  func isPending(for key: Key) -> Bool
  /// How many keys hold state now; idle keys are forgotten and not counted.
  var trackedKeyCount: Int { get }
  /// The driver that paces the calls: Pace's own, not for use outside it.
  var _driver: any _KeyedPacingDriver<Key> { get }
}

/// The driver a keyed paced function forwards to: Pace's own, neither for use nor for
/// conformance outside it.
public protocol _KeyedPacingDriver<Key>: AnyObject, Sendable {
  /// What the calls are told apart by.
  associatedtype Key: Hashable & Sendable
  /// See ``KeyedPacedFunction/flush(_:)``.
  func flush(_ key: Key)
  /// See ``KeyedPacedFunction/flushAll()``.
  func flushAll()
  /// See ``KeyedPacedFunction/cancel(_:)``.
  func cancel(_ key: Key)
  /// See ``KeyedPacedFunction/cancelAll()``.
  func cancelAll()
  /// See ``KeyedPacedFunction/isPending(for:)``.
  func isPending(_ key: Key) -> Bool
  /// See ``KeyedPacedFunction/trackedKeyCount``.
  var trackedKeyCount: Int { get }
}

extension KeyedPacedFunction {
  /// Performs `key`'s pending invocation now.
  public func flush(_ key: Key) { _driver.flush(key) }
  /// Performs every key's pending invocation now.
  public func flushAll() { _driver.flushAll() }
  /// Drops `key`'s pending invocation, so its next call may lead again.
  public func cancel(_ key: Key) { _driver.cancel(key) }
  /// Drops every pending invocation.
  public func cancelAll() { _driver.cancelAll() }
  /// Whether an invocation is waiting to happen for `key`.
  public func isPending(for key: Key) -> Bool { _driver.isPending(key) }
  /// How many keys hold state now; idle keys are forgotten and not counted.
  public var trackedKeyCount: Int { _driver.trackedKeyCount }

  /// Records a call for `key` with `value`; the same as ``call(_:_:)``.
  @inlinable
  public func callAsFunction(_ key: Key, _ value: Value) {
    call(key, value)
  }
}

extension KeyedPacedFunction where Value == Void {
  /// Records a call for `key`.
  @inlinable
  public func call(_ key: Key) {
    call(key, ())
  }
}

extension Pacer: _PacingDriver {}
extension AsyncWorkPacer: _PacingDriver {}
extension KeyedPacer: _KeyedPacingDriver {}
