import Foundation
import KVStore
@testable import SyncKit
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The container's sync service without a server (issue 38): ownership, the status every process
/// reads, requests and the agent's registration. Replication through PostgreSQL, with real owners and
/// agents, is in SyncKitPostgresTests/SyncServiceTests.
@Suite(.serialized) struct SyncServiceUnitTests {
    let dir = TemporaryDirectory()

    /// A container whose `notes` are enabled for sync, as SyncKitPostgres's `Replication.enable` leaves
    /// it: history on, and the replicator's history consumer registered.
    func container(_ name: String = "group.com.example.service", replicated: Bool = true) throws -> (SharedContainer, KVCollection<String, String>) {
        let container = try SharedContainer(groupIdentifier: name, root: dir.path)
        let history = try History.attach(to: container)
        try history.enable(.collection("notes"))
        if replicated { _ = try history.consumer(named: SyncService.consumerName) }
        return (container, try container.store.collection("notes", key: String.self, value: String.self))
    }

    @Test(.blockingWork) func aFreshContainerHasNoOwnerAndCountsItsWritesAsPending() throws {
        let (container, notes) = try container()
        try notes.put("a", forKey: "1")
        try notes.put("b", forKey: "2")
        let status = try SyncService(container: container).status()
        #expect(status.owner == nil && status.acknowledged == .zero && status.current.rawValue == 2)
        #expect(status.pending == 2 && !status.isSynced && !status.agentRegistered)
    }

    /// With no owner and no agent, a request says so at once (issue 46: it ran out its deadline), and
    /// one that may not start the agent waits for an owner until its deadline.
    @Test(.blockingWork) func aRequestWithNobodyToAskSaysSoAtOnce() throws {
        let (container, notes) = try container()
        try notes.put("a", forKey: "1")
        let started = ContinuousClock.now
        let outcome = try SyncService(container: container).request(within: .seconds(120))
        print("SyncServiceUnitTests: a request with no owner and no agent answered in \(ContinuousClock.now - started)")
        guard case .nothingSyncs(let shortfall) = outcome else {
            Issue.record("expected nothingSyncs, got \(outcome)")
            return
        }
        #expect(shortfall.owner == nil && shortfall.pending == 1 && shortfall.replicates)
        let advice = "no sync agent is registered; to register one: kvtool --root \(dir.path) --group group.com.example.service sync agent set --server URL"
        #expect(shortfall.agent == advice)
        #expect(outcome.description == "not acknowledged: no process owns sync and none can start: \(advice); 1 pending")
        let waiting = try SyncService(container: container).request(within: .milliseconds(100), startingAgent: false)
        guard case .notWithinDeadline(let short) = waiting else {
            Issue.record("a request that may not start the agent did not wait for an owner: \(waiting)")
            return
        }
        #expect(short.owner == nil && short.agent == nil)
    }

    /// Nothing written and nothing ever synced is not "acknowledged through token 0" (issue 46): with a
    /// live owner, the request waits for a round of it that reaches a server; and with nothing enabled
    /// for sync, it says so at once, whatever the deadline.
    @Test(.blockingWork) func tokenZeroIsAcknowledgedOnlyByARoundOfAnOwner() throws {
        let (container, _) = try container()
        let service = try SyncService(container: container)
        guard case .success(let ownership) = try SyncOwnership.acquire(container, mode: .live) else {
            Issue.record("no ownership")
            return
        }
        guard case .notWithinDeadline(let shortfall) = try service.request(within: .milliseconds(100)) else {
            Issue.record("a request was acknowledged before any round reached a server")
            return
        }
        #expect(shortfall.owner?.pid == getpid() && shortfall.pending == 0)
        try container.store.write { tx in
            try ownership.recordSuccess(consumerToken: .zero, complete: true, now: Date(), in: tx)
        }
        ownership.posted()
        guard case .acknowledged(let through, _) = try service.request(within: .seconds(1)) else {
            Issue.record("a round of the owner did not acknowledge token 0")
            return
        }
        #expect(through == .zero)
        ownership.release()

        let (unreplicated, notes) = try self.container("group.com.example.service.none", replicated: false)
        let none = try SyncService(container: unreplicated)
        for written in [false, true] {
            if written { try notes.put("a", forKey: "1") }
            let outcome = try none.request(within: .seconds(120))
            guard case .nothingSyncs(let nothing) = outcome else {
                Issue.record("expected nothingSyncs, got \(outcome)")
                return
            }
            #expect(!nothing.replicates && nothing.pending == (written ? 1 : 0))
            #expect(outcome.description == "not acknowledged: nothing in this container is enabled for sync (kvtool sync enable COLLECTION), so nothing of it goes to a server")
        }
    }

    /// One owner at a time: a second acquisition (another open file description, as another process
    /// has) is refused with the owner's record; a round recorded by the owner acknowledges what a
    /// request waits for, and changes applied from other devices right after are acknowledged too.
    @Test(.blockingWork) func oneOwnerAtATimeAndItsRoundsAcknowledgeRequests() throws {
        let (container, notes) = try container()
        try notes.put("a", forKey: "1")
        guard case .success(let ownership) = try SyncOwnership.acquire(container, mode: .once) else {
            Issue.record("the first acquisition failed")
            return
        }
        guard case .failure(let held) = try SyncOwnership.acquire(container, mode: .once) else {
            Issue.record("a second owner was let in")
            return
        }
        #expect(held.owner?.pid == getpid() && held.owner?.mode == .once)
        let service = try SyncService(container: container)
        #expect(try service.status().owner?.pid == getpid())
        // A change from another device, applied after this device's own write was pushed.
        try container.store.write(author: SyncService.replicationAuthor) { tx in try notes.put("remote", forKey: "2", in: tx) }
        try container.store.write { tx in
            try ownership.recordSuccess(consumerToken: ChangeToken(rawValue: 1), complete: true, now: Date(), in: tx)
        }
        let status = try service.status()
        #expect(status.acknowledged.rawValue == 2 && status.pending == 0 && status.isSynced)
        guard case .acknowledged(let through, _) = try service.request(within: .seconds(1)) else {
            Issue.record("a request for what the server has was not acknowledged")
            return
        }
        #expect(through.rawValue == 2)
        // A refusal recorded before a request was made does not answer it; one recorded after does, at once.
        try notes.put("c", forKey: "3")
        try container.store.write { tx in
            try ownership.recordFailure(SyncFailure(reason: .clockSkew, message: "an old refusal"), in: tx)
        }
        guard case .notWithinDeadline(let shortfall) = try service.request(within: .milliseconds(100)) else {
            Issue.record("an old refusal answered a new request")
            return
        }
        #expect(shortfall.lastError?.message == "an old refusal" && shortfall.pending == 1)
        let requests = try ChangeNotifier(container: container).subscribe(SyncService.requestNotification)
        let refusal = OnAThread { try service.request(within: .seconds(120)) }
        // The request posts when it starts waiting: its refusal is one recorded from then on.
        try waitUntil("the request's post") { requests.wait(timeout: .milliseconds(100)) }
        try container.store.write { tx in
            try ownership.recordFailure(SyncFailure(reason: .clockSkew, message: "too far ahead"), in: tx)
        }
        ownership.posted()
        let refused = try refusal.value(waitingWith: waitUntil)
        #expect(refused.failure?.reason == .clockSkew && refused.failure?.message == "too far ahead", "\(refused)")
        ownership.release()
        #expect(try service.status().owner == nil)
        guard case .success = try SyncOwnership.acquire(container, mode: .live) else {
            Issue.record("the lock was not free after release")
            return
        }
    }

    /// The lock free, but the record naming another live process: two owners, refused.
    @Test(.blockingWork) func aLiveOwnerRecordedWithoutTheLockIsTwoOwnersAndRefused() throws {
        let (container, _) = try container()
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        defer { sleeper.terminate(); sleeper.waitUntilExit() }
        let pid = sleeper.processIdentifier
        let other = SyncOwner(pid: pid, since: Date(), mode: .live, startTicks: try #require(ProcessStart.ticks(of: pid)))
        #expect(other.isAlive)
        let service = try SyncService(container: container)
        try container.store.write { tx in
            try tx.unrecorded { try service.states.put(SyncServiceState(owner: other), forKey: SyncService.stateKey, in: tx) }
        }
        #expect(throws: SyncError.ownershipConflict(other)) { _ = try SyncOwnership.acquire(container, mode: .once) }
        // A dead owner's record is no owner: killed and not yet reaped (a zombie) counts as dead.
        kill(pid, SIGKILL)
        try waitUntil("the killed process to be a zombie or gone") { !other.isAlive }
        #expect(try service.status().owner == nil)
        guard case .success = try SyncOwnership.acquire(container, mode: .once) else {
            Issue.record("a dead owner's record kept the ownership")
            return
        }
    }

    /// A ValueObservation of the status follows the owner's records, in this process as in others
    /// (they are posted as "sync.status": the records are outside history).
    @Test func theStatusIsObservable() async throws {
        let (container, notes) = try container()
        try notes.put("a", forKey: "1")
        let service = try SyncService(container: container)
        let seen = Locked<[Bool]>([])
        let observer = Task {
            for try await status in service.statusObservation.values(in: container) {
                seen.withLock { $0.append(status.isSynced) }
                if status.isSynced { return }
            }
        }
        try await waitUntilAsync("the first value") { !seen.withLock { $0 }.isEmpty }
        guard case .success(let ownership) = try SyncOwnership.acquire(container, mode: .live) else {
            Issue.record("no ownership")
            return
        }
        try await container.store.write { tx in
            try ownership.recordSuccess(consumerToken: ChangeToken(rawValue: 1), complete: true, now: Date(), in: tx)
        }
        ownership.posted()
        try await waitUntilAsync("the synced value") { seen.withLock { $0 }.last == true }
        #expect(seen.withLock { $0 }.first == false)
        observer.cancel()
        ownership.release()
    }

    // MARK: - The agent's registration

    @Test(.blockingWork) func aRegistrationIsReadOnlyFromAPrivateRegularFileOfThisUser() throws {
        let (container, notes) = try container()
        try notes.put("a", forKey: "1")
        #expect(try SyncAgentRegistration.load(from: container) == nil)
        let registration = SyncAgentRegistration(arguments: ["/usr/bin/true", "sync"], server: "postgres://kv:secret@127.0.0.1:1/kv",
                                                 token: "kvs_secret")
        // Kept outside the container (in the user's configuration): removed with the test.
        defer { _ = try? SyncAgentRegistration.remove(from: container) }
        try registration.save(in: container)
        let path = try SyncAgentRegistration.registrationPath(for: container)
        #expect(!FileManager.default.fileExists(atPath: container.path + "/" + SyncAgentRegistration.fileName))
        var info = stat()
        #expect(lstat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try SyncAgentRegistration.load(from: container) == registration)
        #expect(!registration.description.contains("secret"), "the description shows the program only")
        #expect(try SyncService(container: container).status().agentRegistered)

        chmod(path, 0o644)
        #expect(throws: SyncError.self) { _ = try SyncAgentRegistration.load(from: container) }
        chmod(path, 0o600)
        if geteuid() == 0 {
            chown(path, 65534, 65534)
            #expect(throws: SyncError.self) { _ = try SyncAgentRegistration.load(from: container) }
            chown(path, 0, 0)
        }
        // A link a co-tenant planted is not followed, and nothing is started for it.
        let planted = dir.path + "/planted-agent"
        let other = try self.container("group.com.example.other").0
        try registration.save(in: other)
        rename(try SyncAgentRegistration.registrationPath(for: other), planted)
        unlink(path)
        symlink(planted, path)
        #expect(throws: SyncError.invalidAgentRegistration("\(path): it is a symbolic link, which is never followed; it is not run")) {
            _ = try SyncAgentRegistration.load(from: container)
        }
        let outcome = try SyncService(container: container).request(within: .seconds(120))
        guard case .nothingSyncs(let shortfall) = outcome else {
            Issue.record("expected nothingSyncs, got \(outcome)")
            return
        }
        #expect(shortfall.agent?.contains("is a symbolic link") == true, "\(shortfall)")
        #expect(try SyncAgentRegistration.remove(from: container))
        #expect(try !SyncAgentRegistration.remove(from: container))
    }

    /// A relative program is refused when saved, and when loaded.
    @Test(.blockingWork) func theAgentsProgramMustBeAnAbsolutePath() throws {
        let (container, _) = try container()
        #expect(throws: SyncError.self) { try SyncAgentRegistration(arguments: ["kvtool"]).save(in: container) }
        #expect(throws: SyncError.self) { try SyncAgentRegistration(arguments: []).save(in: container) }
    }

    /// A request with no owner starts the registered program, detached, its output in the
    /// container's agent log.
    @Test(.blockingWork) func aRequestWithNoOwnerStartsTheRegisteredAgent() throws {
        let (container, notes) = try container()
        try notes.put("a", forKey: "1")
        let marker = dir.path + "/agent-ran"
        defer { _ = try? SyncAgentRegistration.remove(from: container) }
        try SyncAgentRegistration(arguments: ["/bin/sh", "-c", "echo agent output; touch \(marker)"]).save(in: container)
        // The program exits having synced nothing: no owner, none can start. Said when it exits.
        let outcome = try SyncService(container: container).request(within: .seconds(120))
        guard case .nothingSyncs(let shortfall) = outcome else {
            Issue.record("a program that syncs nothing cannot acknowledge: \(outcome)")
            return
        }
        #expect(shortfall.agent?.hasSuffix("exited with status 0") == true, "\(shortfall)")
        try waitUntil("the agent to run") { FileManager.default.fileExists(atPath: marker) }
        try waitUntil("the agent's output in its log") {
            (try? String(contentsOfFile: container.path + "/" + SyncAgentRegistration.logName, encoding: .utf8))?.contains("agent output") == true
        }
    }

    /// The agent's log is never written through a link a co-tenant planted: the agent does not start.
    @Test(.blockingWork) func anAgentLogThatIsALinkIsNotFollowed() throws {
        let (container, notes) = try container()
        try notes.put("a", forKey: "1")
        let marker = dir.path + "/agent-ran"
        defer { _ = try? SyncAgentRegistration.remove(from: container) }
        try SyncAgentRegistration(arguments: ["/bin/sh", "-c", "echo planted output; touch \(marker)"]).save(in: container)
        let target = dir.path + "/victim"
        try Data("untouched\n".utf8).write(to: URL(fileURLWithPath: target))
        #expect(symlink(target, container.path + "/" + SyncAgentRegistration.logName) == 0)
        let outcome = try SyncService(container: container).request(within: .seconds(120))
        guard case .nothingSyncs(let shortfall) = outcome else {
            Issue.record("expected nothingSyncs, got \(outcome)")
            return
        }
        #expect(shortfall.agent?.contains("could not start: refusing \(container.path)/\(SyncAgentRegistration.logName): it is a symbolic link") == true,
                "\(shortfall)")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "untouched\n")
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    // MARK: - Waiting

    func waitUntil(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(BuildScale.seconds(20))
        while try !condition() {
            guard Date() < deadline else { throw TestFailure("timed out waiting for \(what)") }
            usleep(5_000)
        }
    }

    func waitUntilAsync(_ what: String, _ condition: () throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(BuildScale.seconds(20))
        while try !condition() {
            guard Date() < deadline else { throw TestFailure("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

}

/// A blocking call run on a thread of its own, never on the cooperative pool, which other suites'
/// async tests need meanwhile.
final class OnAThread<T: Sendable>: @unchecked Sendable {
    private let result = Locked<Result<T, any Error>?>(nil)

    init(_ body: @escaping @Sendable () throws -> T) {
        let result = self.result
        Thread { result.withLock { $0 = Result { try body() } } }.start()
    }

    func value(waitingWith wait: (String, () throws -> Bool) throws -> Void) throws -> T {
        try wait("the blocking call") { result.withLock { $0 } != nil }
        return try result.withLock { $0! }.get()
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension SyncRequestOutcome {
    var failure: SyncFailure? {
        if case .refused(let failure) = self { failure } else { nil }
    }
}
