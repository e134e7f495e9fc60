#if PACE_UI_STAND_IN
import AppKitStandIn
#elseif canImport(AppKit) && !targetEnvironment(macCatalyst)
import AppKit
#endif

#if PACE_UI_STAND_IN || (canImport(AppKit) && !targetEnvironment(macCatalyst))
import Pace

// AppKit counterparts of the UIKit glue. AppKit controls have one target/action slot and no
// closure-based actions, so PaceUI does not add control-event fusers or throttled actions there
// (they would take the slot from the app); wrap your own action in a `Fuser { dispatch in ... }`
// or call a `Throttler` from it.

extension NSControl: Enablable {}

/// The reloads of every table view, coalesced per table view.
@MainActor private let tableViewReloads = UpdateCoalescer<NSTableView> { $0.reloadData() }
/// The reloads of every collection view, coalesced per collection view.
@MainActor private let collectionViewReloads = UpdateCoalescer<NSCollectionView> { $0.reloadData() }

extension NSTableView {
  /// Asks for a `reloadData()` on the main queue's next turn; however many times it is called
  /// in one turn, the table view reloads once. Built on ``UpdateCoalescer``.
  public func setNeedsReloadData() {
    tableViewReloads.setNeedsUpdate(self)
  }

  /// Reloads now if a reload was asked for and has not happened yet.
  public func reloadDataIfNeeded() {
    tableViewReloads.updateIfNeeded(self)
  }
}

extension NSCollectionView {
  /// Asks for a `reloadData()` on the main queue's next turn; however many times it is called
  /// in one turn, the collection view reloads once. Built on ``UpdateCoalescer``.
  public func setNeedsReloadData() {
    collectionViewReloads.setNeedsUpdate(self)
  }

  /// Reloads now if a reload was asked for and has not happened yet.
  public func reloadDataIfNeeded() {
    collectionViewReloads.updateIfNeeded(self)
  }
}

extension Diffuser where State == String {
  /// A diffuser that sets the text field's `stringValue` when the state changed (and on the
  /// first run).
  ///
  /// - Parameter field: The text field, held weakly.
  @MainActor
  public static func intoText(_ field: NSTextField) -> Diffuser<String> {
    .into { [weak field] text in field?.stringValue = text }
  }
}

extension Diffuser where State == Bool {
  /// A diffuser that sets the view's `isHidden` when the state changed (and on the first run).
  ///
  /// - Parameter view: The view, held weakly.
  @MainActor
  public static func intoHidden(_ view: NSView) -> Diffuser<Bool> {
    .into { [weak view] isHidden in view?.isHidden = isHidden }
  }
}
#endif
