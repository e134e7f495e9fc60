// Placeholder until the testing helpers land (issue 5).
import Pace
import PaceMarbles
