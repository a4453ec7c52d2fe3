import KVStore

extension History {
    /// Checks, in one read transaction, that history is whole and was written by SyncKit: its entries
    /// are exactly the tokens after the purge point up to the last token (the last entry's, or the one
    /// `_history.state` records if that is further), with no gap and no duplicate;
    /// each entry decodes, carries its own token and names a collection or defaults suite; transaction
    /// IDs never go back; the state (`lastToken`, `purgedThrough`, `clock`) and every consumer record decode;
    /// and no consumer is ahead of the last token. Call it outside every transaction.
    ///
    /// It reads the raw bytes, so garbage written by another process is a named problem here, never a
    /// thrown error (the ordinary readers throw ``KVStore/KVStoreError/corruptValue(collection:key:reason:underlying:)``
    /// for it); tokens are compared without overflow, whatever the stored numbers are.
    public func checkIntegrity(maxProblems: Int = 1_000) throws -> [IntegrityProblem] {
        let entriesDatabase = try store.rawDatabase(named: entries.databaseName)
        let stateDatabase = try store.rawDatabase(named: state.databaseName)
        let consumersDatabase = try store.rawDatabase(named: consumerRecords.databaseName)
        if entriesDatabase == nil && stateDatabase == nil && consumersDatabase == nil { return [] }
        return try store.read { tx in
            var problems: [IntegrityProblem] = []
            func add(_ location: String, _ key: String?, _ detail: String) {
                if problems.count < maxProblems {
                    problems.append(IntegrityProblem(kind: .history, location: location, key: key, detail: detail))
                }
            }
            // The state: two counters. Wider arithmetic below, so that no stored number can overflow.
            var last: UInt128 = 0
            var purged: UInt128 = 0
            if let stateDatabase {
                try tx.rawScan(stateDatabase) { keyBytes, value in
                    let name = try? String.decodeKey(keyBytes)
                    guard let name, name == Self.lastTokenKey || name == Self.purgedThroughKey || name == Self.clockKey else {
                        add(Self.stateName, name.map(KVStoreError.quote) ?? hex(keyBytes), "not a key SyncKit writes")
                        return true
                    }
                    do {
                        let number = UInt128(try CBORDecoder().decode(UInt64.self, from: Array(value)))
                        if name == Self.lastTokenKey { last = number } else if name == Self.purgedThroughKey { purged = number }
                    } catch {
                        add(Self.stateName, name, "does not decode as \(name == Self.clockKey ? "a clock" : "a token"): \(oneLine(error))")
                    }
                    return true
                }
            }
            var expected = purged + 1
            var highest: UInt128?
            var lastTransaction = Int.min
            if let entriesDatabase {
                try tx.rawScan(entriesDatabase) { keyBytes, value in
                    guard let stored = try? UInt64.decodeKey(keyBytes) else {
                        add(Self.entriesName, hex(keyBytes), "the key is not a token")
                        return true
                    }
                    let token = UInt128(stored)
                    if token > expected {
                        add(Self.entriesName, String(token), expected == token - 1 ? "token \(expected) is missing"
                                                                                   : "tokens \(expected)–\(token - 1) are missing")
                    } else if token < expected {
                        add(Self.entriesName, String(token), "an entry at or below the purge point \(purged)")
                    }
                    expected = max(expected, token + 1)
                    highest = token
                    let entry: HistoryEntry
                    do {
                        entry = try CBORDecoder().decode(HistoryEntry.self, from: Array(value))
                    } catch {
                        add(Self.entriesName, String(token), "the entry does not decode: \(oneLine(error))")
                        return true
                    }
                    if let problem = entry.problem(storedAt: stored) { add(Self.entriesName, String(token), problem) }
                    if entry.transactionID < lastTransaction {
                        add(Self.entriesName, String(token), "transaction \(entry.transactionID) comes after transaction \(lastTransaction)")
                    }
                    lastTransaction = max(lastTransaction, entry.transactionID)
                    return true
                }
            }
            if expected <= last {
                add(Self.entriesName, nil, expected == last ? "token \(last) is missing" : "tokens \(expected)–\(last) are missing")
            }
            // Entries past the recorded token are the ordinary case: commits record their entries only.
            if let highest { last = max(last, highest) }
            if purged > last { add(Self.entriesName, nil, "purged through \(purged), past the last token \(last)") }
            if let consumersDatabase {
                try tx.rawScan(consumersDatabase) { keyBytes, value in
                    guard let name = try? String.decodeKey(keyBytes), !name.isEmpty, name.utf8.count <= 200 else {
                        add(Self.consumersName, hex(keyBytes), "not a consumer name (1 to 200 bytes of UTF-8)")
                        return true
                    }
                    let record: ConsumerRecord
                    do {
                        record = try CBORDecoder().decode(ConsumerRecord.self, from: Array(value))
                    } catch {
                        add(Self.consumersName, KVStoreError.quote(name), "the consumer record does not decode: \(oneLine(error))")
                        return true
                    }
                    if UInt128(record.token.rawValue) > last {
                        add(Self.consumersName, KVStoreError.quote(name),
                            "the consumer is at token \(record.token), past the last token \(last)")
                    }
                    return true
                }
            }
            return problems
        }
    }
}

extension HistoryEntry {
    /// The first thing SyncKit would never have written in an entry stored at `token`, or `nil`: a
    /// token other than its key, a kind other than `collection` or `defaults`, or a name that is not a
    /// collection or suite name, or a timestamp that is not a finite time.
    func problem(storedAt token: UInt64) -> String? {
        if self.token.rawValue != token { return "the entry says it is token \(self.token)" }
        if CatalogEntry.Kind(rawValue: kind) == nil { return "unknown kind \(KVStoreError.quote(kind))" }
        if !CatalogEntry.isValidName(name) { return "\(KVStoreError.quote(name)) is not a \(kind) name" }
        if !timestamp.timeIntervalSince1970.isFinite { return "the timestamp is not a finite time" }
        return nil
    }
}

/// An error as one line.
private func oneLine(_ error: any Error) -> String {
    "\(error)".singleLine
}

/// Bytes as `0x…` hex, at most 64 bytes of them.
private func hex(_ bytes: UnsafeRawBufferPointer) -> String {
    let shown = Hex.encode(bytes.prefix(64))
    return "0x" + shown + (bytes.count > 64 ? "… (\(bytes.count) bytes)" : "")
}
