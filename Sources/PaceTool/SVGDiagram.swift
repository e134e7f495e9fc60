import PaceMarbles

/// A marble diagram as SVG, for a design doc or a pull request: one lane per timeline on a
/// shared time axis, a marble per event at its exact time.
///
/// Marbles closer than a pixel are drawn once, so a million events make a file of a few
/// hundred kilobytes at most. Values of up to three characters are written in their marble
/// when the marbles are far enough apart.
enum SVGDiagram {
  static let width = 960
  static let labelWidth = 190
  static let laneHeight = 44
  static let top = 64
  static let right = 30

  static func render(title: String, subtitle: String, lanes: [Lane]) -> String {
    let horizon = max(TextDiagram.horizon(lanes), 1)
    let plotWidth = Double(width - labelWidth - right)
    let height = top + lanes.count * laneHeight + 50
    func x(_ time: Int64) -> Double {
      Double(labelWidth) + Double(time) / Double(horizon) * plotWidth
    }

    var svg = """
      <?xml version="1.0" encoding="UTF-8"?>
      <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)" \
      font-family="-apple-system, Helvetica, Arial, sans-serif" font-size="13">
      <rect width="100%" height="100%" fill="#ffffff"/>
      <text x="16" y="26" font-size="16" font-weight="bold">\(escape(title))</text>
      <text x="16" y="46" fill="#555555">\(escape(subtitle))</text>

      """

    for (index, lane) in lanes.enumerated() {
      let y = top + index * laneHeight + laneHeight / 2
      let color = index == 0 ? "#3b6ea8" : "#d9822b"
      svg += """
        <text x="16" y="\(y + 4)">\(escape(lane.label))</text>
        <line x1="\(labelWidth)" y1="\(y)" x2="\(width - right + 10)" y2="\(y)" stroke="#999999" stroke-width="1"/>

        """
      // One marble per pixel column; the values shown only when marbles have room.
      var pixels: [(x: Int, value: String, count: Int)] = []
      for (time, value) in zip(lane.times, lane.values) {
        let pixel = Int(x(time).rounded())
        if let last = pixels.last, last.x == pixel {
          pixels[pixels.count - 1].count += 1
        } else {
          pixels.append((pixel, value, 1))
        }
      }
      let minimumGap = zip(pixels.dropFirst(), pixels).map { $0.x - $1.x }.min() ?? Int.max
      let roomy = minimumGap >= 16
      for pixel in pixels {
        if roomy {
          svg += "<circle cx=\"\(pixel.x)\" cy=\"\(y)\" r=\"8\" fill=\"\(color)\"/>"
          let label = pixel.count > 1 ? "\(pixel.count)" : pixel.value
          if label.count <= 3 {
            svg +=
              "<text x=\"\(pixel.x)\" y=\"\(y + 4)\" font-size=\"10\" fill=\"#ffffff\" text-anchor=\"middle\">\(escape(label))</text>"
          }
          svg += "\n"
        } else {
          svg +=
            "<line x1=\"\(pixel.x)\" y1=\"\(y - 9)\" x2=\"\(pixel.x)\" y2=\"\(y + 9)\" stroke=\"\(color)\" stroke-width=\"2\"/>\n"
        }
      }
    }

    // The time axis.
    let axisY = top + lanes.count * laneHeight + 10
    svg +=
      "<line x1=\"\(labelWidth)\" y1=\"\(axisY)\" x2=\"\(width - right)\" y2=\"\(axisY)\" stroke=\"#333333\" stroke-width=\"1\"/>\n"
    let tick = TextDiagram.step(horizon: horizon, maxColumns: 9)
    var time: Int64 = 0
    while time <= horizon {
      let tickX = Int(x(time).rounded())
      svg += "<line x1=\"\(tickX)\" y1=\"\(axisY)\" x2=\"\(tickX)\" y2=\"\(axisY + 5)\" stroke=\"#333333\"/>"
      let label = time == 0 ? "0" : DurationText.format(.nanoseconds(time))
      svg += "<text x=\"\(tickX)\" y=\"\(axisY + 20)\" fill=\"#555555\" text-anchor=\"middle\">\(label)</text>\n"
      let (next, overflow) = time.addingReportingOverflow(tick)
      if overflow { break }
      time = next
    }
    svg += "</svg>\n"
    return svg
  }

  /// The characters SVG text escapes as entities.
  static let entities: [Character: String] = ["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&apos;"]

  static func escape(_ text: String) -> String {
    escaping(text, entities) { character, output in
      // XML 1.0 forbids most control characters, even escaped.
      if let scalar = character.unicodeScalars.first, scalar.value < 0x20, scalar != "\t", scalar != "\n" {
        output += "\u{FFFD}"
      } else {
        output.append(character)
      }
    }
  }
}
