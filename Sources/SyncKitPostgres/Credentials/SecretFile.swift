#if PostgreSQL
import Foundation
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// A file that holds a secret: a database URL with its password (`--database-url-file`), a device
/// token (`--token-file`), a gateway login's password, a JWT signing secret, a TLS private key. It is
/// read only when no other user can read it, as `ssh` reads a private key and libpq a client key.
///
/// The rule is libpq's for `sslkey` (and PostgreSQL's for its server key): a file owned by this user
/// must give the group and others no access at all (`chmod 600`, or 400); a file owned by root may
/// let its group read it (`chmod 640` with `root:GROUP`, as Debian's `ssl-cert` group and a
/// Kubernetes secret mounted with an `fsGroup` have it); a file owned by anybody else is refused. A
/// secret others can read was given to them: refusing it is the only way to say so that is not
/// ignored, and a warning on a gateway's standard error is read by no one. The file may be reached
/// through links (a Kubernetes secret is a link into its `..data` directory): what is checked is the
/// file opened, from its own descriptor, so that nothing can be swapped in between.
package enum SecretFile {
    /// Why a secret file is not read: it cannot be opened (``notFound``), or its owner or mode let
    /// others read it, or it is not one line of text of at most the size asked for.
    package struct Refusal: Error, CustomStringConvertible {
        package enum Kind: Sendable { case notFound, unsafe, badContents }
        package let kind: Kind
        package let description: String
    }

    /// The bytes of the secret file at `path` (`what` names it in messages: "token", "TLS key").
    ///
    /// - Throws: ``Refusal``: `.notFound` when it cannot be opened or read; `.unsafe` when it is a
    ///   directory, or its owner or mode let another user read it; `.badContents` when it is longer
    ///   than `maxBytes`.
    package static func read(_ path: String, what: String, maxBytes: Int = 64 << 10) throws(Refusal) -> [UInt8] {
        // O_NONBLOCK: a FIFO at the path (planted, or a pipe) must not hang the process waiting for a
        // writer, nor a device or a leased file hold it in open(); what was opened is checked to be a
        // regular file before anything is read, and only then is O_NONBLOCK cleared.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            var st = stat()
            if (code == ENXIO || code == ENODEV) && stat(path, &st) == 0 && st.st_mode & S_IFMT != S_IFREG {
                throw Refusal(kind: .unsafe, description: "the \(what) file \(path) is \(ContainerFile.kind(st)), not a regular file")
            }
            if code == EWOULDBLOCK {
                throw Refusal(kind: .unsafe, description: "the \(what) file \(path) is leased by another process (F_SETLEASE); it is not waited for")
            }
            throw Refusal(kind: .notFound, description: "cannot read the \(what) file \(path): \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw Refusal(kind: .notFound, description: "cannot read the \(what) file \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT != S_IFDIR else {
            throw Refusal(kind: .unsafe, description: "the \(what) file \(path) is a directory")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw Refusal(kind: .unsafe, description: "the \(what) file \(path) is \(ContainerFile.kind(info)), not a regular file")
        }
        let status = fcntl(fd, F_GETFL)
        guard status >= 0, fcntl(fd, F_SETFL, status & ~O_NONBLOCK) == 0 else {
            throw Refusal(kind: .notFound, description: "cannot read the \(what) file \(path): \(String(cString: strerror(errno)))")
        }
        if let problem = problem(owner: info.st_uid, mode: info.st_mode, user: geteuid()) {
            throw Refusal(kind: .unsafe, description: "the \(what) file \(path) \(problem.reason), and a secret must be readable by its owner "
                          + "only (or, owned by root, by its group too); it is not read: \(problem.fix) \(path)")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw Refusal(kind: .notFound, description: "cannot read the \(what) file \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
            guard bytes.count <= maxBytes else {
                throw Refusal(kind: .badContents, description: "the \(what) file \(path) is longer than \(maxBytes / 1024) KiB")
            }
        }
        return bytes
    }

    /// Why a file owned by `owner` with `mode` is not fit to hold a secret of `user`'s, and the command
    /// (without the path) that makes it fit; `nil` when it is.
    package static func problem(owner: uid_t, mode: mode_t, user: uid_t) -> (reason: String, fix: String)? {
        let permissions = mode & 0o777
        let shown = String(permissions, radix: 8)
        if owner == user {
            guard permissions & 0o077 == 0 else {
                return ("can be read or changed by its group or others (mode \(shown))", "chmod 600")
            }
        } else if owner == 0 {
            guard permissions & 0o037 == 0 else {
                return ("is root's and can be read or changed by others, or changed by its group (mode \(shown))", "chmod 640")
            }
        } else {
            return ("belongs to uid \(owner), neither this user (uid \(user)) nor root", "chown \(user)")
        }
        return nil
    }

    /// The one line of text the secret file at `path` holds (a token, a URL, a password), its trailing
    /// newline dropped.
    ///
    /// - Throws: ``Refusal``, as ``read(_:what:maxBytes:)``, and `.badContents` when it is not one
    ///   non-empty line of UTF-8.
    package static func line(_ path: String, what: String) throws(Refusal) -> String {
        let bytes = try read(path, what: what)
        guard var text = String(validating: bytes, as: UTF8.self) else {
            throw Refusal(kind: .badContents, description: "the \(what) file \(path) is not UTF-8 text")
        }
        while text.last == "\n" || text.last == "\r" || text.last == "\r\n" { text.removeLast() }
        guard !text.isEmpty, !text.contains("\n"), !text.contains("\r") else {
            throw Refusal(kind: .badContents, description: "the \(what) file \(path) must hold one line")
        }
        return text
    }
}
#endif
