// A replication device for the randomized model test (ReplicationModelTests): one sync round of a
// container's `notes` (and of its files, when the container declares replicated prefixes) through a
// server, with a clock that may be wrong.
import Foundation
import KVStore
import SyncKit
#if PostgreSQL
import SyncKitPostgres
#endif

/// `sync-device ROOT GROUP URL SKEW_MS TIMEOUT_MS [TOKEN_FILE]`: runs one `sync()` of the collection
/// `notes` (String → String) with this process's clock `SKEW_MS` off (its history's stamps and its
/// replicator's checks), and statements abandoned after `TIMEOUT_MS`, with the database at URL, or
/// through the sync gateway at URL (http://) with the credential in TOKEN_FILE. Prints `ok pushed P
/// pulled Q quarantined R rejected J files up U down D` and exits 0 (D: the paths whose bytes became present here
/// in the round without having been written here, that is, downloaded); a replication error prints
/// `error MESSAGE` and exits 2 (3 for a clock the server refused), as a partition or a server down
/// makes expected.
func syncCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    guard command == "sync-device" else { return false }
    #if PostgreSQL
    let skew = TimeInterval(Int(rest[1])!) / 1000
    let container = try SharedContainer(groupIdentifier: group, root: root)
    let history = try History.attach(to: container)
    let clock: @Sendable () -> Date = { Date().addingTimeInterval(skew) }
    history.setWallClock(clock)
    let notes = try container.store.collection("notes", key: String.self, value: String.self)
    var options = Replicator.Options()
    options.clock = clock
    options.statementTimeout = .milliseconds(Int64(rest[2])!)
    options.connectTimeout = .milliseconds(Int64(rest[2])!)
    options.minimumBackoff = .milliseconds(10)
    let endpoint: Replicator.Endpoint
    if rest.count > 3 {
        let token = try String(contentsOfFile: rest[3], encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        endpoint = .gateway(try SyncGatewayURL(rest[0]), token: token)
    } else {
        endpoint = .database(try ServerURL(rest[0]))
    }
    let replicator = try Replicator(container: container, endpoint: endpoint, targets: [.collection(notes)], options: options)
    let before = try presentFiles(container)
    let outcome = Locked<Result<SyncReport, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        do {
            let report = try await replicator.sync()
            outcome.withLock { $0 = .success(report) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
        }
        await replicator.close()
        done.signal()
    }
    done.wait()
    switch outcome.withLock({ $0 })! {
    case .success(let report):
        let downloaded = try presentFiles(container).subtracting(before).count
        print("ok pushed \(report.pushed) pulled \(report.pulled) quarantined \(report.quarantined) rejected \(report.rejected) files up \(report.filesUploaded) down \(downloaded)")
        exit(0)
    case .failure(let error as ReplicationError):
        print("error \(error)")
        if case .clockAhead = error { exit(3) }
        exit(2)
    case .failure(let error):
        throw error
    }
    #else
    fail("sync-device needs the PostgreSQL trait")
    #endif
}

/// The manifest's files whose bytes this device holds or wrote (present or waiting to upload), as
/// path and SHA-256: a path that is in the set after a round and was not before was downloaded.
private func presentFiles(_ container: SharedContainer) throws -> Set<String> {
    Set(try container.files.fileStatus().filter { $0.state == .present || $0.state == .waitingToUpload }
        .map { "\($0.path) \($0.entry.sha256.base64EncodedString())" })
}
