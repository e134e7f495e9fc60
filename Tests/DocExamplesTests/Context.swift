import Foundation
import Pace
import PaceUIOnStandIns
import UIKitStandIn

// The app that the documents' code fragments live in: the names they assume (`api`,
// `searchField`, `tableView`, ...), declared once so that every fragment compiles as written.
// UIKit is the stand-in that PaceUI's glue is tested against (Tests/StandIns/UIKitStandIn). Nothing
// here is called by a test: fragments are compiled, not run. See Scripts/extract-doc-examples.py.

struct Item: Sendable, Equatable {
  var title: String
}

/// The app's back end.
struct API: Sendable {
  /// Fire and forget, for `Debouncer`'s synchronous closures.
  func search(_ query: String) {}
  /// The results, for the async examples.
  func search(_ query: String) async throws -> [Item] { [] }
}

let api = API()

struct Offset: Sendable {
  var y = 0.0
}

func draw(_ offset: Offset) {}
func render(_ offset: Offset) async {}
func download(_ url: URL) async throws {}

let urls: [URL] = []
let scrollOffsets = AsyncStream<Offset> { $0.finish() }

struct ChunkedFile: Sendable {
  var chunks: AsyncStream<Data> { AsyncStream { $0.finish() } }
}

let file = ChunkedFile()

struct Socket: Sendable {
  func write(_ data: Data) async throws {}
}

let socket = Socket()

struct ChangeKinds: OptionSet, Sendable {
  let rawValue: Int
  static let items = ChangeKinds(rawValue: 1 << 0)
  static let title = ChangeKinds(rawValue: 1 << 1)
}

enum ScreenEventStore {
  static func send<Event>(_ event: Event) {}
}

let store = ScreenEventStore.self

@MainActor final class ScreenModel {
  var title = ""
}

@MainActor let model = ScreenModel()
@MainActor let searchField = UITextField()
@MainActor let tableView = UITableView()
@MainActor let titleLabel = UILabel()
@MainActor let spinner = UIView()
@MainActor let submitButton = UIButton()
@MainActor let retryButton = UIButton()
@MainActor var items: [Item] = []
@MainActor var results: [Item] = []
@MainActor let query = "swift"

final class ItemCell: UIView {}

extension UITextField {
  /// The app's own helper: `handler` runs with the text after each edit.
  func onChange(_ handler: @escaping @MainActor (String) -> Void) {}
  /// The text after each edit.
  var queries: AsyncStream<String> { AsyncStream { $0.finish() } }
}

extension UITableView {
  func register(_ cellClass: AnyClass?, forCellReuseIdentifier identifier: String) {}
}

extension UIResponder {
  static let keyboardDidShowNotification = Notification.Name("UIKeyboardDidShowNotification")
}

extension UIScrollView {
  func onScroll(_ handler: @escaping @MainActor (Offset) -> Void) {}
}

@MainActor let scrollView = UIScrollView()

/// A screen's state, for the fragments that render one in batches.
struct ScreenState: Equatable, Sendable {
  var title = ""
  var items: [Item] = []

  mutating func apply(_ change: Item) {
    items.append(change)
  }
}

@MainActor var state = ScreenState()
let batch: [Item] = []
@MainActor let titleDiffuser = Diffuser<ScreenState>.map(\.title, .into { _ in })
@MainActor let listDiffuser = Diffuser<ScreenState>.map(\.items, .into { _ in })
