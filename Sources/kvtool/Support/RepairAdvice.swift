import KVStore

/// What to do about each problem `kvtool check` reports, in one line.
enum RepairAdvice {
    static func advice(for problem: IntegrityProblem) -> String {
        let location = problem.location
        // The key as a shell word: quoted when it holds anything but letters, digits and - _ . : (a tuple's JSON).
        let key = problem.key.map { text in
            text.allSatisfy { $0.isLetter || $0.isNumber || "-_.:".contains($0) } ? " \(text)" : " '" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
        } ?? ""
        switch problem.kind {
        case .history:
            return "restore the container from a dump or snapshot taken before (kvtool load --replace FILE); consumers then resynchronise. "
                + "Deleting or rewriting history entries by hand cannot repair it"
        case .catalog:
            return "restore the catalog from a dump (kvtool load --replace FILE), or let the app open '\(location)' again so that it rewrites its entry"
        case .unknownDatabase:
            return "a database no catalog entry describes: load a dump that describes it (kvtool load), or copy out what you need and compact (kvtool compact)"
        case .corruptKey, .corruptValue:
            if location.hasPrefix("_") {
                return "'\(location)' is internal: restore it from a dump (kvtool load --replace FILE); kvtool delete --force \(location)\(key) drops the entry, which history or sync may then miss"
            }
            return "write a good value (kvtool put \(location)\(key) JSON) or delete the entry (kvtool delete \(location)\(key))"
        case .indexEntryWithoutRecord, .missingIndexEntry, .derivedEntryWithoutSource, .derivedEntryMismatch:
            return "only the app maintains these: save the record again from the app, or restore from a dump (kvtool load --replace FILE)"
        case .snapshot:
            return "publish a new snapshot (kvtool snapshot export) and prune the bad one (kvtool snapshot prune)"
        case .feed:
            return "let the app publish its widget feed again (a sync, or the app's next save, does)"
        default:
            return "restore from a dump (kvtool load --replace FILE)"
        }
    }
}
