#if PACE_UI_STAND_IN
import UIKitStandIn
#elseif canImport(UIKit) && !os(watchOS)
import UIKit
#endif

#if PACE_UI_STAND_IN || (canImport(UIKit) && !os(watchOS))
import Pace

/// The reloads of every table view, coalesced per table view.
@MainActor private let tableViewReloads = UpdateCoalescer<UITableView> { $0.reloadData() }
/// The reloads of every collection view, coalesced per collection view.
@MainActor private let collectionViewReloads = UpdateCoalescer<UICollectionView> { $0.reloadData() }

extension UITableView {
  /// Asks for a `reloadData()` on the main queue's next turn; however many times it is called
  /// in one turn, the table view reloads once.
  ///
  /// ```swift
  /// NotificationCenter.default.addObserver(forName: .todoItemChanged, object: nil, queue: .main) { _ in
  ///   MainActor.assumeIsolated { tableView.setNeedsReloadData() }   // "Complete all": one reload
  /// }
  /// ```
  ///
  /// Built on ``UpdateCoalescer``; the table view is held weakly until then.
  public func setNeedsReloadData() {
    tableViewReloads.setNeedsUpdate(self)
  }

  /// Reloads now if a reload was asked for and has not happened yet, like `layoutIfNeeded()`.
  public func reloadDataIfNeeded() {
    tableViewReloads.updateIfNeeded(self)
  }
}

extension UICollectionView {
  /// Asks for a `reloadData()` on the main queue's next turn; however many times it is called
  /// in one turn, the collection view reloads once.
  public func setNeedsReloadData() {
    collectionViewReloads.setNeedsUpdate(self)
  }

  /// Reloads now if a reload was asked for and has not happened yet, like `layoutIfNeeded()`.
  public func reloadDataIfNeeded() {
    collectionViewReloads.updateIfNeeded(self)
  }
}
#endif
