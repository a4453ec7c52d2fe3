#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// The protocol's operations.
    enum Operation: Equatable {
        case hello
        case push
        case changes(after: Int64, limit: Int)
        case state
    }

    /// A refusal found while answering: rolls the request's transaction back.
    struct Refusal: Error {
        var status: HTTPResponseStatus
        var line: String
    }

    /// Who a verified credential is.
    struct Principal: Sendable {
        var id: Int64
        var group: String
        var device: String?
        var readOnly: Bool
    }

    static let maxPageChanges = 10_000

    /// What a request presented: a token the database must check, or a JWT already verified.
    enum Credential {
        case token(hash: [UInt8])
        case verified(Principal)
    }

    /// Scopes the transaction to a verified JWT's group, as the gateway's role from here on.
    static func scope(_ principal: Principal, on connection: PostgresConnection, logger: Logger) async throws -> Principal {
        try await connection.query("""
            SELECT set_config('kvsync.group', \(principal.group), true),
                   set_config('kvsync.read_only', \(principal.readOnly ? "on" : "off"), true),
                   set_config('role', \(ServerStatements.gatewayRole), true)
            """, logger: logger)
        return principal
    }

    /// Checks the request's form, its credential and its rate, then answers it in one transaction
    /// scoped to the credential's group.
    func respond(to head: HTTPRequestHead, body: [UInt8]) async -> GatewayResponse {
        let operation: Operation
        do {
            operation = try Self.operation(of: head)
        } catch let refusal as Refusal {
            return .refusal(refusal.status, refusal.line)
        } catch {
            return .refusal(.badRequest, "\(error)")
        }
        guard let authorization = head.headers.first(name: "authorization") else {
            return .refusal(.unauthorized, "no credential: send Authorization: Bearer TOKEN")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .refusal(.unauthorized, "the credential is not a bearer token (Authorization: Bearer TOKEN)")
        }
        let presented = String(parts[1])
        guard let group = head.headers.first(name: GatewayWire.groupHeader), !group.isEmpty else {
            return .refusal(.badRequest, "no \(GatewayWire.groupHeader) header naming the group to sync")
        }
        let hash = SyncTokens.hash(presented)
        let credential: Credential
        if SyncTokens.isWellFormed(presented) {
            credential = .token(hash: hash)
        } else if let jwt = options.jwt, SyncTokens.looksLikeJWT(presented) {
            do {
                credential = .verified(try jwt.verify(presented))
            } catch {
                return .refusal(error.status, error.line)
            }
        } else {
            return .refusal(.unauthorized, options.jwt == nil
                ? "the credential is not a sync token (\(SyncTokens.prefix)…)"
                : "the credential is neither a sync token (\(SyncTokens.prefix)…) nor a JWT")
        }
        if let wait = limiterAdmit(hash) {
            return .refusal(.tooManyRequests, "too many requests for this credential; retry in \(wait) s", retryAfter: wait)
        }
        var push: GatewayPushRequest?
        if operation == .push {
            do {
                push = try GatewayPushRequest(decoding: body, maxValueBytes: options.maxValueBytes)
            } catch {
                return .refusal(.badRequest, "the push is malformed: \(error)")
            }
        }
        do {
            let maxPageBytes = options.limits.maxPageBytes
            let logger = options.logger
            let maxValueBytes = options.maxValueBytes
            let answer: [UInt8] = try await client.withTransaction(logger: logger) { connection in
                let principal = switch credential {
                case .token(let hash): try await Self.authenticate(hash, on: connection, logger: logger)
                case .verified(let principal): try await Self.scope(principal, on: connection, logger: logger)
                }
                guard principal.group == group else {
                    throw Refusal(status: .forbidden, line: "the credential is for another group than \(group)")
                }
                let statements = ServerStatements(connection: connection, logger: logger, maxValueBytes: maxValueBytes)
                switch operation {
                case .hello:
                    return GatewayHello(serverID: try await statements.serverID(), group: principal.group,
                                        device: principal.device, readOnly: principal.readOnly).encoded()
                case .push:
                    guard !principal.readOnly else {
                        throw Refusal(status: .forbidden, line: "the credential is read-only: it pulls and never pushes")
                    }
                    let request = push!
                    do {
                        let outcomes = try await statements.push(group: principal.group, device: request.device, changes: request.changes,
                                                                 maxClockSkew: .milliseconds(request.maxClockSkewMilliseconds))
                        return GatewayPushResponse.outcomes(outcomes).encoded()
                    } catch ReplicationError.clockAhead(let ahead, _) {
                        let (seconds, attoseconds) = ahead.components
                        return GatewayPushResponse.clockAhead(milliseconds: seconds * 1000 + attoseconds / 1_000_000_000_000_000).encoded()
                    }
                case .changes(let after, let limit):
                    var page = try await statements.changes(group: principal.group, after: after, limit: limit)
                    page.keepFirst(bytes: maxPageBytes)
                    return page.encoded()
                case .state:
                    let (last, rows) = try await statements.currentState(group: principal.group)
                    return GatewayState(lastSequence: last, rows: rows).encoded()
                }
            }
            return .ok(answer)
        } catch let refusal as Refusal {
            return .refusal(refusal.status, refusal.line)
        } catch let error as PostgresTransactionError {
            if let refusal = error.closureError as? Refusal { return .refusal(refusal.status, refusal.line) }
            return .refusal(.serviceUnavailable, "the database: \(ServerStatements.describe(error))")
        } catch {
            return .refusal(.serviceUnavailable, "the database: \(ServerStatements.describe(error))")
        }
    }

    func limiterAdmit(_ hash: [UInt8]) -> Int? { limiter.admit(hash) }

    /// The credential whose SHA-256 is `hash`, checked, with the transaction scoped to its group and
    /// running as the gateway's role from here on.
    static func authenticate(_ hash: [UInt8], on connection: PostgresConnection, logger: Logger) async throws -> Principal {
        var found: (Int64, String, String?, Bool, ByteBuffer, Bool, Bool)?
        let rows = try await connection.query("""
            SELECT a.id, a.group_id, a.device, a.read_only, a.hash, a.expired, a.revoked,
                   set_config('kvsync.group', a.group_id, true),
                   set_config('kvsync.read_only', CASE WHEN a.read_only THEN 'on' ELSE 'off' END, true),
                   set_config('role', \(ServerStatements.gatewayRole), true)
            FROM kvsync_authenticate(\(ByteBuffer(bytes: hash))) a
            """, logger: logger)
        for try await row in rows.decode((Int64, String, String?, Bool, ByteBuffer, Bool, Bool, String, String, String).self) {
            found = (row.0, row.1, row.2, row.3, row.4, row.5, row.6)
        }
        guard let found, SyncTokens.constantTimeEqual(Array(found.4.readableBytesView), hash) else {
            throw Refusal(status: .unauthorized, line: "the credential is not known here")
        }
        if found.6 { throw Refusal(status: .unauthorized, line: "the credential was revoked") }
        if found.5 { throw Refusal(status: .unauthorized, line: "the credential has expired") }
        return Principal(id: found.0, group: found.1, device: found.2, readOnly: found.3)
    }

    /// `/v1/hello`, `/v1/push`, `/v1/changes?after=N&limit=M`, `/v1/state`; another version is refused
    /// in one line that names both.
    static func operation(of head: HTTPRequestHead) throws -> Operation {
        let (path, query) = split(head.uri)
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].first == "v", let version = Int(parts[0].dropFirst()) else {
            throw Refusal(status: .notFound, line: "no such endpoint \(path.prefix(100)) (the sync protocol's are under /v\(GatewayWire.version)/)")
        }
        guard version == GatewayWire.version else {
            throw Refusal(status: .badRequest, line: "unsupported sync protocol version \(version): this gateway speaks version \(GatewayWire.version)")
        }
        switch (head.method, parts[1]) {
        case (.GET, "hello"): return .hello
        case (.POST, "push"): return .push
        case (.GET, "state"): return .state
        case (.GET, "changes"):
            guard let after = query["after"].flatMap({ Int64($0) }), after >= 0 else {
                throw Refusal(status: .badRequest, line: "changes needs ?after=CURSOR, a sequence number")
            }
            let limit = query["limit"].flatMap { Int($0) } ?? 1_000
            guard (1...maxPageChanges).contains(limit) else {
                throw Refusal(status: .badRequest, line: "limit must be from 1 to \(maxPageChanges)")
            }
            return .changes(after: after, limit: limit)
        default:
            throw Refusal(status: .notFound, line: "no such endpoint: \(head.method) \(path.prefix(100))")
        }
    }

    static func split(_ uri: String) -> (path: String, query: [String: String]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let halves = pair.split(separator: "=", maxSplits: 1)
            query[String(halves[0])] = halves.count > 1 ? String(halves[1]) : ""
        }
        return (String(uri[..<mark]), query)
    }
}

#endif
