#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Lexical validation of relative paths and `openat`-based directory walking that never follows a
/// symbolic link. Internal to ``SharedFiles`` (and reused by ``GroupIdentifier`` for look-alikes).
enum SafePath {
    /// Names starting with this are temporary files (``TemporaryFileName``); callers cannot use them.
    static let temporaryPrefix = TemporaryFileName.prefix
    /// The longest relative path accepted, in UTF-8 bytes.
    static let maxPathBytes = 1024
    /// The longest component accepted, in UTF-8 bytes (`NAME_MAX`).
    static let maxComponentBytes = 255

    // MARK: - Validation

    /// Splits `path` into components after checking every rule, or throws
    /// ``KVStoreError/invalidPath(_:reason:)``.
    static func components(of path: String) throws(KVStoreError) -> [String] {
        if let reason = pathProblem(path) {
            throw .invalidPath(path, reason: reason)
        }
        return split(path)
    }

    /// `path` cut at each `/` byte, as the kernel cuts it.
    ///
    /// Never split or compare paths by `Character`: a `/` followed by a combining mark (`"/\u{301}"`)
    /// is one `Character`, so `split(separator: "/")`, `hasPrefix("/")` and `contains("/")` do not
    /// see that slash, while `openat` does. Cutting valid UTF-8 at an ASCII byte always leaves valid
    /// UTF-8, so each piece converts back exactly.
    static func split(_ path: String, omittingEmptySubsequences: Bool = false) -> [String] {
        path.utf8.split(separator: slash, omittingEmptySubsequences: omittingEmptySubsequences)
            .map { String(decoding: $0, as: UTF8.self) }
    }

    static let slash = UInt8(ascii: "/")
    static let backslash = UInt8(ascii: "\\")

    /// Why `path` is not an acceptable relative path, or `nil` when it is.
    static func pathProblem(_ path: String) -> String? {
        if path.isEmpty { return "the path is empty" }
        if path.utf8.contains(0) { return "contains a NUL character" }
        let bytes = path.utf8.count
        if bytes > maxPathBytes {
            return "the path is \(bytes) bytes, over the \(maxPathBytes)-byte limit"
        }
        if path.utf8.first == slash {
            return "is absolute; give a path relative to the shared directory"
        }
        if path.utf8.contains(backslash) {
            return "contains a backslash; separate components with '/'"
        }
        if let control = path.unicodeScalars.first(where: isControl) {
            return "contains control character U+\(hex(control))"
        }
        let parts = split(path)
        for (index, part) in parts.enumerated() {
            if part.isEmpty {
                return index == parts.count - 1 ? "ends with '/'" : "has an empty component ('//')"
            }
            if let reason = componentProblem(part) { return reason }
        }
        return nil
    }

    /// Why one component (already free of `/`, `\`, NUL and control characters) is unacceptable.
    /// Compares bytes, not `Character`s (see ``split(_:omittingEmptySubsequences:)``).
    static func componentProblem(_ name: String) -> String? {
        if name.isEmpty { return "has an empty component" }
        if name.utf8.elementsEqual(".".utf8) { return "has a '.' component" }
        if name.utf8.elementsEqual("..".utf8) { return "has a '..' component (parent-directory traversal)" }
        let bytes = name.utf8.count
        if bytes > maxComponentBytes {
            return "component '\(name.prefix(24))…' is \(bytes) bytes, over the \(maxComponentBytes)-byte limit"
        }
        for scalar in name.unicodeScalars where !scalar.isASCII {
            if let ascii = tableLookAlike(of: scalar), ascii == "/" || ascii == "\\" {
                return "component '\(name)' contains U+\(hex(scalar)), a look-alike of '\(ascii)'"
            }
        }
        let normalized = CompatibilityFold.fold(name)
        if normalized.utf8.elementsEqual(".".utf8) || normalized.utf8.elementsEqual("..".utf8) {
            return "component '\(name)' normalises (NFKC) to '\(normalized)'"
        }
        if normalized.utf8.contains(slash) || normalized.utf8.contains(backslash) {
            return "component '\(name)' contains a character that normalises (NFKC) to a path separator"
        }
        if normalized.unicodeScalars.contains(where: { isControl($0) || $0 == "\u{0}" }) {
            return "component '\(name)' normalises (NFKC) to a control character"
        }
        if isTemporaryName(name) || isTemporaryName(normalized) {
            return "component '\(name)' starts with '\(temporaryPrefix)', which is reserved for temporary files"
        }
        return nil
    }

    /// Whether `name` starts with the bytes of ``temporaryPrefix``.
    static func isTemporaryName(_ name: String) -> Bool {
        name.utf8.starts(with: temporaryPrefix.utf8)
    }

    /// Whether a directory entry's name can be addressed through the public API (used by `list`).
    static func isAddressable(_ name: String) -> Bool {
        !name.isEmpty && !name.utf8.contains(slash) && !name.utf8.contains(backslash)
            && !name.unicodeScalars.contains(where: isControl) && componentProblem(name) == nil
    }

    /// The ASCII character a non-ASCII scalar is easily mistaken for: `/`, `\` or `.` from a table
    /// of look-alikes that NFKC leaves alone (such as U+2215 DIVISION SLASH), otherwise the scalar's
    /// NFKC form when that is one printable ASCII character (such as U+FF0E FULLWIDTH FULL STOP).
    static func lookAlike(of scalar: Unicode.Scalar) -> Character? {
        if let ascii = tableLookAlike(of: scalar) { return ascii }
        guard !scalar.isASCII else { return nil }
        guard let normalized = CompatibilityFold.form(of: scalar),
              normalized.unicodeScalars.count == 1, let only = normalized.unicodeScalars.first,
              only.isASCII, only.value >= 0x21, only.value < 0x7F
        else { return nil }
        return Character(only)
    }

    /// Look-alikes of `/`, `\` and `.` that NFKC does not map to them.
    static func tableLookAlike(of scalar: Unicode.Scalar) -> Character? {
        switch scalar.value {
        case 0x2215, 0x2044, 0x29F8, 0x2571, 0x27CB, 0x1735, 0x0337, 0x0338:
            return "/"
        case 0x2216, 0x29F5, 0x29F9, 0x2572, 0x27CD, 0x20E5:
            return "\\"
        case 0x2024, 0x2E33, 0x00B7, 0x2219, 0x22C5, 0x0701, 0x0702, 0xA4F8:
            return "."
        default:
            return nil
        }
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F
    }

    static func hex(_ scalar: Unicode.Scalar) -> String {
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// `directory/relative`, for error messages.
    static func join(_ directory: String, _ relative: some StringProtocol) -> String {
        if relative.isEmpty { return directory }
        return directory.utf8.last == slash ? directory + relative : directory + "/" + relative
    }
}

// MARK: - File-system walking

extension SafePath {
    /// Flags for every directory opened while walking: no following of symbolic links.
    static let directoryFlags: Int32 = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC

    /// `fstatat(fd, name, AT_SYMLINK_NOFOLLOW)`; `nil` with `errno` set on failure.
    static func lstat(at fd: Int32, _ name: String) -> stat? {
        var st = stat()
        let rc = SystemCall.retry { fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) }
        return rc == 0 ? st : nil
    }

    static func isType(_ st: stat, _ type: mode_t) -> Bool { st.st_mode & S_IFMT == type }

    /// Opens the shared directory itself, refusing a symbolic link. The caller closes the result.
    static func openRoot(_ directory: String, what: String = "shared directory") throws(KVStoreError) -> Int32 {
        let fd = SystemCall.retry { open(directory, directoryFlags) }
        if fd >= 0 { return fd }
        let code = errno
        if code == ELOOP || code == ENOTDIR {
            var st = stat()
            if Glibc.lstat(directory, &st) == 0, isType(st, S_IFLNK) {
                throw .invalidPath(directory, reason: "the \(what) is a symbolic link")
            }
        }
        throw .io(operation: "open \(what)", path: directory, errno: code)
    }

    /// Opens `components` one at a time below `start` with `O_NOFOLLOW`, and returns the fd of the
    /// last one. Takes ownership of `start` (it is closed, as are all intermediate fds, even on
    /// failure); the caller closes the result.
    ///
    /// - Parameters:
    ///   - createMode: When not `nil`, missing directories are created with `mkdirat` and given this
    ///     mode with `fchmod`; otherwise a missing one throws ``KVStoreError/fileNotFound(path:)``.
    ///   - path: The relative path being worked on, for errors.
    ///   - directory: The shared directory, for `io` errors.
    static func walk(
        from start: Int32, through components: ArraySlice<String>, createMode: mode_t?,
        path: String, directory: String
    ) throws(KVStoreError) -> Int32 {
        var current = start
        var walked = ""
        for name in components {
            walked = walked.isEmpty ? name : walked + "/" + name
            var next = SystemCall.retry { openat(current, name, directoryFlags) }
            if next < 0, errno == ENOENT, let createMode {
                let made = SystemCall.retry { mkdirat(current, name, 0o700) }
                if made != 0 && errno != EEXIST {
                    let code = errno
                    close(current)
                    throw .io(operation: "create directory", path: join(directory, walked), errno: code)
                }
                next = SystemCall.retry { openat(current, name, directoryFlags) }
                if next >= 0 && made == 0 {
                    if SystemCall.retry({ fchmod(next, createMode) }) != 0 {
                        let code = errno
                        close(next)
                        close(current)
                        throw .io(operation: "chmod directory", path: join(directory, walked), errno: code)
                    }
                    syncDirectory(current)  // make the new entry durable; best effort
                }
            }
            if next < 0 {
                let code = errno
                let error = walkError(code, parent: current, name: name, walked: walked, path: path, directory: directory)
                close(current)
                throw error
            }
            close(current)
            current = next
        }
        return current
    }

    /// Turns a failed `openat(… O_DIRECTORY|O_NOFOLLOW)` into the error the caller sees.
    private static func walkError(
        _ code: Int32, parent: Int32, name: String, walked: String, path: String, directory: String
    ) -> KVStoreError {
        switch code {
        case ENOENT:
            return .fileNotFound(path: path)
        case ELOOP, ENOTDIR:
            if let st = lstat(at: parent, name), isType(st, S_IFLNK) {
                return .invalidPath(path, reason: "'\(walked)' is a symbolic link")
            }
            return .io(operation: "open directory", path: join(directory, walked), errno: code)
        default:
            return .io(operation: "open directory", path: join(directory, walked), errno: code)
        }
    }

    /// `fsync` on a directory fd, ignoring file systems that do not support it. Returns the errno
    /// of a real failure, or 0.
    @discardableResult
    static func syncDirectory(_ fd: Int32) -> Int32 {
        if SystemCall.retry({ fsync(fd) }) == 0 { return 0 }
        let code = errno
        return code == EINVAL || code == ENOTSUP ? 0 : code
    }

    /// One directory entry, `lstat`ed.
    struct Entry {
        var name: String
        var status: stat
        var isRegularFile: Bool { SafePath.isType(status, S_IFREG) }
        var isDirectory: Bool { SafePath.isType(status, S_IFDIR) }
    }

    /// Reads every entry of the directory open at `fd` (borrowed, not closed) except `.` and `..`.
    /// Names that are not valid UTF-8 are skipped, as are entries that vanish while reading.
    static func entries(of fd: Int32, displayPath: String) throws(KVStoreError) -> [Entry] {
        // A fresh open file description, so that the stream's offset is independent of `fd`.
        let streamFD = SystemCall.retry { openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if streamFD < 0 {
            throw .io(operation: "open directory", path: displayPath, errno: errno)
        }
        guard let stream = fdopendir(streamFD) else {
            let code = errno
            close(streamFD)
            throw .io(operation: "open directory", path: displayPath, errno: code)
        }
        defer { closedir(stream) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 {
                    throw .io(operation: "read directory", path: displayPath, errno: errno)
                }
                break
            }
            let name: String? = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let bytes = raw.prefix { $0 != 0 }
                return String(validating: bytes, as: UTF8.self)
            }
            guard let name, name != ".", name != ".." else { continue }
            names.append(name)
        }
        var result: [Entry] = []
        result.reserveCapacity(names.count)
        for name in names {
            guard let st = lstat(at: fd, name) else { continue }
            result.append(Entry(name: name, status: st))
        }
        return result
    }
}
