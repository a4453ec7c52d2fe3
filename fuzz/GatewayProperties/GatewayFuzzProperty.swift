// The property of the sync gateway's parsers of what a device sends (SyncWire: a push body, a request
// target, the headers a request is admitted or refused on, a JWT and its claims) and of what a device
// reads back from a gateway (a page of changes, a push's answer, a resync), checked by the harness
// fuzz/Targets/gateway.swift (built by scripts/fuzz.sh) and replayed from fuzz/corpus/gateway by
// GatewayFuzzCorpusReplayTests (SyncWireTests). SwiftPM builds this folder as the
// `GatewayFuzzProperties` target.
import FuzzProperties
import KVStore
import SyncWire

@inline(__always)
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) throws(PropertyViolation) {
    if !condition() { throw PropertyViolation(message()) }
}

/// A refusal must be one line, of bounded length.
func requireOneLine(_ text: String, _ what: String) throws(PropertyViolation) {
    try require(!text.contains("\n") && !text.contains("\r"), "\(what) is not one line: \(text)")
    try require(text.utf8.count <= 2_000, "\(what) is \(text.utf8.count) bytes long")
}

/// The first byte of an input selects the parser (mod 8); the rest is its input:
///
/// 0. a push body (`GatewayPushRequest`); 1. a request line `METHOD TARGET`; 2. a method, a target
/// and headers (`GatewayRequestHead`), one `Name: value` a line (a blob's `Range`, `Upload-Offset` and
/// `Upload-Length` are read by their own parsers too); 3. a JWT's text (`JWT`, then its
/// claims as if its signature held); 4. a JWT's claims (`JWTClaims`); 5. a page of changes
/// (`ChangesPage`); 6. a push's answer (`GatewayPushResponse`); 7. a resync's answer (`GatewayState`, and the
/// same bytes as a page of a paged resync, `StatePage`).
///
/// Nothing traps; every refusal is the parser's typed error, one line; and what is accepted holds the
/// rules the gateway relies on, and round-trips through its encoder where it has one.
public enum GatewayProperty {
    static let maxValueBytes = 1 << 16
    static let maxBodyBytes = 1 << 20
    /// The clock the JWT checks see: 2027-01-15.
    static let now = 1_800_000_000.0
    static let policy = JWTPolicy(audience: "kvsync", issuer: nil, maxLifetime: .seconds(86_400))

    public static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        guard let selector = input.first else { return .rejected("empty") }
        let rest = Array(input.dropFirst())
        switch selector % 8 {
        case 0: return try push(rest)
        case 1: return try target(rest)
        case 2: return try head(rest)
        case 3: return try jwt(rest)
        case 4: return try claims(rest)
        default: return try answer(selector % 8, rest)
        }
    }

    static func push(_ bytes: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let request: GatewayPushRequest
        do {
            request = try GatewayPushRequest(decoding: bytes, maxValueBytes: maxValueBytes)
        } catch let error as GatewayWireError {
            try requireOneLine(error.description, "the push's error")
            return .rejected("push")
        } catch {
            throw PropertyViolation("a push body threw a \(type(of: error)): \(error)")
        }
        try require(request.changes.count <= bytes.count, "\(request.changes.count) changes from \(bytes.count) bytes")
        for change in request.changes {
            try require(!change.kind.isEmpty && !change.name.isEmpty, "an accepted change has an empty kind or name")
            for text in [change.kind, change.name, request.device] {
                try require(!text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) },
                            "an accepted push holds a control character: \(text.debugDescription)")
                try require(text.utf8.count <= GatewayWire.maxNameBytes, "an accepted name is \(text.utf8.count) bytes")
            }
            try require(change.key.count <= Store.maxKeySize, "an accepted key is \(change.key.count) bytes")
            try require((change.value?.count ?? 0) <= maxValueBytes, "an accepted value is over the limit")
            try require(change.clock <= UInt64(Int64.max) && change.token <= UInt64(Int64.max), "an accepted clock or token is 2^63 or more")
        }
        let again: GatewayPushRequest
        do {
            again = try GatewayPushRequest(decoding: request.encoded(), maxValueBytes: maxValueBytes)
        } catch {
            throw PropertyViolation("an accepted push does not decode once encoded again: \(error)")
        }
        try require(again.changes == request.changes && again.device == request.device, "a push does not round-trip")
        return .accepted
    }

    /// `METHOD TARGET` from UTF-8 text (its first space splits them).
    static func target(_ bytes: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        let method = String(parts[0]), uri = parts.count > 1 ? String(parts[1]) : ""
        let operation: GatewayOperation
        do {
            operation = try GatewayRequestHead.operation(method: method, uri: uri)
        } catch {
            try requireOneLine(error.line, "the refusal")
            try require([400, 404, 414].contains(error.status), "a request target got status \(error.status)")
            return .rejected("target \(error.status)")
        }
        switch operation {
        case .changes(let after, let limit):
            try require(method == "GET" && after >= 0 && (1...GatewayRequestHead.maxPageChanges).contains(limit),
                        "accepted changes after \(after), limit \(limit), by \(method)")
        case .statePage(let after, let limit):
            try require(method == "GET" && (1...GatewayRequestHead.maxPageChanges).contains(limit),
                        "accepted a state page of limit \(limit), by \(method)")
            if let after {
                // What a cursor holds, it says again: a request target carries it unchanged.
                try require(after.kind.utf8.count <= GatewayWire.maxNameBytes && after.name.utf8.count <= GatewayWire.maxNameBytes
                            && after.key.count <= Store.maxKeySize && !after.kind.utf8.contains(0) && !after.name.utf8.contains(0),
                            "accepted the state cursor \(after)")
                try require((try? StateCursor(text: after.text)) == after, "a state cursor does not round-trip: \(after)")
            }
        case .push: try require(method == "POST", "a push by \(method)")
        case .hello, .state, .live: try require(method == "GET", "\(operation) by \(method)")
        case .blob(let blob):
            // Exactly `/v1/blobs/HASH` (64 lower-case hex digits), by one of its three methods, with
            // nothing of its headers read yet.
            try require(method == blob.verb.rawValue && uri == GatewayEndpoint.blob(blob.hash) && blob.upload == nil && blob.range == nil,
                        "accepted the blob request \(blob) by \(method) at \(uri.debugDescription)")
        }
        try require(uri.hasPrefix("/v\(GatewayWire.version)/"), "accepted the target \(uri.debugDescription)")
        return .accepted
    }

    /// A request line, then header lines (`Name: value`).
    static func head(_ bytes: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        let requestLine = lines.first.map(String.init) ?? ""
        let parts = requestLine.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        let method = String(parts[0]), uri = parts.count > 1 ? String(parts[1]) : ""
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((line[..<colon].lowercased(), String(line[line.index(after: colon)...].drop { $0 == " " })))
        }
        try blobHeaders(headers)
        let admitted: GatewayRequestHead
        do {
            admitted = try GatewayRequestHead(method: method, uri: uri, header: { name in headers.filter { $0.0 == name }.map(\.1) },
                                              maxBodyBytes: maxBodyBytes, maxFileBytes: maxFileBytes)
        } catch {
            try requireOneLine(error.line, "the refusal")
            try require([400, 401, 404, 411, 413, 414].contains(error.status), "a request head got status \(error.status)")
            // A typed refusal (a blob's chunk or file over its limit) is a 413 naming the limit.
            if let outcome = error.blobOutcome {
                try require(error.status == 413 && [BlobPutOutcome.chunkTooLarge(limit: Int64(BlobWire.chunkBytes)), .tooLarge(limit: maxFileBytes)].contains(outcome)
                            && error.line.contains(String(outcome.figure)), "a typed refusal \(outcome) is \(error)")
            }
            try require(!error.line.contains("kvs1_") || !headers.contains { $0.1.contains(error.line) }, "a refusal repeats the credential")
            // A head refused for its install id alone: a 400 in a fixed line that holds nothing of the id
            // (a secret).
            let withoutInstall = headers.filter { $0.0 != InstallID.header.lowercased() }
            if withoutInstall.count < headers.count,
               (try? GatewayRequestHead(method: method, uri: uri, header: { name in withoutInstall.filter { $0.0 == name }.map(\.1) },
                                        maxBodyBytes: maxBodyBytes)) != nil {
                try require(error.status == 400 && (error.line == "more than one \(InstallID.header) header"
                            || error.line == "the \(InstallID.header) header is not an install id (\(InstallID.secretLength) characters of base64url)"),
                            "an install id's refusal is \(error.status) \(error.line)")
            }
            return .rejected("head \(error.status)")
        }
        try require(CredentialText.isToken(admitted.credential) || CredentialText.isJWT(admitted.credential),
                    "admitted the credential \(admitted.credential.debugDescription)")
        try require((try? GroupIdentifier(admitted.group)) != nil, "admitted the group \(admitted.group.debugDescription)")
        try require(headers.filter { $0.0 == "transfer-encoding" }.isEmpty, "admitted a Transfer-Encoding")
        try require(admitted.install.map(InstallID.isSecret) ?? headers.allSatisfy { $0.0 != "kvsync-install" },
                    "admitted the install id \(admitted.install.debugDescription)")
        if admitted.operation.hasBody {
            try require((0...maxBodyBytes).contains(admitted.bodyLength), "admitted a body of \(admitted.bodyLength) bytes")
        } else {
            try require(admitted.bodyLength == 0, "admitted a body for \(admitted.operation)")
        }
        if case .blob(let blob) = admitted.operation {
            try require(blob.verb.rawValue == method, "admitted a blob's \(blob.verb) by \(method)")
            if let upload = blob.upload {
                // A chunk within its limit, within the file, a file within the largest.
                try require(blob.verb == .put && admitted.bodyLength <= BlobWire.chunkBytes && 0 <= upload.offset && upload.offset <= upload.length
                            && Int64(admitted.bodyLength) <= upload.length - upload.offset && upload.length <= maxFileBytes
                            && headers.contains { $0.0 == "content-length" }, "admitted the chunk \(upload) of \(admitted.bodyLength) bytes")
            } else {
                try require(blob.verb != .put, "admitted a PUT without its offset and size")
            }
            try require(blob.range == nil || blob.verb == .get, "admitted a range for a \(blob.verb)")
        }
        return .accepted
    }

    /// The largest file the head's checks see.
    static let maxFileBytes: Int64 = 1 << 20

    /// Every `Range`, `Upload-Offset` and `Upload-Length` value, read by its own parser whatever the
    /// request: a refusal is a one-line 400; a number is the digits' value; a range says again what it
    /// read (``ByteRangeRequest/text``), and resolves within any size.
    static func blobHeaders(_ headers: [(String, String)]) throws(PropertyViolation) {
        for (name, value) in headers {
            switch name {
            case "range":
                let range: ByteRangeRequest?
                do {
                    range = try ByteRangeRequest(parsing: value)
                } catch {
                    try requireOneLine(error.line, "the range's refusal")
                    try require(error.status == 400, "a range got status \(error.status)")
                    continue
                }
                guard let range else { continue }
                try require((try? ByteRangeRequest(parsing: range.text)) == range, "the range \(range) does not read back")
                for size: Int64 in [0, 1, 2, 1000, .max] {
                    guard let resolved = range.resolved(size: size) else { continue }
                    try require(0 <= resolved.lowerBound && resolved.upperBound < size, "\(range) resolved to \(resolved) in \(size) bytes")
                    let header = ByteRangeRequest.contentRange(resolved, size: size)
                    try require(ByteRangeRequest.parseContentRange(header).map { $0.range == resolved && $0.size == size } == true,
                                "the Content-Range \(header) does not read back")
                }
            case "upload-offset", "upload-length":
                let number: Int64?
                do {
                    number = try BlobRequest.number(value, name)
                } catch {
                    try requireOneLine(error.line, "the number's refusal")
                    try require(error.status == 400, "a number's refusal is \(error)")
                    continue
                }
                let digits = value.filter { $0 != " " && $0 != "\t" }.drop { $0 == "0" }
                if let number {
                    try require(number >= 0 && String(number) == (digits.isEmpty ? "0" : String(digits)), "\(value.debugDescription) read as \(number)")
                } else {
                    try require(digits.count >= 19, "\(value.debugDescription) read as 2^63 or more")
                }
            default:
                continue
            }
        }
    }

    static func jwt(_ bytes: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let jwt: JWT
        do {
            jwt = try JWT(String(decoding: bytes, as: UTF8.self))
        } catch {
            try requireOneLine(error.description, "the JWT's refusal")
            return .rejected("jwt")
        }
        try require(jwt.signingInput.count < bytes.count, "the signing input is the whole token")
        return try claims(jwt.payload)
    }

    static func claims(_ bytes: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let claims: JWTClaims
        do {
            claims = try JWTClaims(bytes, policy: policy, now: now)
        } catch {
            try requireOneLine(error.description, "the claims' refusal")
            return .rejected("claims")
        }
        try require(claims.expiresAt > now && claims.expiresAt - now <= 86_400, "accepted an exp of \(claims.expiresAt)")
        try require(!claims.group.isEmpty && claims.group.utf8.count <= 1024, "accepted the group \(claims.group.debugDescription)")
        if let device = claims.device {
            try require(!device.isEmpty && device.utf8.count <= GatewayWire.maxNameBytes && !device.hasPrefix(JWTClaims.reservedDevicePrefix)
                        && !InstallID.endsWithPublicID(device)
                        && !device.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) },
                        "accepted the device \(device.debugDescription)")
        }
        return .accepted
    }

    /// What a device reads from a gateway: a page (5), a push's answer (6), a resync (7).
    static func answer(_ kind: UInt8, _ bytes: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        do {
            switch kind {
            case 5:
                let page = try ChangesPage(decoding: bytes, maxValueBytes: maxValueBytes)
                try require(page.changes.count <= bytes.count, "a page of \(page.changes.count) changes from \(bytes.count) bytes")
                let again = try ChangesPage(decoding: page.encoded(), maxValueBytes: maxValueBytes)
                try require(again == page, "a page does not round-trip")
            case 6:
                let answer = try GatewayPushResponse(decoding: bytes, maxValueBytes: maxValueBytes)
                if case .outcomes(let outcomes) = answer {
                    try require(outcomes.count <= bytes.count, "\(outcomes.count) outcomes from \(bytes.count) bytes")
                }
            default:
                // The same bytes as a page of the state (a paged resync's answer): it round-trips
                // when it decodes, and its error is one line when it does not.
                do {
                    let page = try StatePage(decoding: bytes, maxValueBytes: maxValueBytes)
                    try require(page.rows.count <= bytes.count, "a state page of \(page.rows.count) rows from \(bytes.count) bytes")
                    let again = try StatePage(decoding: page.encoded(), maxValueBytes: maxValueBytes)
                    try require(again == page, "a state page does not round-trip")
                } catch let error as GatewayWireError {
                    try requireOneLine(error.description, "the state page's error")
                }
                let state = try GatewayState(decoding: bytes, maxValueBytes: maxValueBytes)
                try require(state.rows.count <= bytes.count, "a state of \(state.rows.count) rows from \(bytes.count) bytes")
            }
            return .accepted
        } catch let violation as PropertyViolation {
            throw violation
        } catch let error as GatewayWireError {
            try requireOneLine(error.description, "the answer's error")
            return .rejected("answer \(kind)")
        } catch {
            throw PropertyViolation("an answer threw a \(type(of: error)): \(error)")
        }
    }
}
