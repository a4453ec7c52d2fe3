import Foundation
import KVStore
import Workloads

/// The Swift type an app stores in one of its collections, so that `kvtool put` writes only values
/// the app can read: JSON is decoded as the type (and checked as the app checks it), then encoded as
/// the app encodes it; a merged value (`put --merge`) must decode as the type before it is written.
struct TypedValue: Sendable {
    /// The type's name, for messages.
    let typeName: String
    /// JSON text to the stored bytes, through the type.
    let fromJSON: @Sendable (_ json: String) throws -> [UInt8]
    /// Throws unless the stored bytes decode as the type (and pass its checks): the one test of a
    /// value that `kvtool put`, `kvtool check` and `kvtool sync` (for what it pulls) all apply.
    let check: @Sendable (_ stored: [UInt8]) throws -> Void
    /// The top-level members of stored bytes (a map) that the type does not ask for while decoding them.
    let unknownMembers: @Sendable (_ stored: [UInt8]) throws -> [String]

    /// Why a value was refused, in one line.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    static func of<T: Codable & Sendable>(_ type: T.Type, validate: @escaping @Sendable (T) throws -> Void = { _ in }) -> TypedValue {
        let name = String(describing: type)
        return TypedValue(
            typeName: name,
            fromJSON: { json in
                let decoder = JSONDecoder()
                decoder.dateDecodingStrategy = .custom { decoder in
                    let container = try decoder.singleValueContainer()
                    if let seconds = try? container.decode(Double.self) { return Date(timeIntervalSince1970: seconds) }
                    let text = try container.decode(String.self)
                    // What kvtool prints a date as (UTC, without a zone: `get`, `scan`) is taken back.
                    guard let date = KeyEncoding.parseISO8601(text) ?? Self.utcWithoutZone(text) else {
                        throw DecodingError.dataCorruptedError(in: container, debugDescription: "\(KVStoreError.quote(text)) is not an ISO 8601 date")
                    }
                    return date
                }
                let value: T
                do {
                    value = try decoder.decode(T.self, from: Data(json.utf8))
                } catch {
                    throw Refusal(description: "the value is not a \(name): \(Self.reason(error))")
                }
                try checked(value, name: name, validate)
                return try CBOREncoder().encode(value)
            },
            check: { bytes in
                let value: T
                do {
                    value = try CBORDecoder().decode(T.self, from: bytes)
                } catch {
                    throw Refusal(description: "the value is not a \(name): \(Self.reason(error))")
                }
                try checked(value, name: name, validate)
            },
            unknownMembers: { bytes in try CBORUnknownFields.unknownKeys(T.self, in: bytes) })
    }

    /// ``check`` for values that come in from a sync: the refusal names the app, as `kvtool check`'s does.
    func incoming(app: String) -> @Sendable (_ stored: [UInt8]) throws -> Void {
        let check = self.check
        return { bytes in
            do { try check(bytes) } catch let refusal as Refusal {
                throw Refusal(description: refusal.description + " (the \(app) app cannot read it)")
            }
        }
    }

    /// A date as kvtool prints one (`2024-12-31T15:00:00.000`: UTC, without a zone designator), or
    /// `nil` for text that has a zone or is not a date.
    static func utcWithoutZone(_ text: String) -> Date? {
        guard let time = text.firstIndex(of: "T"), !text[time...].contains(where: { $0 == "Z" || $0 == "z" || $0 == "+" || $0 == "-" })
        else { return nil }
        return KeyEncoding.parseISO8601(text + "Z")
    }

    private static func checked<T>(_ value: T, name: String, _ validate: (T) throws -> Void) throws {
        do {
            try validate(value)
        } catch {
            throw Refusal(description: "the \(name) is not valid: \(error)")
        }
    }

    /// A decoding error in one line: what is missing or wrong, and where.
    static func reason(_ error: any Error) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty ? "the value" : keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "\(path(context.codingPath)): \(context.debugDescription)"
        case DecodingError.dataCorrupted(let context):
            return "\(path(context.codingPath)): \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }
}

/// The demo's subscriptions app and notification inbox, registered for their value types (the
/// checklist app is ``ChecklistApp``).
struct SubscriptionsApp: KVToolApp {
    let name = "subscriptions"

    var integrityChecks: [IntegrityCheck] { [.billingEvents] }

    var typedCollections: [String] { ["subscriptions", "billingEvents", PushSDKStore.collectionName] }
    /// `billingEvents` has the index `bySubscription`.
    var collectionsOnlyTheAppWrites: Set<String> { ["billingEvents"] }

    func typedValue(forCollection collection: String) -> TypedValue? {
        switch collection {
        case "subscriptions": .of(Subscription.self) { try $0.validate() }
        case "billingEvents": .of(BillingEvent.self) { try $0.validate() }
        case PushSDKStore.collectionName: .of(ReceivedNotification.self)
        default: nil
        }
    }
}
