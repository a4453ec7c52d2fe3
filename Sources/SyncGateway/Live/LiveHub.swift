#if PostgreSQL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

/// The live devices of one gateway, by group: one `LISTEN` for the whole gateway, and a commit of a
/// group wakes that group's streams only. A stream is its channel's ``LiveStream`` handler: the hub
/// hands each event to the streams' event loops (one hop per loop, not per stream), and no task
/// waits for a stream.
final class LiveHub: Sendable {
    enum Event: Sendable {
        case change
        case heartbeat
        case closed(GatewayCloseReason)
    }

    private struct State {
        var groups: [String: [UInt64: LiveStream]] = [:]
        var count = 0
        var perCredential: [String: Int] = [:]
        var lastID: UInt64 = 0
        var closed = false
    }

    /// Why a stream was not admitted.
    enum Full: Error {
        case gateway
        case credential
    }

    private let state = Locked(State())
    let maxStreams: Int
    let maxStreamsPerCredential: Int

    init(maxStreams: Int, maxStreamsPerCredential: Int) {
        self.maxStreams = maxStreams
        self.maxStreamsPerCredential = maxStreamsPerCredential
    }

    var count: Int { state.withLock { $0.count } }

    /// Subscribes `stream` to its group's events; refused when the gateway has `maxStreams` open (or is
    /// draining), or the principal has `maxStreamsPerCredential` (so that one device cannot take every
    /// slot, however many copies of its credential it holds).
    func subscribe(_ stream: LiveStream) throws(Full) {
        let result: Result<Void, Full> = state.withLock { state in
            guard !state.closed, state.count < maxStreams else { return .failure(.gateway) }
            guard state.perCredential[stream.key, default: 0] < maxStreamsPerCredential else { return .failure(.credential) }
            state.lastID += 1
            state.count += 1
            state.perCredential[stream.key, default: 0] += 1
            stream.id = state.lastID
            state.groups[stream.group, default: [:]][state.lastID] = stream
            return .success(())
        }
        try result.get()
    }

    func unsubscribe(_ stream: LiveStream) {
        let (group, id) = (stream.group, stream.id)
        state.withLock { state in
            guard let gone = state.groups[group]?.removeValue(forKey: id) else { return }
            state.count -= 1
            state.perCredential[gone.key, default: 1] -= 1
            if state.perCredential[gone.key] == 0 { state.perCredential[gone.key] = nil }
            if state.groups[group]?.isEmpty == true { state.groups[group] = nil }
        }
    }

    /// Wakes the streams of `group` (every group's when `nil`: after the `LISTEN` reconnected, a
    /// notification may have been missed).
    func notify(group: String?) {
        let targets = state.withLock { state in
            if let group { return state.groups[group].map { Array($0.values) } ?? [] }
            return state.groups.values.flatMap(\.values)
        }
        deliver(.change, to: targets)
    }

    /// The groups with live streams (the wake-up poll reads their sequences).
    var groups: [String] { state.withLock { Array($0.groups.keys) } }

    /// Whether `group` has live streams here.
    func isLive(_ group: String) -> Bool { state.withLock { $0.groups[group] != nil } }

    /// A comment to every stream, so that devices (and the gateway, which then finds the streams of
    /// devices that left) know the connection still carries.
    func heartbeat() {
        deliver(.heartbeat, to: state.withLock { $0.groups.values.flatMap(\.values) })
    }

    /// Ends the streams of these credentials (revoked) of the groups `among` takes (their database's:
    /// each database numbers its own credentials), and of those whose time is up.
    func close(credentials revoked: Set<Int64>, expiredBy now: Date, among: (String) -> Bool = { _ in true }) {
        let ending = state.withLock { state in
            state.groups.values.flatMap(\.values).compactMap { stream -> (LiveStream, GatewayCloseReason)? in
                if let id = stream.credential, revoked.contains(id), among(stream.group) { return (stream, .revoked) }
                if let expiry = stream.expiresAt, expiry <= now { return (stream, .expired) }
                return nil
            }
        }
        for (stream, reason) in ending { deliver(.closed(reason), to: [stream]) }
    }

    /// Ends every stream (the gateway is draining); no new one is admitted.
    func closeAll() {
        let all = state.withLock { state in
            state.closed = true
            return state.groups.values.flatMap(\.values)
        }
        deliver(.closed(.draining), to: all)
    }

    /// `event` to each of `streams`, on their event loops: one task per loop for all its streams.
    private func deliver(_ event: Event, to streams: [LiveStream]) {
        guard let first = streams.first else { return }
        if streams.allSatisfy({ $0.eventLoop === first.eventLoop }) {
            first.eventLoop.execute { for stream in streams { stream.handle(event) } }
            return
        }
        var byLoop: [ObjectIdentifier: (EventLoop, [LiveStream])] = [:]
        for stream in streams { byLoop[ObjectIdentifier(stream.eventLoop), default: (stream.eventLoop, [])].1.append(stream) }
        for (loop, streams) in byLoop.values { loop.execute { for stream in streams { stream.handle(event) } } }
    }
}
#endif
