/// `elements` escaped for an output format: each element `replacements` names becomes its
/// replacement, and `other` writes every other element. JSON strings and SVG text both escape
/// this way, each with its own table.
func escaping<Elements: Sequence>(
  _ elements: Elements, _ replacements: [Elements.Element: String],
  other: (Elements.Element, inout String) -> Void
) -> String where Elements.Element: Hashable {
  var escaped = ""
  for element in elements {
    if let replacement = replacements[element] {
      escaped += replacement
    } else {
      other(element, &escaped)
    }
  }
  return escaped
}
