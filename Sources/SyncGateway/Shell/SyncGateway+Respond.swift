#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

extension SyncGateway {
    /// Answers an admitted request in one transaction scoped to its credential's group and device.
    @inline(never)
    func respond(to request: Admitted, body: [UInt8], from source: SourceAddress) async -> GatewayResponse {
        var push: GatewayPushRequest?
        let reservation = Locked(0)
        // A resync waits for its turn (``ResyncQueue``) before it reserves anything: a credential's
        // resyncs one at a time, the groups' in turn. The turn's read ends with the transaction; the
        // turn itself once the answer is written (the response carries it to the writer).
        var turn: ResyncTurn?
        switch request.head.operation {
        case .state, .statePage:
            guard let granted = await resyncs.turn(group: request.head.group, credential: request.credential.queueKey) else {
                return .refusal(.tooManyRequests, "this credential already has a resync being answered and \(resyncs.maxWaitingPerCredential) waiting; read those first, or retry in 1 s",
                                retryAfter: 1)
            }
            turn = granted
        default:
            break
        }
        switch request.head.operation {
        case .push:
            do {
                push = try GatewayPushRequest(decoding: body, maxValueBytes: options.maxValueBytes)
            } catch {
                return .refusal(.badRequest, "the push is malformed: \(error)")
            }
            // A value no device can decode never reaches the log, nor a device (issue 47): the batch
            // is refused whole, with the reason, before any database work.
            do {
                try ServerStatements.refuseUndecodable(push!.changes)
            } catch {
                let reason = if case ReplicationError.undecodableValue(let reason) = error { reason } else { "\(error)" }
                var response = GatewayResponse.ok(GatewayPushResponse.undecodableValue(reason: reason).encoded())
                response.outcome = .refused(.undecodable)
                response.logLine = "the push holds a value no device can decode; the batch was refused"
                return response
            }
        case .changes, .statePage:
            // A page reserves the room its statement may fill before anything is read: a refusal
            // reads nothing from the database.
            guard let granted = reserveAnswer(upTo: options.limits.maxPageBytes) else { return busyWriting }
            reservation.withLock { $0 = granted }
        case .state:
            // The whole state (a device from before paged resyncs) reserves its size once it is known.
            guard answersHaveRoom() else { return busyWriting }
        case .hello, .live, .blob:
            break
        }
        // The room reserved for this answer in the budget, released unless the answer takes it over.
        defer { countAnswer(-reservation.withLock { $0 }) }
        // The read's permit goes back with the transaction (its answer may still be being written).
        defer { turn?.endRead() }
        do {
            let (maxValueBytes, maxClockSkew, maxAnswerBytes) = (options.maxValueBytes, options.maxClockSkew, options.limits.maxAnswerBytes)
            let logger = options.logger
            // The answer, and the changes it pushed or pulled, and how far ahead a refused push's clock
            // was, with the bound that refused it (milliseconds), or the budgets that refused it.
            typealias Answer = (bytes: [UInt8], pushed: Int, pulled: Int, ahead: (by: Int64, limit: Int64)?, refused: [PushRefusal])
            // Refused here, before a transaction, while the database is unreachable.
            let target = try await database(of: request.head.group)
            let client = try target.pool()
            // The group whose push applied a change: woken once the transaction committed.
            let applied = Locked<String?>(nil)
            let started = ContinuousClock.now
            defer { metrics.transaction(ContinuousClock.now - started) }
            // A pull of a group of the home database, with a replica: read there (``changesFromReplica(_:request:after:limit:maxBytes:)``).
            let replicated: ChangesPage? = if let replica, target === home, case .changes(let after, let limit) = request.head.operation {
                try await changesFromReplica(replica, request: request, after: after, limit: limit, maxBytes: reservation.withLock { $0 })
            } else {
                nil
            }
            let pushRequest = push
            // The transaction's connection, for its deadline: closed when it passes, and the request
            // answered at once when the connection closes under it (postgres-nio does not always fail
            // a statement whose connection a dying server closed). Forgotten once the transaction
            // ends, as the pool may lend the connection to another request.
            let leased = Locked<PostgresConnection?>(nil)
            let transaction: @Sendable () async throws -> Answer = { [self] in
                defer { leased.withLock { $0 = nil } }
                return try await client.withTransaction(logger: logger) { [self] connection -> Answer in
                leased.withLock { $0 = connection }
                let principal = try await self.principal(of: request.credential, install: request.head.install, on: connection, logger: logger)
                if !request.counted { try check(principal, against: request.head) }
                let statements = ServerStatements(connection: connection, logger: logger, maxValueBytes: maxValueBytes)
                switch request.head.operation {
                case .hello:
                    return (GatewayHello(serverID: try await statements.serverID(), group: principal.group,
                                         device: principal.device, readOnly: principal.readOnly).encoded(), 0, 0, nil, [])
                case .push:
                    guard let device = principal.device, !principal.readOnly else {
                        throw Refusal(status: .forbidden, line: principal.device == nil
                            ? "the credential names no device: it pulls and never pushes"
                            : "the credential is read-only: it pulls and never pushes")
                    }
                    let request = pushRequest!
                    // Who pushes is the credential's to say: the body names nobody, or this device.
                    guard request.device.isEmpty || request.device == device else {
                        throw Refusal(status: .forbidden, line: "the push names another device, and this credential's device is \(device)")
                    }
                    // The budgets of the credential's device and of its group (the server's settings, never
                    // the request's), charged before anything is written: a push past one is refused whole.
                    let bytes = request.changes.reduce(0) { $0 + $1.key.count + ($1.value?.count ?? 0) }
                    let refusals = budgets.charge(device: principal.key, group: principal.group, changes: request.changes.count, bytes: bytes)
                    guard refusals.isEmpty else { return (GatewayPushResponse.refused(refusals).encoded(), 0, 0, nil, refusals) }
                    do {
                        let outcomes = try await statements.push(group: principal.group, device: device, changes: request.changes,
                                                                 maxClockSkew: maxClockSkew)
                        if outcomes.contains(where: { if case .applied = $0 { true } else { false } }) {
                            applied.withLock { $0 = principal.group }
                        }
                        return (GatewayPushResponse.outcomes(outcomes).encoded(), request.changes.count, 0, nil, [])
                    } catch ReplicationError.clockAhead(let ahead, let limit) {
                        budgets.refund(device: principal.key, group: principal.group, changes: request.changes.count, bytes: bytes)
                        let (by, bound) = (ahead.wholeMilliseconds, limit.wholeMilliseconds)
                        return (GatewayPushResponse.clockAhead(milliseconds: by, limitMilliseconds: bound).encoded(), 0, 0, (by, bound), [])
                    } catch {
                        budgets.refund(device: principal.key, group: principal.group, changes: request.changes.count, bytes: bytes)
                        throw error
                    }
                case .changes(let after, let limit):
                    let page = try await statements.changes(group: principal.group, after: after, limit: limit,
                                                            maxBytes: reservation.withLock { $0 })
                    return (page.encoded(), 0, page.changes.count, nil, [])
                case .statePage(let after, let limit):
                    let page = try await statements.statePage(group: principal.group, after: after, limit: limit,
                                                              maxBytes: reservation.withLock { $0 })
                    return (page.encoded(), 0, page.rows.count, nil, [])
                case .state:
                    let (last, rows) = try await statements.currentState(group: principal.group) { size in
                        guard size <= Int64(maxAnswerBytes) else { throw Self.wholeStateTooLarge(size, budget: maxAnswerBytes) }
                        guard reserveAnswer(exactly: Int(size)) else {
                            throw Refusal(status: .serviceUnavailable, line: busyLine, retryAfter: 1)
                        }
                        reservation.withLock { $0 = Int(size) }
                    }
                    return (GatewayState(lastSequence: last, rows: rows).encoded(), 0, rows.count, nil, [])
                case .live:
                    throw Refusal(status: .badRequest, line: "a live stream is not a request")
                case .blob:
                    throw Refusal(status: .internalServerError, line: "a blob's request is answered by the gateway's blobs room, not here")
                }
            } }
            let (answer, pushed, pulled, ahead, refused): Answer = if let replicated {
                (replicated.encoded(), 0, replicated.changes.count, nil, [])
            } else {
                try await bounded(transaction, on: leased)
            }
            if let group = applied.withLock({ $0 }) { wakeAfterCommit(group, in: target) }
            // A page or a state was counted as it was reserved: its reservation becomes its size, and the
            // writer releases it. Another answer (a push's outcomes) that would take the answers being
            // written past their budget is dropped now, rather than held for a device that may never
            // read it.
            var response = GatewayResponse.ok(answer)
            response.turn = turn
            let reserved = reservation.withLock { held -> Int in defer { held = 0 }; return held }
            if reserved > 0 {
                countAnswer(answer.count - reserved)
                response.reserved = answer.count
            } else if answer.count > Self.smallAnswer && answerBytes + answer.count > options.limits.maxAnswerBytes {
                return busyWriting
            }
            metrics.changes(pushed: pushed, pulled: pulled)
            if let ahead {
                // Answered (the device learns its skew), and counted and logged as a refusal.
                response.outcome = .refused(.skew)
                response.logLine = "the push's stamps are \(ahead.by) ms ahead of the server's clock, past the bound of \(ahead.limit) ms; the batch was refused"
            }
            if !refused.isEmpty {
                // Answered (the device learns which budget and its limit), and counted and logged as a refusal.
                response.outcome = .refused(.budget)
                response.logLine = "the push was refused whole, nothing applied: " + refused.map(\.description).joined(separator: "; ")
            }
            return response
        } catch {
            return refusal(for: error, from: source)
        }
    }

    /// Runs `transaction` within ``Limits/transactionTimeout``: past it, its connection (`leased`, once
    /// the pool gave one) is closed and the request refused with 503; a connection that closes under
    /// it refuses it at once (the watch finds what happened to the database). The transaction runs in
    /// a task of its own, cancelled when the deadline passes and when the request's task is (the
    /// gateway shutting down): a transaction still waiting for the pool's connection then ends, and
    /// does not hold the gateway.
    func bounded<R: Sendable>(_ transaction: @escaping @Sendable () async throws -> R,
                              on leased: Locked<PostgresConnection?>) async throws -> R {
        let timeout = options.limits.transactionTimeout
        let closedUnder = "the connection closed mid-request"
        let running = Task { try await transaction() }
        do {
            return try await withTaskCancellationHandler {
                try await withDeadline(timeout, what: "the database", typedTimeout: true,
                                       onTimeout: {
                                           running.cancel()
                                           try? await leased.withLock { $0 }?.close()
                                       },
                                       abandonWhen: { leased.withLock { $0?.isClosed ?? false } ? closedUnder : nil },
                                       { try await running.value })
            } onCancel: {
                running.cancel()
            }
        } catch is DeadlinePassed {
            throw Refusal(status: .serviceUnavailable, line: "the database did not finish this request within \(ReplicationError.seconds(timeout)); try again",
                          retryAfter: Self.unreachableRetryAfter)
        } catch ReplicationError.server(let reason) where reason == closedUnder {
            // Its connection closed under it: the database went away (or restarts) mid-request.
            throw DatabaseLink.Unreachable(reason: closedUnder)
        }
    }

    /// Answers this small are written whatever the budget (a hello, a push's outcomes, a short page).
    static let smallAnswer = 64 << 10

    /// The refusal when the answers being written fill ``Limits/maxAnswerBytes``: it says what is full.
    var busyWriting: GatewayResponse { .refusal(.serviceUnavailable, busyLine, retryAfter: 1) }

    var busyLine: String {
        "the gateway's budget for answers being written (\(Self.mebibytes(options.limits.maxAnswerBytes))) is full with other devices' answers; try again"
    }

    /// The refusal of a whole state over what one answer may hold (a device from before paged resyncs
    /// asks for it): it cannot be answered, and the device is told why.
    static func wholeStateTooLarge(_ size: Int64, budget: Int) -> Refusal {
        Refusal(status: .badRequest, line: "the group's state is \(mebibytes(Int(size))), over the \(mebibytes(budget)) one answer may hold: this device's version asks for it whole; a newer version resyncs it a page at a time")
    }

    /// `128 MiB`, `1.5 MiB`.
    static func mebibytes(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + (1 << 19)) >> 20
        return tenths % 10 == 0 ? "\(tenths / 10) MiB" : "\(tenths / 10).\(tenths % 10) MiB"
    }
}
#endif
