#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Finds the directory under which every App Group container lives (`<root>/<group identifier>/`).
///
/// Thread safety: stateless; call from any thread.
public enum ContainerRoot {
    /// The environment variable that overrides the default root.
    public static let environmentVariable = "KVSTORE_ROOT"

    /// Returns the container root as an absolute, lexically normalised path (no `.` or `..`
    /// components, no repeated or trailing `/`).
    ///
    /// The first of these that is set and not empty wins:
    /// 1. `explicit`;
    /// 2. `$KVSTORE_ROOT`;
    /// 3. `$XDG_DATA_HOME/kvstore` — only when `XDG_DATA_HOME` is absolute, as the XDG Base
    ///    Directory specification requires (a relative value is ignored);
    /// 4. `$HOME/.local/share/kvstore` — only when `HOME` is absolute.
    ///
    /// A relative `explicit` or `KVSTORE_ROOT` is resolved against the current directory.
    /// Normalisation is lexical: symbolic links are not resolved, and nothing is created or checked
    /// on disk.
    ///
    /// ```swift
    /// let root = try ContainerRoot.resolve(explicit: nil)
    /// // "/home/me/.local/share/kvstore" unless KVSTORE_ROOT or XDG_DATA_HOME say otherwise
    /// let custom = try ContainerRoot.resolve(explicit: "data/../groups", environment: [:])
    /// // "<current directory>/groups"
    /// ```
    ///
    /// - Parameters:
    ///   - explicit: A root given by the caller (for example a `--root` option), or `nil`.
    ///   - environment: The variables to consult.
    /// - Throws: ``KVStoreError/invalidPath(_:reason:)`` when the chosen root contains a NUL
    ///   character or when no candidate is set; ``KVStoreError/io(operation:path:errno:)`` when the
    ///   current directory is needed but cannot be determined.
    public static func resolve(explicit: String?, environment: [String: String]) throws -> String {
        try resolve(explicit: explicit, environment: environment, currentDirectory: nil)
    }

    /// ``resolve(explicit:environment:)`` with the process environment: only `KVSTORE_ROOT`,
    /// `XDG_DATA_HOME` and `HOME` are read (`getenv`), not a copy of the whole environment, which
    /// cost a cold widget 0.7M instructions.
    public static func resolve(explicit: String?) throws -> String {
        if let explicit, !explicit.isEmpty {
            return try resolve(explicit: explicit, environment: [:], currentDirectory: nil)
        }
        var environment: [String: String] = [:]
        for name in [environmentVariable, "XDG_DATA_HOME", "HOME"] {
            if let value = getenv(name) { environment[name] = String(decoding: UnsafeRawBufferPointer(start: value, count: strlen(value)), as: UTF8.self) }
        }
        return try resolve(explicit: nil, environment: environment, currentDirectory: nil)
    }

    /// ``resolve(explicit:environment:)`` with an injectable current directory (for tests).
    static func resolve(
        explicit: String?,
        environment: [String: String],
        currentDirectory: String?
    ) throws -> String {
        func nonEmpty(_ value: String?) -> String? {
            guard let value, !value.isEmpty else { return nil }
            return value
        }
        let chosen: String
        if let value = nonEmpty(explicit) {
            chosen = value
        } else if let value = nonEmpty(environment[environmentVariable]) {
            chosen = value
        } else if let value = nonEmpty(environment["XDG_DATA_HOME"]), value.utf8.first == SafePath.slash {
            chosen = value + "/kvstore"
        } else if let value = nonEmpty(environment["HOME"]), value.utf8.first == SafePath.slash {
            chosen = value + "/.local/share/kvstore"
        } else {
            throw KVStoreError.invalidPath(
                "",
                reason: "no container root: pass one explicitly or set \(environmentVariable), XDG_DATA_HOME or HOME"
            )
        }
        if chosen.utf8.contains(0) {
            throw KVStoreError.invalidPath(chosen, reason: "the container root contains a NUL character")
        }
        if chosen.utf8.first == SafePath.slash {
            return normalize(chosen)
        }
        // Only `explicit` and KVSTORE_ROOT can be relative: XDG_DATA_HOME and HOME were required to be
        // absolute above.
        let base = try currentDirectory ?? Self.currentDirectory(for: chosen)
        return normalize(base + "/" + chosen)
    }

    /// Lexically normalises an absolute path: drops empty and `.` components and lets `..` remove the
    /// preceding component (`..` at the root stays at the root).
    static func normalize(_ absolute: String) -> String {
        var parts: [String] = []
        // Byte-wise, as the kernel splits paths (see SafePath.split).
        for part in SafePath.split(absolute, omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(part)
            }
        }
        // Not `"/" + parts.joined(separator: "/")`: that `joined` is the standard library's unspecialised
        // generic one, whose first call costs a process 180,000 instructions of type look-ups.
        guard !parts.isEmpty else { return "/" }
        var path = ""
        for part in parts {
            path += "/"
            path += part
        }
        return path
    }

    private static func currentDirectory(for path: String) throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else {
            throw KVStoreError.io(operation: "getcwd (to resolve a relative root)", path: path, errno: errno)
        }
        let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard cwd.utf8.first == SafePath.slash else {
            // Linux returns "(unreachable)/…" when the current directory is outside the process root.
            throw KVStoreError.io(operation: "getcwd (to resolve a relative root)", path: path, errno: ENOENT)
        }
        return cwd
    }
}
