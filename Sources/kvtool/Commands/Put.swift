import ArgumentParser
import Foundation
import KVStore

/// `kvtool put <collection> <key> <json>`.
struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Store a JSON value (as CBOR) at a key.",
        discussion: """
            Pass - as the value to read it from standard input. Where an app registered the collection's \
            type with kvtool (\(KVToolApps.putTargets.joined(separator: ", "))), the \
            value is decoded as that type and checked as the app checks it before it is written, and \
            --merge sets the given members of the stored value, keeping the others. Elsewhere the JSON \
            is stored as given (a note says so). Collections with indexes or derived collections are \
            written only by the app, which maintains them. Collections whose name starts with _ are \
            KVStore's and SyncKit's own (history, sync state): see --force.
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: KeyArguments
    @Argument(help: "The value as JSON, or - for standard input.") var value: String
    @Flag(help: "Set the members of this JSON object in the stored value, keeping its other members.") var merge = false
    @Flag(help: "Write an internal collection (_…). A hand-made entry there can break history, its consumers or sync, and `kvtool check` then fails.")
    var force = false

    func run() throws {
        try ValueText.requireNotInternal(target.collection, force: force, verb: "put")
        let json = try Output.readArgument(value)
        let container = try global.openContainer(readOnly: false)
        let (_, raw, keyBytes) = try target.resolve(in: container, forWriting: true)
        let typed = KVToolApps.typedValue(forCollection: target.collection)
        let given = try JSONBridge.cbor(fromJSON: json)
        try container.store.write(author: global.author) { tx in
            let encoded: [UInt8]
            if merge {
                guard let stored = try raw.get(keyBytes, in: tx) else {
                    throw CLIError(.notFound, "no value at key \(target.key) in '\(target.collection)' to merge into (put it without --merge)")
                }
                encoded = try Self.merging(given, into: stored, key: target.key).encoded()
                if let typed { try Self.refusing { try typed.type.check(encoded) } }
            } else if let typed {
                encoded = try Self.refusing { try typed.type.fromJSON(json) }
            } else {
                encoded = given.encoded()
            }
            try raw.put(encoded, forKey: keyBytes, in: tx)
        }
        if typed == nil && !global.json {
            Dump.note("no app registered with kvtool types '\(target.collection)': the JSON was stored as given")
        }
        if global.json {
            try Output.json(["collection": .string(target.collection), "key": .string(target.key), "stored": true,
                             "merged": .bool(merge), "checkedAs": typed.map { .string($0.type.typeName) } ?? .null])
        }
    }

    /// The stored map with the members of `given` (a JSON object) set.
    static func merging(_ given: CBORValue, into stored: [UInt8], key: String) throws -> CBORValue {
        guard case .map(let members) = given else { throw CLIError(.badInput, "--merge takes a JSON object of the members to set") }
        guard case .map(var existing) = try CBORValue.decode(stored) else {
            throw CLIError(.badInput, "the value at key \(key) is not an object, so --merge cannot set members in it")
        }
        for member in members {
            if let i = existing.firstIndex(where: { $0.key == member.key }) {
                existing[i].value = member.value
            } else {
                existing.append(member)
            }
        }
        return .map(existing)
    }

    static func refusing<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let refusal as TypedValue.Refusal {
            throw CLIError(.badInput, refusal.description + "; nothing was written")
        }
    }
}
