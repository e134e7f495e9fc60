import AppKitStandIn
import PaceTestSupport
import PaceUIOnStandIns
import Testing

@testable import Pace

final class RecordingNSTableView: NSTableView {
  var reloads = 0
  var onReload: (@MainActor () -> Void)?
  override func reloadData() {
    reloads += 1
    onReload?()
  }
}

@Suite @MainActor struct AppKitGlueTests {
  @Test func disableTemporarilyDisablesTheControlAndItsSiblingsForTheDuration() {
    let scheduler = TestScheduler()
    let gate = ControlGate(scheduler: scheduler)
    let button = NSButton()
    let field = NSTextField()
    button.disableTemporarily(for: .milliseconds(300), siblings: [field], gate: gate)
    #expect(!button.isEnabled)
    #expect(!field.isEnabled)
    scheduler.advance(to: ms(300))
    #expect(button.isEnabled)
    #expect(field.isEnabled)
  }

  @Test func diffusersSetStringValueAndHidden() {
    let field = NSTextField()
    let view = NSView()
    let text = Diffuser<String>.intoText(field)
    let hidden = Diffuser<Bool>.intoHidden(view)
    text.run("a")
    hidden.run(true)
    #expect(field.stringValue == "a")
    #expect(view.isHidden)
    field.stringValue = "typed"
    text.run("a")
    #expect(field.stringValue == "typed", "unchanged state: the field is not touched")
  }

  @Test func setNeedsReloadDataReloadsOnceOnTheMainQueuesNextTurn() async {
    // real-time: the shared coalescer runs on the real main queue; nothing is timed.
    let table = RecordingNSTableView()
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      table.onReload = { done.resume() }
      for _ in 0..<3 { table.setNeedsReloadData() }
    }
    #expect(table.reloads == 1)
    table.onReload = nil
    table.setNeedsReloadData()
    table.reloadDataIfNeeded()
    #expect(table.reloads == 2)
  }
}
