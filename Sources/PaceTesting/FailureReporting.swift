import Testing
import XCTest

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

  var sourceLocation: SourceLocation {
    SourceLocation(fileID: fileID, filePath: "\(filePath)", line: Int(line), column: Int(column))
  }
}

/// Records a test failure in whichever framework is running: an issue in Swift Testing, an
/// `XCTFail` in XCTest.
func reportFailure(_ message: String, at location: FailureLocation) {
  if Test.current != nil {
    Issue.record(Comment(rawValue: message), sourceLocation: location.sourceLocation)
  } else {
    XCTFail(message, file: location.filePath, line: location.line)
  }
}
