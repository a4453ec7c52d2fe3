#if PostgreSQL
import HTTPServerKit
import KVStore
import NIOCore
@testable import SyncGateway
import Testing

/// The shell's small types: the trusted proxies' blocks (``ProxyNetwork``), the address failures are
/// counted by (``SourceAddress``), the connection limit both servers share (``ConnectionLimit``), and
/// ``AsyncSemaphore``.
@Suite struct ShellTypesTests {
    static func bytes(_ text: String) throws -> [UInt8] { try #require(ProxyNetwork.parse(text)) }

    @Test func aProxyBlockContainsTheAddressesOfItsPrefixOnly() throws {
        let block = try ProxyNetwork("10.1.0.0/16")
        #expect(block.description == "10.1.0.0/16")
        #expect(try block.contains(Self.bytes("10.1.255.7")))
        #expect(try !block.contains(Self.bytes("10.2.0.1")))
        // An IPv4 peer of a dual-stack listener (IPv4 mapped into IPv6) is the IPv4 address.
        #expect(try block.contains(Self.bytes("::ffff:10.1.2.3")))
        #expect(try !block.contains(Self.bytes("2001:db8::1")))
        let v6 = try ProxyNetwork("2001:db8::/32")
        #expect(try v6.contains(Self.bytes("2001:db8:ffff::1")) && !v6.contains(Self.bytes("2001:db9::1")))
        #expect(try !v6.contains(Self.bytes("10.1.2.3")))
        // No prefix: the one address; /0: every address of its family.
        let one = try ProxyNetwork("192.0.2.1")
        #expect(try one.contains(Self.bytes("192.0.2.1")) && !one.contains(Self.bytes("192.0.2.2")))
        #expect(try ProxyNetwork("0.0.0.0/0").contains(Self.bytes("203.0.113.9")))
        // A prefix that is not a whole byte.
        let odd = try ProxyNetwork("172.16.0.0/12")
        #expect(try odd.contains(Self.bytes("172.31.255.255")) && !odd.contains(Self.bytes("172.32.0.0")))
    }

    @Test(arguments: ["", "10.0.0.0/33", "2001:db8::/129", "10.0.0.0/", "10.0.0.0/+8", "10.0.0.0/ 8", "10.0.0.0/0008",
                      "example.com", "10.0.0.0/8/8", "10.0.0.256"])
    func aProxyBlockThatIsNotOneIsRefusedInOneLine(text: String) {
        #expect(throws: ProxyHeaderError.self) { try ProxyNetwork(text) }
        do {
            _ = try ProxyNetwork(text)
        } catch {
            #expect(!"\(error)".isEmpty && !"\(error)".contains("\n"), "\(error)")
        }
    }

    @Test func failuresOfAnIPv6HostAreCountedByItsSlash64() throws {
        let a = SourceAddress(try SocketAddress(ipAddress: "2001:db8:1:2:aaaa::1", port: 1))
        let b = SourceAddress(try SocketAddress(ipAddress: "2001:db8:1:2:bbbb::9", port: 2))
        let c = SourceAddress(try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 1))
        #expect(a == b && a != c)
        #expect(a.description == "2001:0db8:0001:0002::/64")
        let v4 = SourceAddress(try SocketAddress(ipAddress: "192.0.2.7", port: 9))
        #expect(try v4.description == "192.0.2.7" && v4 != SourceAddress(SocketAddress(ipAddress: "192.0.2.8", port: 9)))
        #expect(SourceAddress(nil).description == "local")
    }

    @Test func theConnectionLimitAdmitsItsMaxAndOneMoreOnceOneLeft() {
        let limit = ConnectionLimit(max: 3)
        #expect((0..<3).allSatisfy { _ in limit.enter() })
        #expect(!limit.enter())
        #expect(limit.count == 3)
        limit.leave()
        #expect(limit.enter() && !limit.enter())
        #expect(limit.refusalLine == "too many connections (3); try again")
    }

    /// Many tasks enter and leave at once: never more than the max counted in, and none left over.
    @Test func theConnectionLimitHoldsUnderConcurrentEntries() async {
        let limit = ConnectionLimit(max: 8)
        let admitted = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<64 {
                group.addTask {
                    var admitted = 0
                    for _ in 0..<1_000 {
                        guard limit.enter() else { continue }
                        admitted += 1
                        #expect(limit.count <= 8)
                        limit.leave()
                    }
                    return admitted
                }
            }
            return await group.reduce(0, +)
        }
        #expect(admitted > 0 && limit.count == 0)
    }

    /// A permit at a time, handed to the waiters in the order they came.
    @Test func theSemaphoreHandsItsPermitToWaitersInOrder() async throws {
        let semaphore = AsyncSemaphore(permits: 1)
        await semaphore.acquire()
        let order = Locked<[Int]>([])
        let waiting = Locked(0)
        var tasks: [Task<Void, Never>] = []
        for index in 0..<3 {
            tasks.append(Task {
                waiting.withLock { $0 += 1 }
                await semaphore.acquire()
                order.withLock { $0.append(index) }
                semaphore.release()
            })
            // Each waiter is queued before the next starts (waited for with a deadline).
            let deadline = ContinuousClock.now + .seconds(30)
            while semaphore.waiters < index + 1 {
                try #require(ContinuousClock.now < deadline)
                try await Task.sleep(for: .milliseconds(2))
            }
        }
        #expect(order.withLock { $0 }.isEmpty)
        semaphore.release()
        for task in tasks { await task.value }
        #expect(order.withLock { $0 } == [0, 1, 2])
        #expect(waiting.withLock { $0 } == 3)
    }
}
#endif
