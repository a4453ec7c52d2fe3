// The property of the `dump` fuzz target: the parser behind `kvtool load` (DumpReader, in
// Sources/kvtool/Dump/). Not in fuzz/Properties/ because it needs kvtool's own
// types: scripts/fuzz.sh compiles this file into one module with those kvtool files, and the
// KVToolTests target compiles it through the symbolic link Tests/KVToolTests/DumpProperty.swift with
// `@testable import kvtool`. Either way it is this one copy.
import Foundation
import FuzzProperties
import KVStore
#if canImport(kvtool)
@testable import kvtool
#endif

/// On any bytes, `DumpReader.read` either throws a `CLIError` of kind `badInput` whose message is one
/// line, or returns a document in which every entry belongs to a database the header lists, with a
/// role from the catalog, a key of 1 to 511 bytes that a collection's key encoding renders, and as
/// many entries per database as the header declares. Nothing traps.
enum DumpProperty {
    /// Small caps, so that the limit checks meet hostile input too.
    static let limits = DumpLimits(maxLineBytes: 2048, maxInputBytes: 64 * 1024)

    static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let document: DumpDocument
        do {
            document = try DumpReader.read(input, limits: limits)
        } catch let error as CLIError {
            guard error.kind == .badInput else {
                throw PropertyViolation("DumpReader.read threw a CLIError of kind \(error.kind), not badInput: \(error)")
            }
            guard !error.message.isEmpty, !error.message.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) else {
                throw PropertyViolation("DumpReader.read: the error is not one line: \(error.message.debugDescription)")
            }
            return .rejected("badInput")
        } catch {
            throw PropertyViolation("DumpReader.read threw \(type(of: error)), not CLIError: \(error)")
        }
        var declared: [String: Int] = [:]
        for database in document.header.databases { declared[database.name, default: 0] += database.entries }
        var found: [String: Int] = [:]
        for entry in document.entries {
            guard declared[entry.database] != nil else {
                throw PropertyViolation("line \(entry.line): an entry of '\(entry.database)', which the header does not list")
            }
            guard let role = document.roles[entry.database] else {
                throw PropertyViolation("line \(entry.line): '\(entry.database)' has no role in the catalog")
            }
            guard (1...511).contains(entry.key.count) else {
                throw PropertyViolation("line \(entry.line): a key of \(entry.key.count) bytes was accepted")
            }
            if case .collection(let catalog) = role {
                guard let encoding = KeyEncoding(catalog.keyEncoding) else {
                    throw PropertyViolation("'\(entry.database)' was accepted with key encoding '\(catalog.keyEncoding)'")
                }
                do {
                    _ = try encoding.render(entry.key)
                } catch {
                    throw PropertyViolation("line \(entry.line): a key that \(encoding) does not render was accepted: \(error)")
                }
            }
            found[entry.database, default: 0] += 1
        }
        for (name, count) in declared where (found[name] ?? 0) != count {
            throw PropertyViolation("the header declares \(count) entries in '\(name)', the dump holds \(found[name] ?? 0)")
        }
        return .accepted
    }
}
