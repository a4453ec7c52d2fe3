#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a client can make the gateway hold, or the database do, before it proves who it is, and what
/// a client that stops reading can make it keep.
@Suite(.serialized) struct ResourceAttacks {
    /// A push that declares 32 MiB with a never-issued token is refused from its head: the 401 comes
    /// before a byte of the body is sent, and four such bodies sent in full at once leave the
    /// gateway's peak memory where it was.
    @Test func aBodyWithAnUnknownCredentialIsRefusedFromItsHeadAndNeverKept() async throws {
        // Under AddressSanitizer freed memory waits in a quarantine (256 MiB) before it is reused, so
        // the 128 MiB this gateway reads and drops would look kept (76 MiB of peak in CI's run): its
        // quarantine is 1 MiB here, and the bound below means the same in every build.
        let environment = BuildScale.sanitizer == "address"
            ? ["ASAN_OPTIONS": (ProcessInfo.processInfo.environment["ASAN_OPTIONS"].map { $0 + ":" } ?? "") + "quarantine_size_mb=1"]
            : [:]
        let arena = try await Arena("pre-auth", gatewayEnvironment: environment)
        let bogus = SyncTokens.prefix + String(repeating: "B", count: 43)
        let head = RawHTTP.head("POST /v1/push", headers: arena.headers(bogus), length: 32 << 20)
        // The head alone: the answer comes without the body.
        let started = ContinuousClock.now
        let answer = try await offPool { [url = arena.url] in
            let fd = try RawHTTP.connect(url, timeout: 20)
            defer { close(fd) }
            RawHTTP.sendAll(fd, head)
            return try RawHTTP.parse(RawHTTP.readToEnd(fd))
        }
        #expect(answer.status == 401 && answer.text.contains("not known here"), "\(answer.status) \(answer.text)")
        #expect(ContinuousClock.now - started < .seconds(BuildScale.seconds(10)))
        // Four bodies of 32 MiB, sent whole at once: read and dropped, never kept.
        let before = residentMemory(of: arena.gateway.pid)
        let body = [UInt8](repeating: 0, count: 32 << 20)
        let answers = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<4 {
                group.addTask { [url = arena.url] in
                    try await offPool {
                        let fd = try RawHTTP.connect(url, timeout: 30)
                        defer { close(fd) }
                        RawHTTP.sendAll(fd, head + body)
                        return (try? RawHTTP.parse(RawHTTP.readToEnd(fd)).status) ?? 0
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let after = residentMemory(of: arena.gateway.pid)
        print("[adversary] four 32 MiB bodies with an unknown token: gateway peak RSS \(before.peak) -> \(after.peak) MiB; answers \(answers)")
        #expect(answers.allSatisfy { $0 == 401 || $0 == 0 }, "\(answers)")
        #expect(answers.contains(401))
        #expect(after.peak - before.peak < 48, "the gateway's peak RSS grew by \(after.peak - before.peak) MiB")
        // A declared length over the cap is refused from the head too, whoever sends it.
        let token = try await arena.token(["--device", "d"])
        let over = try await offPool { [url = arena.url, headers = arena.headers(token)] in
            let fd = try RawHTTP.connect(url, timeout: 20)
            defer { close(fd) }
            RawHTTP.sendAll(fd, RawHTTP.head("POST /v1/push", headers: headers, length: (32 << 20) + 1))
            return try RawHTTP.parse(RawHTTP.readToEnd(fd))
        }
        #expect(over.status == 413 && over.text.contains("over 33554432 bytes"), "\(over.status) \(over.text)")
        #expect(try await arena.log().isEmpty)
    }

    /// A flood of random well-formed tokens from one address: past its failures' burst the address
    /// gets 429 without a database lookup (a 401 is a lookup), while a real credential from another
    /// address keeps syncing, and keeps its own limit: past its burst, it gets 429 with Retry-After.
    @Test func aFloodOfBogusTokensIsLimitedByAddressAndARealCredentialKeepsItsOwnLimit() async throws {
        let arena = try await Arena("flood", gatewayArguments: ["--rate", "2"])
        let real = try await arena.token(["--device", "honest"])
        let honest = try Device(group: arena.group)
        try honest.put("before", "k")
        #expect(try await arena.sync(honest, real).status == 0)
        let started = ContinuousClock.now
        var statuses: [Int: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let bogus = SyncTokens.prefix + String((0..<43).map { _ in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".randomElement(using: &generator)! })
            let answer: RawHTTP.Answer
            do {
                answer = try await arena.get("/v1/hello", bogus, source: "127.0.0.2")
            } catch {
                // It failed once under AddressSanitizer (a connection closed with no answer) without
                // saying more: the gateway's last lines go with it.
                Issue.record("request \(statuses.values.reduce(0, +) + 1) of the flood (\(statuses)): \(error); the gateway's last lines: \(arena.gateway.output.suffix(20))")
                throw error
            }
            statuses[answer.status, default: 0] += 1
        }
        let elapsed = Double((ContinuousClock.now - started).components.seconds) + 1
        print("[adversary] 200 bogus tokens from 127.0.0.2 in \(elapsed) s: \(statuses)")
        // The failures' burst is 20, refilled at 2 a second, and past it 1 unknown credential a second
        // is still checked: that many lookups at most.
        #expect((statuses[401] ?? 0) <= 20 + Int(3 * elapsed) + 2, "\(statuses)")
        #expect((statuses[429] ?? 0) >= 200 - 20 - Int(3 * elapsed) - 2, "\(statuses)")
        #expect(Set(statuses.keys).isSubset(of: [401, 429]))
        // The honest device, from 127.0.0.1, syncs meanwhile.
        try honest.put("during", "k")
        let during = try await arena.sync(honest, real)
        #expect(during.status == 0, "\(during.stderr)")
        // And its own limit holds: 2 a second, a burst of 8.
        var limited: RawHTTP.Answer?
        for _ in 0..<20 {
            let answer = try await arena.get("/v1/hello", real)
            if answer.status == 429 { limited = answer; break }
            #expect(answer.status == 200, "\(answer.status) \(answer.text)")
        }
        let refused = try #require(limited, "20 requests in a row were never limited")
        #expect(refused.text.contains("too many requests for this credential") && (Int(refused.header("Retry-After") ?? "") ?? 0) >= 1,
                "\(refused.headers) \(refused.text)")
        // A device told to wait says so in one line. Something else keeps the credential's bucket empty
        // meanwhile: the device's process takes a second or more to start under a sanitizer, time
        // enough for the bucket to refill (2 a second) and the sync to go through.
        let hammer = Task {
            while !Task.isCancelled {
                _ = try? await arena.get("/v1/hello", real)
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        // The refill can still win a round on a loaded machine (the hammer's requests are as slow as
        // everything else): a sync that went through is tried again, until one is told to wait.
        var waited = try await arena.sync(honest, real)
        for _ in 0..<5 where waited.status == 0 { waited = try await arena.sync(honest, real) }
        hammer.cancel()
        _ = await hammer.value
        // Its line names the credential's budget, as the gateway did.
        #expect(waited.status == 74 && waited.stderr.contains("too many requests for this credential (its budget is 2 a second)"),
                "\(waited.status) \(waited.stderr)")
        #expect(try await arena.log().count == 2)
    }

    /// Devices that ask for a large answer and never read it: each connection is closed at the answer
    /// deadline, and the gateway's memory stays bounded by its answer budget.
    @Test func slowReadersAreCutOffAtTheAnswerDeadline() async throws {
        let arena = try await Arena("slow-readers", gatewayArguments: ["--answer-timeout", "2"])
        // About 24 MiB of state: three values of 8 MiB, written on the direct path.
        let writer = try Device(group: arena.group)
        try writer.write { tx in
            for index in 0..<3 { try writer.notes.put(String(repeating: "\(index)", count: 8 << 20), forKey: "big\(index)", in: tx) }
        }
        #expect(try await writer.kvtoolOffPool(["sync", "run", "--once", "--server", arena.cluster.tcpURL.description]).status == 0)
        let token = try await arena.token(["--device", "reader"])
        // Ten devices (one credential's resyncs are answered one at a time since issue 47, each held
        // until the deadline: ResyncFairnessAttacks), issued at once.
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<10 { group.addTask { try await arena.token(["--device", "reader\(index)"]) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let before = residentMemory(of: arena.gateway.pid)
        let started = ContinuousClock.now
        // Ten connections ask and read nothing until the gateway gives up on them (or refuses them),
        // then read what is left: the gateway closed them long before the answer's end. A gateway that
        // never gave up is waited for until the deadline, and its whole answer is then read.
        let deadline = ContinuousClock.now + .seconds(BuildScale.seconds(90))
        let received = try await withThrowingTaskGroup(of: (Int, Duration).self) { group in
            for reader in tokens {
                let request = RawHTTP.head("GET /v1/state", headers: arena.headers(reader), length: nil)
                group.addTask { [url = arena.url] in
                    try await offPool {
                        let fd = try RawHTTP.connect(url, timeout: 30)
                        defer { close(fd) }
                        var small: Int32 = 64 << 10
                        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
                        RawHTTP.sendAll(fd, request)
                        _ = RawHTTP.awaitCloseUnread(fd, until: deadline)
                        let bytes = RawHTTP.readToEnd(fd)
                        return (bytes.count, ContinuousClock.now - started)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let after = residentMemory(of: arena.gateway.pid)
        print("[adversary] ten readers of a 24 MiB state that stopped reading: received \(received.map(\.0)) after \(received.map { Double($0.1.components.seconds) }) s; gateway peak RSS \(before.peak) -> \(after.peak) MiB, now \(after.now) MiB")
        for (bytes, _) in received {
            #expect(bytes < 20 << 20, "a reader that stopped reading got \(bytes) bytes: the answer was not abandoned")
        }
        // (A sanitizer's build holds more: AddressSanitizer's redzones and quarantine.)
        #expect(after.peak - before.peak < (BuildScale.sanitizer == nil ? 400 : 800), "the gateway's peak RSS grew by \(after.peak - before.peak) MiB")
        // The gateway still serves, and a reader that reads gets the whole state.
        let whole = try GatewayState(decoding: try await arena.get("/v1/state", token).body, maxValueBytes: 16 << 20)
        #expect(whole.rows.count == 3)
    }

    /// A live stream is served from the gateway's event loop once admitted, its HTTP handlers gone: its
    /// head and `hello` come as a chunked answer; a device that sends bytes on it anyway is closed (what
    /// it sent dropped, never kept), and the streams gauge counts the streams that are open, whether
    /// the gateway or the device closed them.
    @Test func aLiveStreamsDeviceThatSendsBytesIsClosedAndTheStreamsAreCountedUntilTheyClose() async throws {
        let arena = try await Arena("live-input")
        let token = try await arena.token(["--device", "follower"])
        let metricsBase = try #require(gatewayMetricsBase(arena.gateway))
        @Sendable func gauge(_ name: String) -> Int? {
            guard let answer = try? RawHTTP.request(metricsBase, "GET /metrics", headers: []) else { return nil }
            return answer.text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
                .flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        @Sendable func live() async -> Int? { (try? await offPool { gauge("kvsync_gateway_live_streams") }) ?? nil }
        let request = RawHTTP.head("GET /v1/live", headers: arena.headers(token), length: nil)
        /// A live stream's socket, read until its `hello`; the head and what came.
        @Sendable func open() throws -> (Int32, RawHTTP.Answer) {
            let fd = try RawHTTP.connect(arena.url, timeout: 30)
            RawHTTP.sendAll(fd, request)
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while !String(decoding: received, as: UTF8.self).contains("event: hello") {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                received += buffer[0..<n]
            }
            return (fd, try RawHTTP.parse(received))
        }
        let (first, head) = try await offPool { try open() }
        defer { close(first) }
        #expect(head.status == 200 && head.header("Content-Type") == "text/event-stream", "\(head.status) \(head.headers)")
        #expect(head.header("Transfer-Encoding") == "chunked", "\(head.headers)")
        #expect(head.text.contains("event: hello\ndata: \(GatewayWire.version)\n\n"), "\(head.text)")
        #expect(await eventuallyAsync(30) { await live() == 1 })
        // 1 MiB sent on the stream: the gateway closes it, having dropped what it read.
        let before = residentMemory(of: arena.gateway.pid)
        let sent = try await offPool { RawHTTP.sendAll(first, [UInt8](repeating: 0x41, count: 1 << 20)) }
        let closed = try await offPool { RawHTTP.awaitCloseUnread(first, until: .now + .seconds(BuildScale.seconds(30))) }
        let after = residentMemory(of: arena.gateway.pid)
        print("[adversary] a live stream's device sent \(sent) of 1 MiB: closed \(closed); gateway peak RSS \(before.peak) -> \(after.peak) MiB")
        #expect(closed, "the gateway kept a live stream whose device sent \(sent) bytes on it")
        #expect(await eventuallyAsync(30) { await live() == 0 })
        // A device that closes its stream: the gauge drops back too, and the gateway still serves.
        let (second, again) = try await offPool { try open() }
        #expect(again.status == 200 && again.text.contains("event: hello"), "\(again.status) \(again.text)")
        #expect(await eventuallyAsync(30) { await live() == 1 })
        close(second)
        #expect(await eventuallyAsync(30) {
            (try? await offPool { gauge("kvsync_gateway_live_streams") == 0 && gauge("kvsync_gateway_connections") == 0 }) == true
        })
    }

    /// A client that trickles its request head a byte every 200 ms is cut off at the request deadline.
    @Test func slowlorisIsCutOffAtTheRequestDeadline() async throws {
        let arena = try await Arena("slowloris", gatewayArguments: ["--request-timeout", "1"])
        let closedAfter = try await offPool { [url = arena.url] in
            try RawHTTP.trickle(url, bytes: Array("GET /v1/hello HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8) + Array(repeating: 0x61, count: 200),
                                every: .milliseconds(200))
        }
        #expect(closedAfter < .seconds(BuildScale.seconds(10)), "\(closedAfter)")
    }

    /// Clients that connect and say nothing fill the accept loop's gate (`--max-connections-awaiting-request
    /// 4`), and hold it a second each at most, never until the request deadline (120 s here) closes
    /// them: a device that connects once the gateway has taken four of them (its connections gauge
    /// says so) is answered, and no sooner than a second after the first of them connected (until then
    /// the gate left its connection in the kernel's backlog). Without the gate it is answered at
    /// once; with a gate that counted silent connections until they close, after 120 s.
    @Test func silentConnectionsHoldTheAcceptLoopForASecondAndNeverStopIt() async throws {
        let arena = try await Arena("silent", gatewayArguments: ["--max-connections-awaiting-request", "4", "--request-timeout", "120"])
        let token = try await arena.token(["--device", "d"])
        let metricsBase = try #require(gatewayMetricsBase(arena.gateway))
        @Sendable func connections() async -> Int? {
            guard let answer = try? await offPool({ try RawHTTP.request(metricsBase, "GET /metrics", headers: []) }) else { return nil }
            return answer.text.split(separator: "\n").first { $0.hasPrefix("kvsync_gateway_connections ") }
                .flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        #expect(try await arena.get("/v1/hello", token).status == 200)
        #expect(await eventuallyAsync(30) { await connections() == 0 })
        let started = ContinuousClock.now
        let silent = try await offPool { [url = arena.url] in try (0..<4).map { _ in try RawHTTP.connect(url, timeout: 5) } }
        defer { for fd in silent { close(fd) } }
        // Taken, all four (the event loops hand connections to the accept loop in any order: a device
        // that connected meanwhile could have been taken before the last of them).
        let taken = await eventuallyAsync(30) { await connections() == 4 }
        #expect(taken, "the gateway did not take the four silent connections")
        let answer = try await arena.get("/v1/hello", token)
        let waited = ContinuousClock.now - started
        print("[adversary] behind 4 silent connections on a gate of 4, a device was answered \(waited) after they connected")
        #expect(answer.status == 200, "\(answer.status) \(answer.text)")
        #expect(waited >= .seconds(1), "answered \(waited) after the silent connections: the gate did not hold it")
        #expect(waited < .seconds(60), "answered \(waited) after the silent connections: they held the gate past its second")
    }
}
#endif
