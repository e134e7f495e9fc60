import Foundation
import PaceTool

// All logic lives in PaceTool, where tests reach it; this only sets the exit status.
exit(PaceCLI.main(Array(CommandLine.arguments.dropFirst())))
