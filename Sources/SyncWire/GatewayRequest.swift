import KVStore

/// A refusal of a device's request: an HTTP status and one line of text (never the credential).
package struct GatewayRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// The status, one of those a gateway answers.
    package var gatewayStatus: GatewayStatus
    package var line: String
    /// Seconds to wait, for a 429 or 503 (`Retry-After`).
    package var retryAfter: Int?
    /// A blob's typed refusal (`too_large`, `chunk_too_large`): its name and limit go in
    /// ``GatewayHeader/refusal`` and ``GatewayHeader/limit``.
    package var blobOutcome: BlobPutOutcome?

    /// A refusal with one of the statuses a gateway answers (``GatewayStatus``: a new one is a case
    /// there, with its meaning, before it can be sent).
    package init(_ status: GatewayStatus, _ line: String, retryAfter: Int? = nil, blobOutcome: BlobPutOutcome? = nil) {
        (self.gatewayStatus, self.line, self.retryAfter, self.blobOutcome) = (status, line, retryAfter, blobOutcome)
    }

    /// The status's code.
    package var status: Int { gatewayStatus.rawValue }

    package var description: String { "\(status) \(line)" }
}

/// The forms a device's credential takes: a token the database issued (`kvs1_` and 43 base64url
/// characters) or a JWT an app's backend signed (three base64url parts, at most 8 KiB).
package enum CredentialText {
    /// Every token starts with this (so that a leaked one is recognisable, as with GitHub's `ghp_`).
    package static let tokenPrefix = "kvs1_"
    /// The longest JWT read.
    package static let maxJWTBytes = 8_192

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
    }

    /// Whether `text` has a token's form.
    package static func isToken(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == tokenPrefix.utf8.count + 43, text.hasPrefix(tokenPrefix) else { return false }
        return utf8.dropFirst(tokenPrefix.utf8.count).allSatisfy(isBase64URL)
    }

    /// Whether `text` has a JWT's form.
    package static func isJWT(_ text: String) -> Bool {
        guard text.utf8.count <= maxJWTBytes, !text.hasPrefix(tokenPrefix) else { return false }
        var dots = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: ".") { dots += 1; continue }
            guard isBase64URL(byte) else { return false }
        }
        return dots == 2
    }
}

/// What a device asks of a gateway, read from its request line and headers alone: everything here is
/// decided before a byte of the body is read.
package enum GatewayOperation: Equatable, Sendable {
    case hello
    case push
    case changes(after: Int64, limit: Int)
    /// The whole state in one answer (`GET /v1/state`: what devices before paged resyncs ask).
    case state
    /// A page of the state after a cursor (`nil`: from its start): `GET /v1/state?after=CURSOR&limit=N`.
    case statePage(after: StateCursor?, limit: Int)
    case live
    /// `HEAD`, `PUT` or `GET /v1/blobs/HASH` (issue 49).
    case blob(BlobRequest)

    /// Whether the operation carries a body (a push's batch, a blob's chunk); the others must not.
    package var hasBody: Bool {
        switch self {
        case .push: true
        case .blob(let blob): blob.verb == .put
        case .hello, .changes, .state, .statePage, .live: false
        }
    }

    /// The endpoint it is a request of.
    package var endpoint: GatewayEndpoint {
        switch self {
        case .hello: .hello
        case .push: .push
        case .changes: .changes
        case .state, .statePage: .state
        case .live: .live
        case .blob: .blobs
        }
    }
}

/// A request as the gateway admits it: its operation, its credential's text and the group it names,
/// and the length of its body. Built from the request line and headers (every header as received,
/// repeated ones included), before the body is read.
package struct GatewayRequestHead: Equatable, Sendable {
    package var operation: GatewayOperation
    package var credential: String
    package var group: String
    /// The container's install id (``InstallID``), when the device sent one: a secret, never shown.
    package var install: String?
    /// The declared `Content-Length` (0 when absent, which only a request without a body may be).
    package var bodyLength: Int
    /// A pull's ``GatewayHeader/through``: the sequence number the device knows the group's log
    /// holds (its own last push's), `nil` when it sent none.
    package var through: Int64?

    /// The largest page a device may ask for.
    package static let maxPageChanges = 10_000

    /// Reads `method` and `uri`, then the headers a request is admitted on. A refusal's line holds
    /// nothing of the client's text (its path, method, query or headers): the gateway logs it, and a
    /// log holds only what the gateway chooses. The order of the checks
    /// is the order of the answers: a request line no gateway serves (404, 400), then the credential
    /// (401), the group and the install id (400), the framing of the body (400, 411, 413).
    ///
    /// A blob's request (``BlobRequest``) is read on: a `PUT`'s offset and size, its chunk within
    /// ``BlobWire/chunkBytes`` and its size within `maxFileBytes` (413, typed), a `GET`'s range.
    ///
    /// - Parameter header: every value of a header, by its name in lower case.
    package init(method: String, uri: String, header: (String) -> [String], maxBodyBytes: Int,
                 maxFileBytes: Int64 = BlobWire.defaultMaxFileBytes) throws(GatewayRefusal) {
        operation = try Self.operation(method: method, uri: uri)
        let authorizations = header(GatewayHeader.authorization.lowercased)
        guard let authorization = authorizations.first else {
            throw GatewayRefusal(.unauthorized, "no credential: send Authorization: Bearer TOKEN")
        }
        guard authorizations.count == 1 else { throw GatewayRefusal(.badRequest, "more than one Authorization header") }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            throw GatewayRefusal(.unauthorized, "the credential is not a bearer token (Authorization: Bearer TOKEN)")
        }
        credential = String(parts[1])
        guard CredentialText.isToken(credential) || CredentialText.isJWT(credential) else {
            throw GatewayRefusal(.unauthorized, "the credential is neither a sync token (\(CredentialText.tokenPrefix)…) nor a JWT")
        }
        let groups = header(GatewayHeader.group.lowercased)
        guard let named = groups.first, !named.isEmpty else {
            throw GatewayRefusal(.badRequest, "no \(GatewayWire.groupHeader) header naming the group to sync")
        }
        guard groups.count == 1 else { throw GatewayRefusal(.badRequest, "more than one \(GatewayWire.groupHeader) header") }
        guard (try? GroupIdentifier(named)) != nil else {
            throw GatewayRefusal(.badRequest, "the \(GatewayWire.groupHeader) header is not a group identifier")
        }
        group = named
        // The install id is a secret of the device's: a refusal names the header, never its value.
        let installs = header(GatewayHeader.install.lowercased)
        guard installs.count <= 1 else { throw GatewayRefusal(.badRequest, "more than one \(InstallID.header) header") }
        if let text = installs.first {
            guard InstallID.isSecret(text) else {
                throw GatewayRefusal(.badRequest, "the \(InstallID.header) header is not an install id (\(InstallID.secretLength) characters of base64url)")
            }
            install = text
        }
        let throughs = header(GatewayHeader.through.lowercased)
        guard throughs.count <= 1 else { throw GatewayRefusal(.badRequest, "more than one \(GatewayHeader.through.rawValue) header") }
        if let text = throughs.first {
            guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let sequence = Int64(text) else {
                throw GatewayRefusal(.badRequest, "the \(GatewayHeader.through.rawValue) header is not a sequence number")
            }
            through = sequence
        }
        // Bodies come with a Content-Length, and only with a push: a chunked body (or one with two
        // lengths, which HTTP parsing already refuses) never reaches the budget of bodies unmeasured.
        guard header("transfer-encoding").isEmpty else {
            throw GatewayRefusal(.badRequest, "a request body must come with a Content-Length, not a Transfer-Encoding")
        }
        let lengths = header("content-length")
        guard lengths.count <= 1 else { throw GatewayRefusal(.badRequest, "more than one Content-Length header") }
        if let text = lengths.first {
            guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int(text) else {
                throw GatewayRefusal(.badRequest, "the Content-Length is not a number of bytes")
            }
            bodyLength = length
        } else {
            bodyLength = 0
        }
        if case .blob(var blob) = operation {
            try blob.readHeaders(header: header, contentLength: lengths.isEmpty ? nil : bodyLength, maxFileBytes: maxFileBytes)
            operation = .blob(blob)
        } else if operation.hasBody {
            guard !lengths.isEmpty else { throw GatewayRefusal(.lengthRequired, "a push needs a Content-Length") }
            guard bodyLength <= maxBodyBytes else { throw GatewayRefusal(.payloadTooLarge, "the request body is over \(maxBodyBytes) bytes") }
        } else if bodyLength != 0 {
            throw GatewayRefusal(.badRequest, "this request takes no body")
        }
    }

    /// The ``GatewayEndpoint`` a request line names (`/v1/changes` with `?after=N&limit=M`); another
    /// version is refused in one line that names both.
    package static func operation(method: String, uri: String) throws(GatewayRefusal) -> GatewayOperation {
        guard uri.utf8.count <= 2_048 else { throw GatewayRefusal(.uriTooLong, "the request target is over 2048 bytes") }
        let (path, query) = try split(uri)
        // Exactly `/vN/NAME`, or `/vN/NAME/RESOURCE` for an endpoint that takes one (`/v1/blobs/HASH`):
        // no empty segment (`//v1/push`), none more (`/v1/push/`).
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        let parts = segments.dropFirst()
        guard segments.count == 3 || segments.count == 4, segments[0].isEmpty, let first = parts.first, first.first == "v", first.count <= 10,
              first.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }), let version = Int(first.dropFirst()),
              String(first.dropFirst()) == String(version), let name = parts.dropFirst().first, !name.isEmpty,
              let last = parts.last, !last.isEmpty else {
            throw GatewayRefusal(.notFound, "no such endpoint (the sync protocol's are under /v\(GatewayWire.version)/)")
        }
        guard version == GatewayWire.version else {
            throw GatewayRefusal(.badRequest, "unsupported sync protocol version \(version): this gateway speaks version \(GatewayWire.version)")
        }
        guard let endpoint = GatewayEndpoint(method: method, name: name, resource: segments.count == 4) else {
            throw GatewayRefusal(.notFound, "no such endpoint: the method and path name none of the sync protocol's")
        }
        let operation: GatewayOperation
        switch endpoint {
        case .blobs:
            // The hash's own line says what is wrong with it (its length, a character other than a
            // lower-case hex digit), never the text itself.
            let hash: BlobHash
            do {
                hash = try BlobHash(hex: last)
            } catch {
                throw GatewayRefusal(.badRequest, error.description)
            }
            guard let verb = BlobRequest.Verb(rawValue: method) else {
                throw GatewayRefusal(.notFound, "no such endpoint: the method and path name none of the sync protocol's")
            }
            operation = .blob(BlobRequest(verb: verb, hash: hash))
        case .hello: operation = .hello
        case .push: operation = .push
        case .live: operation = .live
        case .state:
            // No query: the whole state, as devices before paged resyncs ask it.
            guard !query.isEmpty else { return .state }
            guard Set(query.keys).isSubset(of: ["after", "limit"]) else {
                throw GatewayRefusal(.badRequest, "state takes only ?after=CURSOR&limit=N")
            }
            guard let text = query["limit"], let limit = Int(text), text.first != "+", (1...maxPageChanges).contains(limit) else {
                throw GatewayRefusal(.badRequest, "a page of the state needs ?limit=N, from 1 to \(maxPageChanges)")
            }
            var after: StateCursor?
            if let text = query["after"] { after = try StateCursor(text: text) }
            return .statePage(after: after, limit: limit)
        case .changes:
            guard let text = query["after"], let after = Int64(text), after >= 0, text.first != "+" else {
                throw GatewayRefusal(.badRequest, "changes needs ?after=CURSOR, a sequence number")
            }
            var limit = 1_000
            if let text = query["limit"] {
                guard let asked = Int(text), text.first != "+", (1...maxPageChanges).contains(asked) else {
                    throw GatewayRefusal(.badRequest, "limit must be from 1 to \(maxPageChanges)")
                }
                limit = asked
            }
            guard Set(query.keys).isSubset(of: ["after", "limit"]) else {
                throw GatewayRefusal(.badRequest, "changes takes only ?after=CURSOR&limit=N")
            }
            return .changes(after: after, limit: limit)
        }
        guard query.isEmpty else { throw GatewayRefusal(.badRequest, "\(Self.shown(path)) takes no query") }
        return operation
    }

    /// The path and the query's parameters; a parameter given twice is refused.
    static func split(_ uri: String) throws(GatewayRefusal) -> (path: String, query: [String: String]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(halves[0])
            guard query.updateValue(halves.count > 1 ? String(halves[1]) : "", forKey: name) == nil else {
                throw GatewayRefusal(.badRequest, "the query names a parameter twice")
            }
        }
        return (String(uri[..<mark]), query)
    }

    /// At most 100 characters of what a device sent, its control characters dropped, for a refusal's
    /// line.
    package static func shown(_ text: some StringProtocol) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(100)))
    }
}
