/// Checks the timing parameters shared by the initialisers, naming the offending parameter.
func checkTiming(
  _ type: StaticString, interval: Duration, parameter: StaticString = "interval",
  maximumWait: Duration? = nil, edges: Edges? = nil
) {
  precondition(interval >= .zero, "\(type): \(parameter) must not be negative (got \(interval))")
  if let maximumWait {
    precondition(maximumWait >= .zero, "\(type): maximumWait must not be negative (got \(maximumWait))")
  }
  if let edges {
    precondition(!edges.isEmpty, "\(type): edges must not be empty; pass .leading, .trailing or both")
  }
}
