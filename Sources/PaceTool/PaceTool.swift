// Placeholder until the tool lands (issue 5).
import ArgumentParser
import Pace
import PaceMarbles
