import Observation

// The model that PaceObservation's article fragments read (`model.query`), declared here rather
// than in the article's `example-in` template: DocC reads a line starting with `@` as a directive,
// even inside an HTML comment. See Scripts/extract-doc-examples.py.

/// An `@Observable` search model.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor @Observable final class ObservedSearchModel {
  var query = ""
}
