internal import CLMDB

extension Environment {
    /// The slots of LMDB's reader table that a process holds, from `mdb_reader_list`.
    func readerSlots() throws -> [ReaderSlot] {
        final class Lines { var text = "" }
        let lines = Lines()
        let rc = withExtendedLifetime(lines) {
            mdb_reader_list(handle, { message, context in
                guard let message, let context else { return 0 }
                Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().text += String(cString: message)
                return 0
            }, Unmanaged.passUnretained(lines).toOpaque())
        }
        try LMDBError.check(rc)
        // "    pid     thread     txnid" then "%10d %zx %s" per slot, txnid "-" when idle.
        return lines.text.split(separator: "\n").compactMap { line -> ReaderSlot? in
            let fields = line.split(separator: " ")
            guard fields.count == 3, let pid = Int32(fields[0]), let thread = UInt64(fields[1], radix: 16) else {
                return nil
            }
                        return ReaderSlot(pid: pid, thread: thread, transactionID: fields[2] == "-" ? nil : Int(fields[2]),
                              processAlive: SystemCall.isProcessAlive(pid))
        }
    }
}
