// Placeholder until the UIKit/AppKit glue lands (issue 3).
import Pace
