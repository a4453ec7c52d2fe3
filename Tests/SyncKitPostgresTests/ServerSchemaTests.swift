#if PostgreSQL
@testable import SyncKitPostgres
import Testing
import TestSupport

/// The server schema's bookkeeping, checked without a server.
@Suite struct ServerSchemaTests {
    /// FNV-1a, 64 bits, of the text's UTF-8: stable across platforms and releases (Swift's
    /// `hashValue` is seeded per process).
    static func fingerprint(_ text: String) -> UInt64 {
        text.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    /// Each revision of `kvsync_push` with the fingerprint of its definition's text (with the gateway's
    /// scope checks, as migrations and ``ServerSchema/replacePush`` write it).
    ///
    /// A server replaces its function only when the revision marked in it is not this library's
    /// (``ServerSchema/pushIsCurrent(_:logger:)``), so a change to the function's text that keeps the
    /// revision would never reach the servers that already have it. This test fails on such a change.
    /// To update it after changing `kvsync_push` on purpose: bump ``ServerSchema/pushRevision`` (for
    /// example to `kvsync_push revision 4`), run this test, and add a row for the new revision with
    /// the fingerprint its failure prints. Keep the old rows: a fingerprint once pinned never changes.
    static let pinned: [String: UInt64] = [
        "kvsync_push revision 3": 0xf20b_7b7a_a458_2ff3,
        "kvsync_push revision 4": 0x9e2c_5ffd_2f6e_828e,
        "kvsync_push revision 5": 0xc6f5_095b_8906_2b66,
        "kvsync_push revision 6": 0xf936_7a1f_4c79_4407,
        "kvsync_push revision 7": 0x4611_abcb_531a_dbec,
        "kvsync_push revision 8": 0x8061_413d_65fd_ed62,
    ]

    @Test(.blockingWork) func thePushFunctionsTextChangesOnlyWithItsRevision() {
        let text = ServerSchema.pushFunction(scopeChecks: ServerSchema.scopeChecks)
        let fingerprint = Self.fingerprint(text)
        #expect(text.contains("-- \(ServerSchema.pushRevision)\n"))
        #expect(Self.pinned[ServerSchema.pushRevision] == fingerprint,
                "kvsync_push's text changed (fingerprint 0x\(String(fingerprint, radix: 16))) but its revision is still '\(ServerSchema.pushRevision)': bump ServerSchema.pushRevision and pin the new fingerprint here")
    }

    /// From revision 7 the push does not notify inside its transaction. The body `kvtool bench pushers`
    /// installs to compare (`wakeInside`) is this revision's with the notification inside, as up to
    /// revision 6: line for line the same but for that and its mark, which is never the revision's (a
    /// server left with it is not current, and the next device that migrates replaces it).
    @Test(.blockingWork) func theBenchsNotifyingBodyIsThisRevisionWithTheNotificationInside() {
        let inside = ServerSchema.pushFunction(scopeChecks: ServerSchema.scopeChecks, wakeInside: true)
        let after = ServerSchema.pushFunction(scopeChecks: ServerSchema.scopeChecks)
        #expect(inside.contains("pg_notify"))
        #expect(!after.contains("pg_notify"))
        #expect(!inside.contains(ServerSchema.pushRevision) && inside.contains("-- \(ServerSchema.notifyingInsideMark)\n"))
        let lines = { (text: String) in
            text.split(separator: "\n").filter { !$0.contains("pg_notify") && !$0.contains("-- kvsync_push ") }
        }
        #expect(lines(inside) == lines(after))
        #expect(inside.split(separator: "\n").count == after.split(separator: "\n").count + 2)
        // The server-authored writes keep notifying: their SQL callers send no wake-up after the commit.
        #expect(ServerSchema.backendWriteFunction.contains("pg_notify('kvsync', p_group)"))
    }

    /// The definition and the lookup name the same parameters, in order.
    @Test(.blockingWork) func thePushSignatureIsTheDefinitionsTypes() {
        let text = ServerSchema.pushFunction(scopeChecks: "")
        #expect(text.contains("CREATE OR REPLACE FUNCTION \(ServerSchema.pushDeclaration)\n"))
        #expect(ServerSchema.pushSignature == "kvsync_push(text, text, bigint[], text[], text[], bytea[], bytea[], boolean[], bigint[], bigint[], bigint)")
        #expect(ServerSchema.pushDeclaration.hasPrefix("kvsync_push(p_group text, p_device text, "))
    }

    /// The version is the number of migrations.
    @Test(.blockingWork) func theVersionCountsTheMigrations() {
        #expect(ServerSchema.version == ServerSchema.migrations.count)
        #expect(ServerSchema.version == 9)
    }
}
#endif
