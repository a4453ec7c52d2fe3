import KVStore

extension History {
    /// Checks, in one read transaction, that history is whole: its entries are exactly the tokens
    /// after the purge point up to the last token, with no gap and no duplicate; each entry decodes
    /// and carries its own token; transaction IDs never go back; and no consumer is ahead of the last
    /// token. Call it outside every transaction.
    public func checkIntegrity(maxProblems: Int = 1_000) throws -> [IntegrityProblem] {
        guard let database = try store.rawDatabase(named: entries.databaseName) else { return [] }
        let location = Self.entriesName
        return try store.read { tx in
            var problems: [IntegrityProblem] = []
            func add(_ key: String?, _ detail: String) {
                if problems.count < maxProblems {
                    problems.append(IntegrityProblem(kind: .history, location: location, key: key, detail: detail))
                }
            }
            let last = try currentToken(in: tx).rawValue
            let purged = try state.get(Self.purgedThroughKey, in: tx) ?? 0
            if purged > last { add(nil, "purged through \(purged), past the last token \(last)") }
            var expected = purged + 1
            var lastTransaction = 0
            try tx.rawScan(database) { keyBytes, value in
                guard let token = try? UInt64.decodeKey(keyBytes) else {
                    add(hex(keyBytes), "the key is not a token")
                    return true
                }
                if token > expected {
                    add(String(token), expected == token - 1 ? "token \(expected) is missing"
                                                             : "tokens \(expected)–\(token - 1) are missing")
                } else if token < expected {
                    add(String(token), "an entry at or below the purge point \(purged)")
                }
                expected = max(expected, token + 1)
                guard let entry = try? CBORDecoder().decode(HistoryEntry.self, from: Array(value)) else {
                    add(String(token), "the entry does not decode")
                    return true
                }
                if entry.token.rawValue != token { add(String(token), "the entry says it is token \(entry.token)") }
                if entry.transactionID < lastTransaction {
                    add(String(token), "transaction \(entry.transactionID) comes after transaction \(lastTransaction)")
                }
                lastTransaction = max(lastTransaction, entry.transactionID)
                return true
            }
            if expected <= last {
                add(nil, expected == last ? "token \(last) is missing" : "tokens \(expected)–\(last) are missing")
            } else if expected > last + 1 {
                add(nil, "entries go past the last token \(last), up to \(expected - 1)")
            }
            try consumerRecords.forEach(in: tx) { name, record in
                if record.token.rawValue > last {
                    problems.append(IntegrityProblem(kind: .history, location: Self.consumersName, key: name,
                                                     detail: "the consumer is at token \(record.token), past the last token \(last)"))
                }
                return true
            }
            return problems
        }
    }
}

private func hex(_ bytes: UnsafeRawBufferPointer) -> String {
    "0x" + bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}
