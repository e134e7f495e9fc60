// Calls of the button-bashing guard that compiled against Pace 0.3.0 (tag 0.3.0, b987f07), with
// `import Pace` only, as an app's tests wrote them before the gate moved to PaceUI.
// Not a test target: Scripts/check-source-compatibility.sh type-checks this file against the
// current build and fails on an error (deprecation warnings are expected and allowed).
// Spelled as released: a rename leaves this file alone (its old name must still compile here).
import Pace

@MainActor final class GateControlOf030: Enablable {
  var isEnabled = true
}

@MainActor func gateCallsOf030() {
  let scheduler = TestScheduler()
  let gate = InteractionGate(scheduler: scheduler)
  let control = GateControlOf030()
  gate.close([control], for: .milliseconds(500))
  let closing: Bool = gate.isClosing(control)
  let pending: Int = gate.pendingClosures
  gate.openAll()
  InteractionGate.shared.close([control], for: .milliseconds(500))
  print(closing, pending)
}
