import Testing
import XCTest

extension FailureLocation {
  /// The location in Swift Testing's form.
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
