/// Checks the timing parameters shared by the initialisers, naming the offending parameter.
func checkTiming(
  _ type: StaticString, interval: Duration, parameter: StaticString = "interval",
  maxWait: Duration? = nil, edges: Edges? = nil
) {
  precondition(interval >= .zero, "\(type): \(parameter) must not be negative (got \(interval))")
  if let maxWait {
    precondition(maxWait >= .zero, "\(type): maxWait must not be negative (got \(maxWait))")
  }
  if let edges {
    precondition(!edges.isEmpty, "\(type): edges must not be empty; pass .leading, .trailing or both")
  }
}
