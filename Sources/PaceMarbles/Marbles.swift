// Placeholder until the marble engine lands (issue 5).
import Pace
