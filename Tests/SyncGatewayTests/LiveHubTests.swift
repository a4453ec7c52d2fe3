#if PostgreSQL
import Foundation
import NIOCore
import NIOEmbedded
@testable import SyncGateway
import Testing

/// The live hub's registry (its caps, per gateway and per credential, and the drain) and its fan-out
/// (a group's commit wakes that group's streams only, on their own event loops; revoked and expired
/// credentials' streams end), on embedded channels: each test's event loops run on its own thread,
/// when the test says (`run()`), so what a stream wrote is read back exactly.
@Suite struct LiveHubTests {
    /// A device's open live stream: its channel (connected, with the stream as its handler), finished
    /// when the test lets go of it (an embedded channel's pipeline holds itself until it is closed:
    /// LeakSanitizer reported every channel left open).
    final class Device {
        let channel: EmbeddedChannel
        let stream: LiveStream

        init(channel: EmbeddedChannel, stream: LiveStream) { (self.channel, self.stream) = (channel, stream) }

        deinit { _ = try? channel.finish() }

        /// Everything the stream wrote since the last call, as text.
        func written() throws -> String {
            channel.embeddedEventLoop.run()
            var text = ""
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
            return text
        }
    }

    static func principal(group: String, device: String, id: Int64 = 1, expiresAt: Date? = nil) -> SyncGateway.Principal {
        SyncGateway.Principal(id: id, group: group, device: device, readOnly: false, expiresAt: expiresAt,
                              key: "device \(group)\u{0}\(device)")
    }

    /// A stream of `principal` subscribed to `hub`, and added to a connected channel (its head and
    /// `hello` are written then, and read here).
    static func open(_ principal: SyncGateway.Principal, on hub: LiveHub, metrics: GatewayMetrics = GatewayMetrics()) throws -> Device {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        let stream = LiveStream(eventLoop: channel.eventLoop, principal: principal, hub: hub, metrics: metrics)
        try hub.subscribe(stream)
        try channel.pipeline.syncOperations.addHandler(stream)
        let device = Device(channel: channel, stream: stream)
        let opening = try device.written()
        #expect(opening.hasPrefix("HTTP/1.1 200 OK\r\n") && opening.contains("event: hello\n"), "\(opening)")
        return device
    }

    static func refusal(_ hub: LiveHub, _ principal: SyncGateway.Principal) -> LiveHub.Full? {
        let stream = LiveStream(eventLoop: EmbeddedEventLoop(), principal: principal, hub: hub, metrics: GatewayMetrics())
        do {
            try hub.subscribe(stream)
            return nil
        } catch {
            return error
        }
    }

    @Test func theRegistryCapsStreamsPerCredentialAndPerGatewayAndFreesOnUnsubscribe() throws {
        let hub = LiveHub(maxStreams: 3, maxStreamsPerCredential: 2)
        let a = Self.principal(group: "g", device: "a")
        let loop = EmbeddedEventLoop()
        let first = LiveStream(eventLoop: loop, principal: a, hub: hub, metrics: GatewayMetrics())
        try hub.subscribe(first)
        try hub.subscribe(LiveStream(eventLoop: loop, principal: a, hub: hub, metrics: GatewayMetrics()))
        #expect(Self.refusal(hub, a) == .credential)
        let b = Self.principal(group: "g", device: "b")
        try hub.subscribe(LiveStream(eventLoop: loop, principal: b, hub: hub, metrics: GatewayMetrics()))
        #expect(hub.count == 3)
        #expect(Self.refusal(hub, Self.principal(group: "h", device: "c")) == .gateway)
        // One of a's leaves: a may open one again, and the gateway has room for it.
        hub.unsubscribe(first)
        #expect(hub.count == 2)
        // Unsubscribing twice (a channel's close, then the handler's removal) frees one slot only.
        hub.unsubscribe(first)
        #expect(hub.count == 2)
        #expect(Self.refusal(hub, a) == nil)
        #expect(hub.count == 3)
        // Draining: no stream is admitted, whatever the room.
        let other = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        other.closeAll()
        #expect(Self.refusal(other, a) == .gateway)
    }

    @Test func aGroupsCommitWakesThatGroupsStreamsOnlyOnEachStreamsLoop() throws {
        let hub = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        let a1 = try Self.open(Self.principal(group: "A", device: "1"), on: hub)
        let a2 = try Self.open(Self.principal(group: "A", device: "2"), on: hub)
        let b = try Self.open(Self.principal(group: "B", device: "1"), on: hub)
        hub.notify(group: "A")
        #expect(try a1.written() == String(buffer: LiveStream.change.buffer))
        #expect(try a2.written() == String(buffer: LiveStream.change.buffer))
        #expect(try b.written() == "")
        #expect(String(buffer: LiveStream.change.buffer).contains("event: change\n"))
        // A group without streams wakes nobody.
        hub.notify(group: "C")
        #expect(try a1.written() == "" && b.written() == "")
        // nil (the LISTEN reconnected): every group's.
        hub.notify(group: nil)
        for device in [a1, a2, b] { #expect(try device.written().contains("event: change\n")) }
        // The heartbeat: a comment to every stream.
        hub.heartbeat()
        for device in [a1, a2, b] { #expect(try device.written() == String(buffer: LiveStream.heartbeat.buffer)) }
    }

    @Test func revokedAndExpiredCredentialsStreamsEndWithTheReasonAndTheOthersGoOn() throws {
        let hub = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        let revoked = try Self.open(Self.principal(group: "A", device: "1", id: 11), on: hub)
        let expired = try Self.open(Self.principal(group: "A", device: "2", id: 12, expiresAt: Date(timeIntervalSinceNow: -1)), on: hub)
        let kept = try Self.open(Self.principal(group: "A", device: "3", id: 13, expiresAt: Date(timeIntervalSinceNow: 3_600)), on: hub)
        hub.close(credentials: [11, 99], expiredBy: Date())
        let ended = try revoked.written()
        #expect(ended.contains("event: closed\ndata: the credential was revoked\n\n") && ended.hasSuffix("0\r\n\r\n"), "\(ended)")
        #expect(try expired.written().contains("data: the credential has expired\n"))
        #expect(try kept.written() == "")
        // The ended streams' channels closed, and left the hub; the kept one is still woken.
        #expect(!revoked.channel.isActive && !expired.channel.isActive && kept.channel.isActive)
        #expect(hub.count == 1)
        hub.notify(group: "A")
        #expect(try kept.written().contains("event: change\n"))
    }

    /// Several databases (issue 51): each numbers its own credentials, so a revocation of credential 21
    /// in the database of group B ends B's stream of 21, never the stream of A's credential 21 (in
    /// another database), and a group whose place is not known is closed rather than missed.
    @Test func aRevocationEndsOnlyTheStreamsOfItsDatabasesGroups() throws {
        let hub = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        let directory = DirectoryCache(capacity: 10)
        directory.remember(.home, of: "A")
        directory.remember(.named("b"), of: "B")
        let home = try Self.open(Self.principal(group: "A", device: "1", id: 21), on: hub)
        let other = try Self.open(Self.principal(group: "B", device: "1", id: 21), on: hub)
        let unknown = try Self.open(Self.principal(group: "C", device: "1", id: 21), on: hub)
        hub.close(credentials: [21], expiredBy: Date()) { directory.mayBe($0, in: "b") }
        #expect(try other.written().contains("data: the credential was revoked\n"))
        #expect(try unknown.written().contains("data: the credential was revoked\n"))
        #expect(try home.written() == "")
        #expect(home.channel.isActive && hub.count == 1)
    }

    @Test func theDrainEndsEveryStreamWithItsReason() throws {
        let hub = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        let devices = try (1...3).map { try Self.open(Self.principal(group: "G\($0 % 2)", device: "\($0)"), on: hub) }
        hub.closeAll()
        for device in devices {
            #expect(try device.written().contains("data: the gateway is shutting down\n"))
            #expect(!device.channel.isActive)
        }
        #expect(hub.count == 0)
    }

    /// A change that comes while the stream's last write waits is written once that write is done (a
    /// change is only a sign that there is something to pull: one is enough); a heartbeat then is dropped.
    @Test func aChangeDuringAWaitingWriteIsWrittenAfterItAndAHeartbeatIsDropped() throws {
        let hub = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        let device = try Self.open(Self.principal(group: "A", device: "1"), on: hub)
        // An embedded channel completes its writes at once: a write is held back by a handler of the
        // test's own, as a device that reads slowly holds it.
        let holder = HoldWrites()
        try device.channel.pipeline.syncOperations.addHandler(holder, position: .first)
        hub.notify(group: "A")
        #expect(try device.written() == "")
        #expect(holder.held.count == 1)
        hub.notify(group: "A")
        hub.notify(group: "A")
        hub.heartbeat()
        #expect(try device.written() == "")
        #expect(holder.held.count == 1)
        holder.release()
        // The waiting write, then one change for the two that came meanwhile.
        let text = try device.written()
        #expect(text == String(buffer: LiveStream.change.buffer) + String(buffer: LiveStream.change.buffer), "\(text)")
    }

    /// A device that sends more than a live stream takes is closed; what it sent is dropped.
    @Test func aDeviceThatSendsMoreThanTheStreamTakesIsClosed() throws {
        let hub = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        let device = try Self.open(Self.principal(group: "A", device: "1"), on: hub)
        try device.channel.writeInbound(ByteBuffer(repeating: 0x41, count: LiveStream.maxInput))
        #expect(device.channel.isActive)
        try device.channel.writeInbound(ByteBuffer(repeating: 0x41, count: 1))
        device.channel.embeddedEventLoop.run()
        #expect(!device.channel.isActive)
        #expect(hub.count == 0)
    }

    /// What a stream writes is counted as sent (its events' bytes, as the exposition shows them).
    @Test func aStreamsEventsAreCountedAsSent() throws {
        let hub = LiveHub(maxStreams: 10, maxStreamsPerCredential: 10)
        let metrics = GatewayMetrics()
        let device = try Self.open(Self.principal(group: "A", device: "1"), on: hub, metrics: metrics)
        hub.notify(group: "A")
        _ = try device.written()
        let hello = LiveStream.chunk(LiveStream.hello).bytes
        let expected = hello + LiveStream.change.bytes
        #expect(MetricsTests.sample(metrics, "bytes_sent_total") == "\(expected)")
    }
}

/// An outbound handler that holds every write until ``release()``: a write that waits, as one to a
/// device that reads slowly does.
final class HoldWrites: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    // Touched on the embedded channel's loop only (the test's thread).
    var held: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var context: ChannelHandlerContext?
    private var passing = false

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if passing { context.write(data, promise: promise) } else { held.append((unwrapOutboundIn(data), promise)) }
    }

    func flush(context: ChannelHandlerContext) {
        if passing { context.flush() }
    }

    /// Passes the held writes on, and every write after them.
    func release() {
        guard let context else { return }
        passing = true
        let writes = held
        held = []
        for (buffer, promise) in writes { context.writeAndFlush(wrapOutboundOut(buffer), promise: promise) }
    }
}
#endif
