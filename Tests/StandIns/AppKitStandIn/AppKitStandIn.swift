// A stand-in for the part of AppKit that PaceUI's glue uses, so that the glue compiles and is
// tested on Linux. It is a test fixture: no product depends on it, so it never ships.
//
// Same rules as UIKitStandIn: Apple's names and signatures (or stricter ones), the minimum
// behaviour, `@MainActor` classes. The glue uses exactly: `NSView.isHidden`,
// `NSControl.isEnabled`, `NSControl.stringValue`, `NSTableView.reloadData()`,
// `NSCollectionView.reloadData()`.

@MainActor
open class NSResponder {
  public init() {}
}

@MainActor
open class NSView: NSResponder {
  open var isHidden = false
}

@MainActor
open class NSControl: NSView {
  open var isEnabled = true
  open var stringValue = ""
}

@MainActor
open class NSTextField: NSControl {}

@MainActor
open class NSButton: NSControl {}

@MainActor
open class NSTableView: NSControl {
  open func reloadData() {}
}

@MainActor
open class NSCollectionView: NSView {
  open func reloadData() {}
}
