/// How the calls covered by one invocation combine into the value it receives.
///
/// An invocation receives the merge of every call made since the previous invocation, in call
/// order. A leading invocation receives just its own call's value.
///
/// ```swift
/// Debouncer<String>(for: .milliseconds(300)) { search($0) }                   // .latest
/// Coalescer<Int>(merge: .sum) { print("\($0) updates") }                      // counts
/// Debouncer<Changes>(for: .zero, merge: .union) { reload($0) }                // OptionSet mask
/// Throttler<[Event]>(for: .seconds(5), merge: .append) { upload($0) }         // batches
/// ```
///
/// The policies are `@inlinable`, so their closures are specialised for `Value` where they are
/// made (a default argument is made in the caller's module): `.latest` on an `Int` is then a
/// plain store rather than a call through `Value`'s value witnesses.
public struct Merge<Value: Sendable>: Sendable {
  /// The two policies that need no function: the hot path tests this tag and stores directly,
  /// instead of calling through `combine` on every call.
  @usableFromInline enum Kind: Sendable {
    case latest, first, function
  }

  @usableFromInline let kind: Kind
  /// Folds `next` into `accumulated`; used when `kind` is `.function`.
  @usableFromInline let combine: @Sendable (_ accumulated: inout Value, _ next: Value) -> Void

  /// A merge that folds each new value into the accumulated one in place.
  @inlinable
  public init(_ combine: @escaping @Sendable (_ accumulated: inout Value, _ next: Value) -> Void) {
    self.kind = .function
    self.combine = combine
  }

  @inlinable
  init(kind: Kind, _ combine: @escaping @Sendable (_ accumulated: inout Value, _ next: Value) -> Void) {
    self.kind = kind
    self.combine = combine
  }

  /// The most recent call's value wins (lodash, Combine's `debounce`). The default.
  @inlinable
  public static var latest: Merge<Value> { Merge(kind: .latest) { accumulated, next in accumulated = next } }

  /// The first call's value wins (Combine's `throttle(latest: false)`).
  @inlinable
  public static var first: Merge<Value> { Merge(kind: .first) { _, _ in } }

  /// Any function of the accumulated and the next value.
  @inlinable
  public static func custom(_ merge: @escaping @Sendable (_ accumulated: Value, _ next: Value) -> Value) -> Merge<Value>
  {
    Merge { accumulated, next in accumulated = merge(accumulated, next) }
  }
}

extension Merge where Value: AdditiveArithmetic {
  /// The values add up, like `DispatchSourceUserDataAdd`.
  @inlinable
  public static var sum: Merge<Value> { Merge { accumulated, next in accumulated += next } }
}

extension Merge where Value: SetAlgebra {
  /// The values are unioned, like `DispatchSourceUserDataOr`: an `OptionSet` of what changed.
  @inlinable
  public static var union: Merge<Value> { Merge { accumulated, next in accumulated.formUnion(next) } }
}

extension Merge where Value: RangeReplaceableCollection {
  /// The values are concatenated in call order: every element reaches exactly one invocation.
  @inlinable
  public static var append: Merge<Value> {
    Merge { accumulated, next in accumulated.append(contentsOf: next) }
  }
}

extension Optional where Wrapped: Sendable {
  /// Folds `value` into the optional accumulator: the first value is stored as is.
  @inlinable
  mutating func merge(_ value: Wrapped, using merge: Merge<Wrapped>) {
    switch merge.kind {
    case .latest:
      self = value
    case .first:
      if self == nil { self = value }
    case .function:
      if self == nil {
        self = value
      } else {
        merge.combine(&self!, value)
      }
    }
  }
}

extension Merge {
  /// Folds `values` in order, as an invocation folds the calls it covers; `nil` for no values.
  /// For the package's stores, which merge calls read back from a database.
  package func fold(_ values: some Sequence<Value>) -> Value? {
    var accumulated: Value?
    for value in values { accumulated.merge(value, using: self) }
    return accumulated
  }
}
