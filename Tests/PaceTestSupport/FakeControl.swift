import Pace

/// A control without UIKit: an ``Enablable`` for the tests of gates and diffusers.
@MainActor public final class FakeControl: Enablable {
  public var isEnabled: Bool
  public init(isEnabled: Bool = true) { self.isEnabled = isEnabled }
}
