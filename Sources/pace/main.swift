import Foundation
import PaceTool

// A reader that goes away (`pace demo | head -3`) ends the output, not the process by SIGPIPE.
signal(SIGPIPE, SIG_IGN)
// All logic lives in PaceTool, where tests reach it; this only sets the exit status.
exit(PaceCLI.main(Array(CommandLine.arguments.dropFirst())))
