#if Serve
import Foundation
import KVStore
import NIOHTTP1
import SyncKit

/// The answers of `kvtool serve`, one function per endpoint (the contract is in
/// `Sources/KVStore/Documentation.docc/InspectingInABrowser.md`). Every handler is synchronous and short: it runs on the server's
/// thread pool, reads in one transaction where it reads the store, and bounds what it returns.
struct ServeAPI: Sendable {
    let container: SharedContainer
    let allowWrites: Bool
    let author: String

    func respond(_ request: ServeRequest) -> ServeResponse {
        do {
            return try route(request)
        } catch let error as ServeError {
            return .error(error.status, error.message)
        } catch let error as CLIError {
            // kvtool's own checks (a key that does not parse, a collection it does not write), with
            // the HTTP words for the command line's.
            let message = error.message.replacingOccurrences(of: "--prefix needs", with: "prefix= needs")
            return .error(Self.status(error.kind), message)
        } catch {
            let mapped = CLIError(mapping: error)
            return .error(mapped.map { Self.status($0.kind) } ?? .internalServerError, mapped?.message ?? "\(error)")
        }
    }

    static func status(_ kind: CLIError.Kind) -> HTTPResponseStatus {
        switch kind {
        case .notFound: .notFound
        case .usage, .badInput: .badRequest
        case .failure: .internalServerError
        case .clockSkew, .unavailable, .held: .serviceUnavailable
        case .credential: .forbidden
        }
    }

    /// One route: its method, its path, the page's tab that shows it (if one does), and what answers it.
    struct Route: Sendable {
        var method: HTTPMethod
        var path: String
        var view: View?
        var answer: @Sendable (ServeAPI, ServeRequest) throws -> ServeResponse

        init(method: HTTPMethod, path: String, view: View? = nil,
             answer: @escaping @Sendable (ServeAPI, ServeRequest) throws -> ServeResponse) {
            self.method = method
            self.path = path
            self.view = view
            self.answer = answer
        }
    }

    /// A tab of the page: its name in the address (`#tab`) and its label. The page builds its tabs
    /// from these (``ServeAnswer/Overview/views``), in the table's order, and draws a tab app.js has no
    /// drawing for as its route's answer, indented.
    struct View: Sendable {
        var tab: String
        var label: String
    }

    /// Every route of the server, in one table: a new view is one entry here, with its ``View``; a
    /// drawing of its own in app.js is optional. `GET /api/events` is answered by ``ServeServer`` itself
    /// (a stream, not a response).
    static let table: [Route] = [
        Route(method: .GET, path: "/") { _, _ in asset(PackageResources.index_html, "text/html; charset=utf-8") },
        Route(method: .GET, path: "/index.html") { _, _ in asset(PackageResources.index_html, "text/html; charset=utf-8") },
        Route(method: .GET, path: "/app.css") { _, _ in asset(PackageResources.app_css, "text/css; charset=utf-8") },
        Route(method: .GET, path: "/app.js") { _, _ in asset(PackageResources.app_js, "text/javascript; charset=utf-8") },
        Route(method: .GET, path: "/api/overview") { api, _ in try api.overview() },
        Route(method: .GET, path: "/api/catalog", view: View(tab: "catalog", label: "Catalog")) { api, _ in try api.catalog() },
        Route(method: .GET, path: "/api/collection", view: View(tab: "collection", label: "Collection")) { api, request in
            try api.collection(request.query)
        },
        Route(method: .GET, path: "/api/defaults", view: View(tab: "defaults", label: "Defaults")) { api, _ in try api.defaults() },
        Route(method: .GET, path: "/api/files", view: View(tab: "files", label: "Files")) { api, request in
            try api.files(request.query["dir"] ?? "")
        },
        Route(method: .GET, path: "/api/file") { api, request in try api.file(try request.required("path")) },
        Route(method: .GET, path: "/api/timeline", view: View(tab: "timeline", label: "Timeline")) { api, request in
            try api.timeline(limit: try request.integer("limit", default: 200, in: 1...ServeLimits.listing))
        },
        Route(method: .GET, path: "/api/consumers", view: View(tab: "consumers", label: "Consumers")) { api, _ in try api.consumers() },
        Route(method: .GET, path: "/api/sync", view: View(tab: "sync", label: "Sync")) { api, _ in try api.sync() },
        Route(method: .GET, path: "/api/snapshots", view: View(tab: "snapshots", label: "Snapshots")) { api, _ in try api.snapshots() },
        Route(method: .GET, path: "/api/readers", view: View(tab: "readers", label: "Readers")) { api, _ in try api.readers() },
        Route(method: .GET, path: "/api/dashboard", view: View(tab: "dashboard", label: "Dashboard")) { api, _ in try api.dashboard() },
        Route(method: .GET, path: "/api/events") { _, _ in .error(.badRequest, "the event stream is answered by the server") },
        Route(method: .POST, path: "/api/put") { api, request in try api.put(request) },
        Route(method: .POST, path: "/api/delete") { api, request in try api.delete(request) },
    ]

    private func route(_ request: ServeRequest) throws -> ServeResponse {
        let candidates = Self.table.filter { $0.path == request.path }
        if let route = candidates.first(where: { $0.method == request.method }) { return try route.answer(self, request) }
        if !candidates.isEmpty { return .error(.methodNotAllowed, "\(request.method) is not allowed on \(request.path)") }
        return .error(.notFound, "no such page: \(JSONText.quoted(String(request.path.prefix(200))))")
    }

    private static func asset(_ bytes: [UInt8], _ type: String) -> ServeResponse {
        ServeResponse(status: .ok, contentType: type, body: bytes)
    }

    private var store: Store { container.store }

    /// The history, where some process has created it (a read-only open cannot).
    private var history: History? { CommitFollower.attachHistory(store) }

    // MARK: - The container

    func overview() throws -> ServeResponse {
        let catalog = try store.catalog()
        let history = history
        let recorded = try catalog.compactMap { entry -> String? in
            guard !entry.name.hasPrefix("_"), let history else { return nil }
            let target: Mutation.Target = entry.kind == .defaults ? .defaults(entry.name) : .collection(entry.name)
            return try history.isEnabled(target) ? "\(entry.kind.rawValue):\(entry.name)" : nil
        }
        return try .json(ServeAnswer.Overview(
            group: container.groupIdentifier.rawValue, path: container.path, transaction: try store.read { $0.transactionID },
            writesAllowed: allowWrites, history: recorded, serverTime: HistoryText.timestamp(Date()),
            views: Self.table.compactMap { route in route.view.map { ServeAnswer.View(tab: $0.tab, label: $0.label, api: route.path) } }))
    }

    func catalog() throws -> ServeResponse {
        try .json(ServeAnswer.Catalog(entries: try store.catalogWithCounts().map { try Collections.json($0.entry, count: $0.count) }))
    }

    // MARK: - A collection, a page at a time

    func collection(_ query: [String: String]) throws -> ServeResponse {
        guard let name = query["name"], !name.isEmpty else { throw ServeError(.badRequest, "name the collection: ?name=") }
        let limit = try ServeRequest.integer(query, "limit", default: 50, in: 1...ServeLimits.pageSize)
        let reverse = query["reverse"] == "1" || query["reverse"] == "true"
        let (entry, raw) = try store.untypedCollection(named: name)
        var range = try Self.range(query, entry: entry)
        if let after = query["after"], !after.isEmpty {
            // The cursor is the last key shown, in hex: the next page starts just past it.
            guard let bytes = Hex.decode(after.utf8), !bytes.isEmpty, bytes.count <= Store.maxKeySize else {
                throw ServeError(.badRequest, "after= must be the hex of a key, as next gives it")
            }
            if reverse { range.upper = .exclusive(ByteKey(bytes)) } else { range.lower = .exclusive(ByteKey(bytes)) }
        }
        var rows: [ServeAnswer.Row] = []
        var lastKey: [UInt8] = []
        var next: String?
        var count = 0
        try store.read { tx in
            count = try raw.count(in: tx)
            try raw.forEachBytes(range, reverse: reverse, in: tx) { key, value in
                guard rows.count < limit else {
                    next = Hex.encode(lastKey)
                    return false
                }
                lastKey = Array(key)
                rows.append(Self.row(key: lastKey, value: value, entry: entry))
                return true
            }
        }
        // (JSONSerialization took half the time of a page of 100 records: measured. The JSONWriter
        // writes a JSONValue straight to text.)
        return try .jsonInOrder(ServeAnswer.Page(name: name, keyEncoding: entry.keyEncoding, valueEncoding: entry.valueEncoding.description,
                                                 count: count, entries: rows, next: next))
    }

    /// The range a query names: a prefix, or from/through, or everything.
    static func range(_ query: [String: String], entry: CatalogEntry) throws -> KeyRange<ByteKey> {
        let given = { (name: String) -> String? in query[name].flatMap { $0.isEmpty ? nil : $0 } }
        if let prefix = given("prefix") {
            guard given("from") == nil, given("through") == nil else {
                throw ServeError(.badRequest, "search by prefix or by from/through, not both")
            }
            let bytes = try ValueText.parsePrefix(prefix, entry: entry)
            return KeyRange(lower: .inclusive(ByteKey(bytes)), upper: ByteRangeHelper.prefixUpper(bytes))
        }
        return KeyRange(lower: try given("from").map { .inclusive(ByteKey(try ValueText.parseKey($0, entry: entry))) } ?? .unbounded,
                        upper: try given("through").map { .inclusive(ByteKey(try ValueText.parseKey($0, entry: entry))) } ?? .unbounded)
    }

    /// One entry for the page: its key rendered and in hex, its value pretty-printed and cut.
    static func row(key: [UInt8], value: UnsafeRawBufferPointer, entry: CatalogEntry) -> ServeAnswer.Row {
        let keyText = (try? ValueText.renderKey(key, entry: entry)) ?? "0x" + Hex.encode(key)
        let shown: String
        if value.count > ServeLimits.decodedValueBytes {
            shown = "(\(value.count) bytes: not decoded for display, over \(ServeLimits.decodedValueBytes >> 20) MiB)"
        } else if entry.valueEncoding == .cbor {
            shown = (try? CBORValue.decode(Array(value))).map(Self.pretty)
                ?? "(\(value.count) bytes that do not decode as CBOR: 0x\(Hex.encode(Array(value.prefix(64))))…)"
        } else {
            // Shown as the JSON string it would be.
            shown = "\"0x" + Hex.encode(Array(value.prefix(ServeLimits.valueCharacters / 2))) + "\""
        }
        let (text, truncated) = Self.cut(shown)
        return ServeAnswer.Row(key: keyText, keyHex: Hex.encode(key), value: text, size: value.count,
                               truncated: truncated || value.count > ServeLimits.decodedValueBytes)
    }

    /// A stored value as indented JSON, two spaces a level, each member on its own line.
    static func pretty(_ value: CBORValue) -> String {
        // Converted from CBOR: no NaN, and repeated keys allowed, so writing cannot fail.
        (try? prettyWriter.render(JSONValue(cbor: value))) ?? "null"
    }

    private static let prettyWriter = JSONWriter(layout: .pretty, indent: 2, lineWidth: 0, trailingNewline: false, requiresUniqueKeys: false)

    /// At most ``ServeLimits/valueCharacters`` characters, and whether it was cut.
    static func cut(_ text: String) -> (String, Bool) {
        guard text.utf8.count > ServeLimits.valueCharacters else { return (text, false) }
        let end = text.index(text.startIndex, offsetBy: ServeLimits.valueCharacters, limitedBy: text.endIndex) ?? text.endIndex
        return (String(text[..<end]), end < text.endIndex)
    }

    // MARK: - Defaults

    func defaults() throws -> ServeResponse {
        let suites = try store.catalog().filter { $0.kind == .defaults }.map(\.name).sorted()
        let listed = try suites.map { suite in
            let defaults = try container.defaults(suite: suite)
            let keys = try defaults.keys()
            let entries = try keys.prefix(ServeLimits.listing).map { key in
                let value = try defaults.cborValue(forKey: key)
                let (text, truncated) = Self.cut(value.map(Self.pretty) ?? "null")
                return ServeAnswer.Setting(key: key, value: text, type: value.map(Self.typeName) ?? "null", truncated: truncated)
            }
            return ServeAnswer.Suite(suite: suite, entries: entries, count: keys.count)
        }
        return try .json(ServeAnswer.Defaults(suites: listed))
    }

    static func typeName(_ value: CBORValue) -> String {
        switch value {
        case .unsigned, .negative: "int"
        case .float: "float"
        case .text: "string"
        case .bytes: "data"
        case .bool: "bool"
        case .null, .undefined, .simple: "null"
        case .array: "array"
        case .map: "dictionary"
        case .tagged(let tag, _): tag == CBORTag.epochDate || tag == CBORTag.referenceDate ? "date" : tag == CBORTag.uuid ? "uuid" : "tagged"
        }
    }

    // MARK: - Files/

    func files(_ directory: String) throws -> ServeResponse {
        let entries = try container.files.entries(in: directory)
        let within = directory.isEmpty ? "" : directory + "/"
        let replicated = try container.files.fileStatus().lazy.filter { $0.path.hasPrefix(within) }.prefix(ServeLimits.listing).map {
            ServeAnswer.ReplicatedFile(path: $0.path, state: $0.state.rawValue, sha256: Hex.encode(Array($0.entry.sha256)),
                                       type: $0.entry.type, size: $0.entry.size, problem: $0.problem)
        }
        return try .json(ServeAnswer.Files(dir: directory, count: entries.count, entries: entries.prefix(ServeLimits.listing).map {
            ServeAnswer.File(name: $0.name, path: $0.path, kind: Files.kindName($0.kind), size: $0.size,
                             modified: Snapshot.timestamp($0.modificationDate), image: $0.kind == .file && Self.imageType(name: $0.name) != nil)
        }, replicated: Array(replicated)))
    }

    /// A file's bytes through the same checks as `kvtool files cat` (SharedFiles: no `..`, no
    /// absolute path, no link followed). An image is served as its type only if its bytes say so.
    func file(_ path: String) throws -> ServeResponse {
        let data = try container.files.read(path, maxSize: ServeLimits.fileBytes)
        let bytes = Array(data)
        if let type = Self.imageType(name: path), Self.imageSignatures[type].map({ bytes.starts(with: $0) }) == true {
            return ServeResponse(status: .ok, contentType: type, body: bytes)
        }
        let isText = String(validating: bytes, as: UTF8.self) != nil
        return ServeResponse(status: .ok, contentType: isText ? "text/plain; charset=utf-8" : "application/octet-stream",
                             headers: isText ? [] : [("Content-Disposition", "attachment")], body: bytes)
    }

    static func imageType(name: String) -> String? {
        switch name.split(separator: ".").last?.lowercased() {
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "gif": "image/gif"
        case "webp": "image/webp"
        default: nil
        }
    }

    static let imageSignatures: [String: [UInt8]] = [
        "image/png": [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "image/jpeg": [0xFF, 0xD8, 0xFF],
        "image/gif": Array("GIF8".utf8), "image/webp": Array("RIFF".utf8),
    ]

    // MARK: - History, snapshots, readers

    /// Who owns sync, how far the server has this container's history, the last error. Unavailable
    /// where no process has written history or sync status yet (a read-only open creates neither).
    func sync() throws -> ServeResponse {
        guard history != nil, let service = try? SyncService(container: container) else {
            return try .json(ServeAnswer.Sync(available: false, status: nil))
        }
        return try .json(ServeAnswer.Sync(available: true, status: try service.status()))
    }

    func consumers() throws -> ServeResponse {
        guard let history else { return try .json(ServeAnswer.Consumers(current: 0, historyEnabled: false, consumers: [])) }
        let current = try history.currentToken().rawValue
        return try .json(ServeAnswer.Consumers(current: current, historyEnabled: true, consumers: try history.consumers().map {
            ServeAnswer.Consumer(name: $0.name, token: $0.token.rawValue, behind: current - min($0.token.rawValue, current),
                                 updatedAt: HistoryText.timestamp($0.updatedAt))
        }))
    }

    func timeline(limit: Int) throws -> ServeResponse {
        let transaction = try store.read { $0.transactionID }
        guard let history else { return try .json(ServeAnswer.Timeline(transaction: transaction, events: [])) }
        let text = try HistoryText(store: store)
        let (current, purged) = (try history.currentToken(), try history.purgedThrough())
        let since = ChangeToken(rawValue: max(purged.rawValue, current.rawValue - min(current.rawValue, UInt64(limit))))
        var events: [ServeAnswer.Commit] = []
        if case .changes(let transactions, _) = try history.changes(since: since) {
            events = transactions.map { committed in
                CommitFeed.json(CommitFollower.Commit(transactionID: committed.transactionID, seen: committed.timestamp,
                                                      entries: committed.entries), text: text)
            }
        }
        // The events are the very JSON the live stream sends, in the same order.
        return try .jsonInOrder(ServeAnswer.Timeline(transaction: transaction, events: events))
    }

    func snapshots() throws -> ServeResponse {
        let snapshots = try Snapshots(directory: container.layout.snapshots, create: false)
        let entries: [SnapshotEntry]
        let verification: SnapshotVerification
        do {
            entries = try snapshots.list()
            verification = try snapshots.verify()
        } catch let error as SnapshotError {
            if case .noSnapshots = error { return try .json(ServeAnswer.Snapshots(snapshots: [], problems: [])) }
            return try .json(ServeAnswer.Snapshots(snapshots: [], problems: [error.description]))
        }
        return try .json(ServeAnswer.Snapshots(snapshots: entries.map { entry in
            var object = Snapshot.json(entry)
            let problems = verification.problems.filter { $0.generation == entry.generation || $0.file == entry.file }
            object["status"] = .string(problems.isEmpty ? "ok" : problems.map(\.description).joined(separator: "; "))
            return object
        }, problems: verification.problems.map(\.description)))
    }

    func readers() throws -> ServeResponse {
        let me = getpid()
        return try .json(ServeAnswer.Readers(readers: try store.readerSlots().map { slot in
            ServeAnswer.Reader(pid: slot.pid, thread: String(slot.thread, radix: 16), transactionID: slot.transactionID,
                               alive: slot.processAlive, isSelf: slot.pid == me, process: Readers.processName(slot.pid))
        }))
    }

    // MARK: - The dashboard

    /// The dashboard of the app that registered one for this container (``KVToolApps``).
    func dashboard() throws -> ServeResponse {
        try .json(try KVToolApps.dashboard(of: container))
    }

    // MARK: - Writes (--allow-writes)

    func put(_ request: ServeRequest) throws -> ServeResponse {
        let body = try writeBody(request)
        guard let value = body["value"] else { throw ServeError(.badRequest, "the body needs a \"value\"") }
        let (collection, key) = (try Self.string(body, "collection"), try Self.string(body, "key"))
        let (entry, raw) = try store.untypedCollection(named: collection)
        try ValueText.requireWritable(entry)
        let keyBytes = try ValueText.parseKey(key, entry: entry)
        let encoded = try JSONBridge.cbor(value).encoded()
        let transaction = try store.write(author: author) { tx in
            try raw.put(encoded, forKey: ByteKey(keyBytes), in: tx)
            return tx.transactionID
        }
        return try .json(ServeAnswer.Stored(transaction: transaction))
    }

    func delete(_ request: ServeRequest) throws -> ServeResponse {
        let body = try writeBody(request)
        let (collection, key) = (try Self.string(body, "collection"), try Self.string(body, "key"))
        let (entry, raw) = try store.untypedCollection(named: collection)
        try ValueText.requireWritable(entry)
        let keyBytes = try ValueText.parseKey(key, entry: entry)
        let deleted = try store.write(author: author) { tx in try raw.delete(ByteKey(keyBytes), in: tx) }
        return try .json(ServeAnswer.Deleted(deleted: deleted))
    }

    /// The JSON object of a write, once writes are allowed and the request is one a page of another
    /// site could not send without asking (JSON content type).
    private func writeBody(_ request: ServeRequest) throws -> [String: JSONNode] {
        guard allowWrites else {
            throw ServeError(.forbidden, "read-only: start kvtool serve with --allow-writes to change data")
        }
        guard request.headers["content-type"].first?.lowercased().hasPrefix("application/json") == true else {
            throw ServeError(.unsupportedMediaType, "send the body as Content-Type: application/json")
        }
        // The JSON reader of kvtool put and load: strict, a repeated member refused, numbers kept as
        // typed (1.0 stays a float).
        guard case .object(let members)? = (try? JSONBridge.parse(request.body))?.kind else {
            throw ServeError(.badRequest, "the body is not a JSON object")
        }
        return Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    private static func string(_ body: [String: JSONNode], _ name: String) throws -> String {
        guard case .string(let value)? = body[name]?.kind, !value.isEmpty else {
            throw ServeError(.badRequest, "the body needs \"\(name)\" as a string")
        }
        return value
    }
}

/// A request the API refuses, with its status.
struct ServeError: Error {
    let status: HTTPResponseStatus
    let message: String

    init(_ status: HTTPResponseStatus, _ message: String) {
        self.status = status
        self.message = message
    }
}

extension ServeRequest {
    /// The query parameter `name`, which must be there.
    func required(_ name: String) throws -> String {
        guard let value = query[name] else { throw ServeError(.badRequest, "missing ?\(name)=") }
        return value
    }

    func integer(_ name: String, default value: Int, in range: ClosedRange<Int>) throws -> Int {
        try Self.integer(query, name, default: value, in: range)
    }

    static func integer(_ query: [String: String], _ name: String, default value: Int, in range: ClosedRange<Int>) throws -> Int {
        guard let text = query[name], !text.isEmpty else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw ServeError(.badRequest, "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), got \(JSONText.quoted(String(text.prefix(40))))")
        }
        return number
    }
}
#endif
