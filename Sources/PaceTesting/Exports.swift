// `import PaceTesting` is all a test needs: the marble types (`MarbleHarness`, `MarbleDiagram`,
// ...) come with it, and Pace's own types too.
@_exported import Pace
@_exported import PaceMarbles
