import Foundation
import KVStore

/// Keys and values typed by people, converted with the collection's catalog entry.
enum ValueText {
    static func encoding(_ entry: CatalogEntry) throws -> KeyEncoding {
        guard let encoding = KeyEncoding(entry.keyEncoding) else {
            throw CLIError(.failure, "collection '\(entry.name)' has an unknown key encoding '\(entry.keyEncoding)' in the catalog")
        }
        return encoding
    }

    static func parseKey(_ text: String, entry: CatalogEntry) throws -> [UInt8] {
        do {
            let bytes = try encoding(entry).parse(text)
            guard !bytes.isEmpty, bytes.count <= Store.maxKeySize else {
                throw CLIError(.badInput, "the key \(shortQuoted(text)) encodes to \(bytes.count) bytes; keys must be 1 to \(Store.maxKeySize) bytes")
            }
            return bytes
        } catch let error as KeyDecodingError {
            throw CLIError(.badInput, "bad key for '\(entry.name)' (\(entry.keyEncoding)): \(error)")
        }
    }

    /// The byte prefix for `--prefix`: the first component of a tuple key, or the start of a string.
    static func parsePrefix(_ text: String, entry: CatalogEntry) throws -> [UInt8] {
        let keyEncoding = try encoding(entry)
        switch keyEncoding {
        case .tuple(let parts):
            var bytes: [UInt8] = []
            do {
                let first = try parts[0].parse(text)
                // Re-encode the first component in its non-terminal (escaped, terminated) form.
                if parts[0] == .string || parts[0] == .bytes {
                    bytes.appendEscaped(first)
                } else {
                    bytes = first
                }
            } catch {
                throw CLIError(.badInput, "bad prefix for '\(entry.name)' (\(entry.keyEncoding)): \(error)")
            }
            return bytes
        case .string:
            return text.encodedKey
        default:
            throw CLIError(.badInput, "--prefix needs a tuple or string key; '\(entry.name)' has \(entry.keyEncoding) keys")
        }
    }

    static func renderKey(_ bytes: [UInt8], entry: CatalogEntry) throws -> String {
        do {
            return try encoding(entry).render(bytes).description
        } catch {
            throw CLIError(.failure, "stored key 0x\(Hex.encode(bytes)) in '\(entry.name)' does not decode as \(entry.keyEncoding): \(error)")
        }
    }

    /// A stored key as JSON: arrays for tuples, numbers for integers, strings otherwise.
    static func keyJSON(_ bytes: [UInt8], entry: CatalogEntry) throws -> JSONValue {
        do {
            let key = try encoding(entry).render(bytes)
            return switch key {
            case .array, .integer, .unsigned: key.json
            case .text: .string(key.description)
            }
        } catch {
            throw CLIError(.failure, "stored key 0x\(Hex.encode(bytes)) in '\(entry.name)' does not decode as \(entry.keyEncoding): \(error)")
        }
    }

    /// A stored value as JSON.
    static func render(_ bytes: [UInt8], entry: CatalogEntry, key: String) throws -> JSONValue {
        switch entry.valueEncoding {
        case .cbor:
            do {
                return JSONValue(cbor: try CBORValue.decode(bytes))
            } catch {
                throw CLIError(.failure, "corrupt value in '\(entry.name)' at key \(key): \(error)")
            }
        case .bytes, .fixed, .other:
            return .string("0x" + Hex.encode(bytes))
        }
    }

    /// `text` quoted for an error message, cut to 40 characters.
    static func shortQuoted(_ text: String) -> String {
        text.count <= 40 ? JSONText.quoted(text) : JSONText.quoted(String(text.prefix(40))) + "…"
    }

    /// Refuses `put`, `delete` and a merging `load` of a collection KVStore or SyncKit keeps for itself
    /// (its name starts with `_`: history, its state and consumers, sync state) unless `--force`.
    static func requireNotInternal(_ collection: String, force: Bool, verb: String) throws {
        guard collection.hasPrefix("_"), !force else { return }
        throw CLIError(.badInput, "'\(collection)' is an internal collection (history, consumers or sync state); a hand-made \(verb) there can break them for good. Pass --force to \(verb) anyway")
    }

    static func requireWritable(_ entry: CatalogEntry) throws {
        guard entry.valueEncoding == .cbor else {
            throw CLIError(.badInput, "collection '\(entry.name)' stores \(entry.valueEncoding) values, which kvtool cannot write")
        }
        guard !entry.hasMaintainedData else {
            throw CLIError(.badInput, "collection '\(entry.name)' has indexes or derived collections that only the app can maintain; kvtool does not write it")
        }
    }
}

extension Array where Element == UInt8 {
    /// The non-terminal form of a variable-length key component: `00` escaped as `00 01`, then `00 00`.
    mutating func appendEscaped(_ component: [UInt8]) {
        for byte in component {
            append(byte)
            if byte == 0 { append(1) }
        }
        append(contentsOf: [0, 0])
    }
}
