/// Where a failure is reported: the caller's source location, in both frameworks' forms.
struct FailureLocation: Sendable {
  var fileID: String
  var filePath: StaticString
  var line: UInt
  var column: UInt

  /// The location a public wait or assertion receives as its last four arguments.
  init(_ fileID: String, _ filePath: StaticString, _ line: UInt, _ column: UInt) {
    self.fileID = fileID
    self.filePath = filePath
    self.line = line
    self.column = column
  }
}
