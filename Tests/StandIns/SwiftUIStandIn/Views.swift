// Views for the documents' examples (Tests/DocExamplesTests), which show PaceSwiftUI's modifiers
// in a whole screen: `Text`, `TextField`, `Button`, `VStack`, `List` over a collection (with the
// `ForEach` it builds), and `ViewBuilder` blocks of several views (`TupleView`). As in
// SwiftUIStandIn.swift, each has Apple's name and signature (iOS 17 SDK) or a stricter one, so
// what compiles here compiles against SwiftUI. They draw nothing and the host does not look
// inside them: an example is compiled, and the glue is tested on leaf views.

extension ViewBuilder {
  /// Builds a view of several views.
  public static func buildBlock<each Content: View>(
    _ content: repeat each Content
  ) -> TupleView<(repeat each Content)> {
    TupleView((repeat each content))
  }
}

/// A view of several views, as a `ViewBuilder` block builds it. Not main-actor isolated (its
/// conformance is in an extension), as `ViewBuilder`'s nonisolated functions create it.
public struct TupleView<T> {
  public var value: T

  public init(_ value: T) {
    self.value = value
  }
}

extension TupleView: View {
  public var body: Never { fatalError("TupleView has no body") }
}

/// A view that displays one or more lines of read-only text.
@MainActor @preconcurrency
public struct Text: View {
  let content: String

  /// Creates a text view that displays a string, without localizing it.
  public init<S: StringProtocol>(_ content: S) {
    self.content = String(content)
  }

  public var body: Never { fatalError("Text has no body") }
}

/// A control that displays an editable text interface.
@MainActor @preconcurrency
public struct TextField<Label: View>: View {
  let text: Binding<String>

  public var body: Never { fatalError("TextField has no body") }
}

extension TextField where Label == Text {
  /// Creates a text field with a text label generated from a title string.
  public init<S: StringProtocol>(_ title: S, text: Binding<String>) {
    self.text = text
  }
}

/// A control that initiates an action.
@MainActor @preconcurrency
public struct Button<Label: View>: View {
  let action: @MainActor () -> Void

  public var body: Never { fatalError("Button has no body") }
}

extension Button where Label == Text {
  /// Creates a button that generates its label from a string.
  public init<S: StringProtocol>(_ title: S, action: @escaping @MainActor () -> Void) {
    self.action = action
  }
}

/// A view that arranges its subviews in a vertical line.
@MainActor @preconcurrency
public struct VStack<Content: View>: View {
  let content: Content

  /// Creates an instance with the given content (the stand-in takes no alignment or spacing).
  public init(@ViewBuilder content: () -> Content) {
    self.content = content()
  }

  public var body: Never { fatalError("VStack has no body") }
}

/// A structure that computes views on demand from an underlying collection of identified data.
@MainActor @preconcurrency
public struct ForEach<Data: RandomAccessCollection, ID: Hashable, Content> {
  public var data: Data
  public var content: (Data.Element) -> Content
  let id: KeyPath<Data.Element, ID>
}

extension ForEach: View where Content: View {
  /// Creates an instance that computes views on demand over a collection, identified by a key path.
  public init(
    _ data: Data, id: KeyPath<Data.Element, ID>, @ViewBuilder content: @escaping (Data.Element) -> Content
  ) {
    self.data = data
    self.id = id
    self.content = content
  }

  public var body: Never { fatalError("ForEach has no body") }
}

/// A container that presents rows of data arranged in a single column.
@MainActor @preconcurrency
public struct List<SelectionValue: Hashable, Content: View>: View {
  let content: Content

  public var body: Never { fatalError("List has no body") }
}

extension List where SelectionValue == Never {
  /// Creates a list that identifies its rows by a key path to the underlying data.
  public init<Data: RandomAccessCollection, ID: Hashable, RowContent: View>(
    _ data: Data, id: KeyPath<Data.Element, ID>, @ViewBuilder rowContent: @escaping (Data.Element) -> RowContent
  ) where Content == ForEach<Data, ID, RowContent> {
    content = ForEach(data, id: id, content: rowContent)
  }
}
