/// Lets an iterator's `next() async rethrows` throw an error that was carried across tasks in a
/// `Result`, so that a Pace operator over a sequence that cannot fail cannot fail either
/// (`for await`, no `try`), like the standard library's operators and swift-async-algorithms'.
///
/// A call to a requirement of a `@rethrows` protocol counts as a rethrowing call, and an
/// operator's error can only come from its base sequence, whose conformance decides. Typed
/// throws (`Failure`) would say this without the attribute, but `AsyncSequence.Failure` needs
/// macOS 15 and Pace supports macOS 13.
@rethrows
@usableFromInline
protocol RethrowingResult {
  associatedtype Success
  func get() throws -> Success
}

extension RethrowingResult {
  /// The success value, or the error thrown by a rethrowing function.
  @inlinable
  func rethrowingGet() rethrows -> Success {
    try get()
  }
}

extension Result: RethrowingResult {}
