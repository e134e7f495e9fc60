/// Text from the input, made fit to quote in a one-line message.
///
/// Messages quote what they reject, but input can be ten megabytes on one line, or carry NUL
/// bytes and terminal escape codes. An excerpt escapes every character that could break the
/// line or drive the terminal and stops after ``limit`` characters, so a message stays one
/// short line whatever it quotes. The `pace` tool and the marble errors share it.
package enum Excerpt {
  /// How many characters of the offending text a message quotes.
  package static let limit = 60

  /// `text` between single quotes, escaped, and cut at `limit` characters with `…`:
  /// `quoted("a\u{1B}[31m")` is `'a\u{1B}[31m'`, written with a real backslash.
  package static func quoted(_ text: some StringProtocol, limit: Int = limit) -> String {
    "'" + escaped(text, limit: limit) + "'"
  }

  /// `text` with control, format and line-separator characters written as `\n`, `\t`, `\r`,
  /// `\0` or `\u{1B}`, cut at `limit` characters (Unicode scalars, counted after escaping) with `…`.
  ///
  /// Scalars, not `Character`s, are counted: one `Character` can be a megabyte of combining marks.
  package static func escaped(_ text: some StringProtocol, limit: Int = .max) -> String {
    var result = String.UnicodeScalarView()
    var count = 0
    for scalar in text.unicodeScalars {
      let escape = escapeSequence(for: scalar)
      let width = escape?.unicodeScalars.count ?? 1
      if count + width > limit {
        result.append("…")
        break
      }
      if let escape { result.append(contentsOf: escape.unicodeScalars) } else { result.append(scalar) }
      count += width
    }
    return String(result)
  }

  /// Whether `text` is safe to print as is: nothing ``escaped(_:limit:)`` would change.
  package static func isPlain(_ text: some StringProtocol) -> Bool {
    text.unicodeScalars.allSatisfy { escapeSequence(for: $0) == nil }
  }

  /// The escape for `scalar`, or `nil` if it prints as itself.
  private static func escapeSequence(for scalar: Unicode.Scalar) -> String? {
    // Printable ASCII is the common case; decide it without looking up properties.
    if scalar.value >= 0x20, scalar.value < 0x7F { return nil }
    switch scalar {
    case "\0": return "\\0"
    case "\n": return "\\n"
    case "\r": return "\\r"
    case "\t": return "\\t"
    // The zero-width joiner builds emoji (👩‍💻); it cannot move the cursor.
    case "\u{200D}": return nil
    default: break
    }
    switch scalar.properties.generalCategory {
    // Controls (C0, DEL, C1), bidirectional overrides and other invisible formats, line and
    // paragraph separators, and scalars no font draws.
    case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
      return "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
    default:
      return nil
    }
  }
}
