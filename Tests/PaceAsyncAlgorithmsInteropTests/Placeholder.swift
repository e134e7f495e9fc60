import AsyncAlgorithms
import Pace
import Testing

@Test func placeholder() {}
