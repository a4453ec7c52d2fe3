import ArgumentParser
import Foundation
import KVStore
import SyncKit
import Workloads

/// `kvtool check`: the integrity walk.
struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Walk the whole container and verify it; exits 74 if anything is wrong.",
        discussion: """
            In order: clears stale reader slots; walks every LMDB database in one read transaction, \
            decoding every key and value with the catalog, and checks that every index entry and \
            derived entry has its record; runs the typed checks of the apps kvtool registers \
            (for each collection whose Swift types they own, it recomputes every \
            index entry and derived value from each record); checks that history has no gap and holds nothing SyncKit never writes; verifies every snapshot's \
            size and SHA-256 (and that the manifest parses); and reads every widget feed file back. \
            Values of collections whose type an app registered with kvtool are decoded as that type. \
            Prints one line per problem, naming the collection and the key, and under it the repair.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(parsing: .unconditional, help: "Stop listing problems after this many (the walk still completes).") var maxProblems = 1_000

    func validate() throws {
        guard maxProblems > 0 else { throw ValidationError("--max-problems must be at least 1") }
    }

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let cleared = container.store.staleReadersClearedAtOpen + (try container.store.clearStaleReaders())
        // Entries that do not parse are left out here: the walk below names each of them.
        let catalog = try container.store.catalogWithCounts(skippingCorrupt: true)
        let total = catalog.reduce(0) { $0 + $1.count }
        let bar = ProgressBar(total: total, label: "check")
        let report = try container.store.checkIntegrity(maxProblems: maxProblems) { bar.update($0) }
        bar.finish()
        var problems = report.problems
        var notes: [String] = []

        let names = Set(catalog.filter { $0.entry.kind == .collection }.map(\.entry.name))
        for check in KVToolApps.integrityChecks where check.applies(toCollections: names) {
            do {
                problems += try check.run(container.store, maxProblems)
                notes.append("recomputed the index entries and derived values of '\(check.name)'")
            } catch let error as KVStoreError {
                notes.append("could not open '\(check.name)' with kvtool's types (\(error)); its records were checked with the catalog only")
            }
        }
        // Values of collections whose type an app registered with kvtool must decode as that type.
        for name in names.sorted() {
            guard let typed = KVToolApps.typedValue(forCollection: name) else { continue }
            let (entry, raw) = try container.store.untypedCollection(named: name)
            guard entry.valueEncoding == .cbor else { continue }
            try container.store.read { tx in try raw.forEach(in: tx) { key, value in
                do {
                    try typed.type.incoming(app: typed.app)(value)
                } catch let refusal as TypedValue.Refusal {
                    let keyText = (try? ValueText.renderKey(key.bytes, entry: entry)) ?? "0x" + Hex.encode(key.bytes)
                    problems.append(IntegrityProblem(kind: .corruptValue, location: name, key: keyText,
                                                     detail: refusal.description))
                }
                return problems.count <= maxProblems
            } }
            notes.append("decoded every value of '\(name)' as the \(typed.app) app's \(typed.type.typeName)")
        }
        var historyChecked = false
        if !names.isDisjoint(with: History.collectionNames) {
            // Garbage in history's own catalog entries or records must be named, not end the check.
            do {
                problems += try History.attach(to: container.store).checkIntegrity(maxProblems: maxProblems)
                historyChecked = true
            } catch let error as KVStoreError {
                problems.append(IntegrityProblem(kind: .history, location: History.entriesName, detail: "cannot open history: \(error)"))
            }
        }
        var snapshots: SnapshotVerification?
        do {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: container.snapshotsDirectory, isDirectory: &isDirectory), isDirectory.boolValue {
                let published = try Snapshots(directory: container.snapshotsDirectory, create: false)
                snapshots = try published.list().isEmpty ? nil : try published.verify()
            }
        } catch let error as SnapshotError {
            problems.append(IntegrityProblem(kind: .snapshot, location: "Snapshots/\(Snapshots.manifestName)", detail: error.description))
        }
        for problem in snapshots?.problems ?? [] {
            problems.append(IntegrityProblem(kind: .snapshot, location: "Snapshots/\(problem.file)", detail: problem.description))
        }
        let feeds = try WidgetFeedCheck.run(snapshotsDirectory: container.snapshotsDirectory, sharing: container.options.sharing)
        for problem in feeds.problems {
            problems.append(IntegrityProblem(kind: .feed, location: "Snapshots/\(ContainerLayout.feedsName)/\(problem.file)", detail: problem.description))
        }
        if problems.count > maxProblems { problems = Array(problems.prefix(maxProblems)) }

        if global.json {
            try Output.json([
                "ok": .bool(problems.isEmpty),
                "transactionID": .integer(report.transactionID),
                "databases": .integer(report.databases), "entries": .integer(report.entries),
                "staleReadersCleared": .integer(cleared),
                "historyChecked": .bool(historyChecked),
                "snapshotsVerified": .integer(snapshots?.checked.count ?? 0),
                "feedsVerified": .integer(feeds.checked.count),
                "notes": .array(notes.map(JSONValue.string)),
                "problems": .array(problems.map {
                    var object: JSONValue = ["kind": .string($0.kind.rawValue), "location": .string($0.location),
                                             "detail": .string($0.detail), "message": .string($0.description),
                                             "repair": .string(RepairAdvice.advice(for: $0))]
                    if let key = $0.key { object["key"] = .string(key) }
                    return object
                }),
            ])
        } else {
            for problem in problems {
                print(problem)
                print("  repair: \(RepairAdvice.advice(for: problem))")
            }
            for note in notes { print("note: \(note)") }
            let summary = "\(report.entries) entries in \(report.databases) databases at txn \(report.transactionID)"
                + (historyChecked ? ", history" : "")
                + (snapshots.map { ", \($0.checked.count) snapshot\($0.checked.count == 1 ? "" : "s")" } ?? "")
                + (feeds.checked.isEmpty ? "" : ", \(feeds.checked.count) feed\(feeds.checked.count == 1 ? "" : "s")")
                + "; \(cleared) stale reader slot\(cleared == 1 ? "" : "s") cleared"
            print(problems.isEmpty ? "ok: \(summary)" : "\(problems.count) problem\(problems.count == 1 ? "" : "s"): \(summary)")
        }
        if !problems.isEmpty {
            throw CLIError(.failure, "\(problems.count) integrity problem\(problems.count == 1 ? "" : "s") in \(container.groupIdentifier.rawValue)"
                           + (report.truncated ? " (listing stopped at --max-problems)" : ""))
        }
    }
}
