#if PostgreSQL
import Foundation
import Testing
import TestSupport

/// The defaults the README states for `kvtool sync run` and `kvtool sync gateway` are the ones their
/// `--help` prints, which come from the libraries (`SyncGateway.Limits`, `SyncGateway.Options`,
/// `History.defaultMaxClockSkew`): a default changed in the library fails here until the README says
/// it (issue 48).
@Suite struct ReadmeDefaultsTests {
    /// `(default: VALUE)` of every option of `kvtool ARGUMENTS --help`, by its long name.
    static func helpDefaults(_ arguments: [String]) throws -> [String: String] {
        let help = try run(productsDirectory() + "/kvtool", arguments + ["--help"], environment: ["COLUMNS": "1000"], timeout: 60)
        #expect(help.status == 0, "\(help.stderr)")
        var options: [String: String] = [:]
        var current: (name: String, text: String)?
        func finish() {
            guard let (name, text) = current else { return }
            let flat = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            if let start = flat.range(of: "(default: ", options: .backwards), let end = flat[start.upperBound...].firstIndex(of: ")") {
                options[name] = String(flat[start.upperBound..<end])
            }
        }
        for line in help.stdout.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            if line.hasPrefix("  -"), let dashes = trimmed.range(of: "--") {
                finish()
                let name = trimmed[dashes.lowerBound...].prefix { $0 != " " && $0 != "," }
                current = (String(name), String(trimmed))
            } else if !line.hasPrefix("  ") {
                finish()
                current = nil
            } else {
                current?.text += " " + trimmed
            }
        }
        finish()
        return options
    }

    /// `` `--NAME …` (VALUE…) `` pairs of the README's table row that starts with `row`, when VALUE
    /// starts with a figure or an address.
    static func readmeDefaults(row: String) throws -> [String: String] {
        let readme = try String(contentsOfFile: ReadmeClaimsTests.root + "/README.md", encoding: .utf8)
        let line = try #require(readme.split(separator: "\n").first { $0.hasPrefix(row) }, "README.md has no row \(row)")
        let pattern = try NSRegularExpression(pattern: #"`(--[a-z0-9-]+)[^`]*` \(([0-9][0-9.,:]*(?: (?:s|KiB|MiB|GiB))?)"#)
        var found: [String: String] = [:]
        let text = String(line)
        for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            found[String(text[Range(match.range(at: 1), in: text)!])] = String(text[Range(match.range(at: 2), in: text)!])
        }
        return found
    }

    /// A README figure (`128 MiB`, `100,000`, `30 s`, `127.0.0.1:8391`) as `--help` prints it.
    static func normalized(_ text: String) -> String {
        if text.contains(":") { return text.trimmingCharacters(in: CharacterSet(charactersIn: ",")) }
        let parts = text.split(separator: " ")
        let number = Double(parts[0].replacingOccurrences(of: ",", with: "")) ?? .nan
        let scale: Double = switch parts.count > 1 ? String(parts[1]) : "" {
        case "KiB": 1024
        case "MiB": 1024 * 1024
        case "GiB": 1024 * 1024 * 1024
        default: 1
        }
        return Self.figure(number * scale)
    }

    /// `30.0` and `30` alike.
    static func figure(_ value: Double) -> String { value == value.rounded() ? String(Int64(value)) : String(value) }

    @Test(.blockingWork) func theReadmesDefaultsAreTheOnesHelpPrints() throws {
        var compared = 0
        for (row, command) in [("| `sync enable", ["sync", "run"]), ("| `sync setup`", ["sync", "gateway"])] {
            let stated = try Self.readmeDefaults(row: row)
            let printed = try Self.helpDefaults(command)
            for (option, figure) in stated.sorted(by: { $0.key < $1.key }) {
                let help = try #require(printed[option], "README.md states a default for kvtool \(command.joined(separator: " ")) \(option), which --help does not print")
                let helpFigure = help.contains(":") ? help : Self.figure(Double(help) ?? .nan)
                #expect(Self.normalized(figure) == helpFigure,
                        "README.md says kvtool \(command.joined(separator: " ")) \(option) defaults to \(figure); --help says \(help)")
                compared += 1
            }
        }
        // The README's rows state 12 defaults (11 of the gateway's, sync run's clock bound).
        #expect(compared >= 12, "only \(compared) defaults found in README.md")
    }
}
#endif
