#if PostgreSQL
import Foundation
import SyncKitPostgres
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Which secret files are read (issue 46): libpq's rule for a client key, as `ssh`'s for a private key.
/// Every owner and mode here, including root's and another user's, which a test running as one user
/// cannot make; the commands' refusals of real files are in GatewayAdversarialTests.TransportAttacks.
@Suite struct SecretFileTests {
    @Test func aSecretFileIsReadOnlyWhenNoOtherUserCanReadOrChangeIt() throws {
        let user: uid_t = 1000
        // This user's: no access for the group or others at all.
        for mode: mode_t in [0o600, 0o400, 0o700, 0o200] { #expect(SecretFile.problem(owner: user, mode: S_IFREG | mode, user: user) == nil, "\(mode)") }
        for mode: mode_t in [0o640, 0o604, 0o644, 0o660, 0o602, 0o620, 0o610, 0o601] {
            let problem = SecretFile.problem(owner: user, mode: S_IFREG | mode, user: user)
            #expect(problem?.reason == "can be read or changed by its group or others (mode \(String(mode, radix: 8)))" && problem?.fix == "chmod 600",
                    "\(mode)")
        }
        // Root's: its group may read it (Debian's ssl-cert group, a Kubernetes secret with an fsGroup), nothing more.
        for mode: mode_t in [0o600, 0o640, 0o440, 0o400] { #expect(SecretFile.problem(owner: 0, mode: S_IFREG | mode, user: user) == nil, "\(mode)") }
        for mode: mode_t in [0o644, 0o444, 0o660, 0o650, 0o604] {
            #expect(SecretFile.problem(owner: 0, mode: S_IFREG | mode, user: user)?.fix == "chmod 640", "\(mode)")
        }
        // Anybody else's: refused whatever its mode.
        #expect(SecretFile.problem(owner: 1001, mode: S_IFREG | 0o600, user: user)?.reason == "belongs to uid 1001, neither this user (uid 1000) nor root")
        // Root reading its own file: the owner's rule.
        #expect(SecretFile.problem(owner: 0, mode: S_IFREG | 0o640, user: 0)?.fix == "chmod 600")
    }

    @Test func aSecretFileHoldsOneLineOfTextAndLinksToItAreFollowed() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/token"
        try writeSecretFile(path, "kvs1_token\r\n")
        #expect(try SecretFile.line(path, what: "token") == "kvs1_token")
        // A Kubernetes secret is a link into its ..data directory: followed, and the file it reaches checked.
        #expect(symlink(path, directory.path + "/link") == 0)
        #expect(try SecretFile.line(directory.path + "/link", what: "token") == "kvs1_token")
        #expect(chmod(path, 0o644) == 0)
        #expect(throws: SecretFile.Refusal.self) { try SecretFile.line(directory.path + "/link", what: "token") }
        #expect(chmod(path, 0o600) == 0)
        try writeSecretFile(path, "two\nlines\n")
        #expect { try SecretFile.line(path, what: "token") } throws: { ($0 as? SecretFile.Refusal)?.description == "the token file \(path) must hold one line" }
        #expect { try SecretFile.line(directory.path + "/missing", what: "token") } throws: {
            ($0 as? SecretFile.Refusal)?.kind == .notFound
        }
        #expect { try SecretFile.read(directory.path, what: "token") } throws: {
            ($0 as? SecretFile.Refusal)?.description == "the token file \(directory.path) is a directory"
        }
    }
}
#endif
