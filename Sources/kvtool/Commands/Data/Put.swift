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
            --merge sets the given members of the stored value, keeping the others; a member the type \
            does not have (a misspelt one, which the app would never read) is refused unless \
            --allow-unknown-members, which stores it as given. Elsewhere the JSON \
            is stored as given (a note says so). Collections with indexes or derived collections are \
            written only by the app, which maintains them. Collections whose name starts with _ are \
            KVStore's and SyncKit's own (history, sync state): see --force.
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: KeyArguments
    @Argument(help: "The value as JSON, or - for standard input.") var value: String
    @Flag(help: "Set the members of this JSON object in the stored value, keeping its other members.") var merge = false
    @Flag(help: "Store members that the app's type does not have (refused otherwise: a misspelt member would never be read).")
    var allowUnknownMembers = false
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
                if let typed {
                    try Self.refusing { try typed.type.check(encoded) }
                    try refuseUnknownMembers(try Self.unknownMembers(of: given, in: encoded, typed: typed.type), typed: typed.type)
                }
            } else if let typed {
                let decoded = try Self.refusing { try typed.type.fromJSON(json) }
                if case .map = given, case .map? = try? CBORValue.decode(decoded) {
                    // The given members the type left out (unknown ones, or nil optionals given as
                    // null), put back: what the type does not ask for among them is refused, or kept.
                    let candidate = try Self.merging(given, into: decoded, key: target.key, onlyAbsent: true).encoded()
                    let unknown = try Self.unknownMembers(of: given, in: candidate, typed: typed.type)
                    try refuseUnknownMembers(unknown, typed: typed.type)
                    encoded = unknown.isEmpty ? decoded
                        : try Self.merging(Self.members(of: given, named: Set(unknown)), into: decoded, key: target.key).encoded()
                } else {
                    encoded = decoded
                }
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

    /// The members of `given` (a JSON object) that the type does not ask for in `value`, which holds
    /// them. Members the stored value already had (a newer app's) are not the caller's, and not named.
    static func unknownMembers(of given: CBORValue, in value: [UInt8], typed: TypedValue) throws -> [String] {
        guard case .map(let members) = given else { return [] }
        let givenKeys = Set(members.compactMap { member -> String? in if case .text(let key) = member.key { key } else { nil } })
        return try refusing {
            do { return try typed.unknownMembers(value) } catch {
                throw TypedValue.Refusal(description: "the value is not a \(typed.typeName): \(TypedValue.reason(error))")
            }
        }.filter(givenKeys.contains)
    }

    /// The members of the JSON object `given` whose names are in `names`.
    static func members(of given: CBORValue, named names: Set<String>) -> CBORValue {
        guard case .map(let members) = given else { return given }
        return .map(members.filter { if case .text(let key) = $0.key { names.contains(key) } else { false } })
    }

    /// Refuses `unknown` members in one line, unless `--allow-unknown-members`.
    func refuseUnknownMembers(_ unknown: [String], typed: TypedValue) throws {
        guard !allowUnknownMembers, !unknown.isEmpty else { return }
        let names = unknown.map { KVStoreError.quote($0) }.joined(separator: ", ")
        throw CLIError(.badInput, "the \(typed.typeName) has no member\(unknown.count == 1 ? "" : "s") \(names) (--allow-unknown-members stores \(unknown.count == 1 ? "it" : "them") anyway); nothing was written")
    }

    /// The stored map with the members of `given` (a JSON object) set (with `onlyAbsent`, only those
    /// it does not have).
    static func merging(_ given: CBORValue, into stored: [UInt8], key: String, onlyAbsent: Bool = false) throws -> CBORValue {
        guard case .map(let members) = given else {
            throw CLIError(.badInput, "--merge takes a JSON object of the members to set")
        }
        guard case .map(var existing) = try CBORValue.decode(stored) else {
            throw CLIError(.badInput, "the value at key \(key) is not an object, so --merge cannot set members in it")
        }
        for member in members {
            if let i = existing.firstIndex(where: { $0.key == member.key }) {
                if !onlyAbsent { existing[i].value = member.value }
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
