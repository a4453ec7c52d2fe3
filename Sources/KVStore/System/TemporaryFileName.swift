#if canImport(Glibc)
import Glibc
#endif

/// The one naming scheme of the temporary files every publisher writes before renaming them into
/// place: ``SharedFiles``' atomic writes, snapshots, widget feeds, manifests and `kvtool compact`.
///
/// `.kvtmp-<target>-<pid>-<16 hex digits>`, where `<target>` is the name the file will get (left
/// empty when it is longer than 200 bytes, so that the whole stays within `NAME_MAX`):
///
/// ```swift
/// TemporaryFileName.make(for: "today.feed")           // ".kvtmp-today.feed-4242-9f0c1d2e3f405162"
/// TemporaryFileName.parse(".kvtmp-today.feed-4242-9f0c1d2e3f405162")  // ("today.feed", 4242)
/// ```
///
/// The prefix is reserved: ``SharedFiles`` refuses it in every path a caller gives, and leaves such
/// files out of its listings, so a temporary file never collides with a real one. The process ID is
/// what lets a sweeper tell a file still being written (its process is alive) from an orphan.
package enum TemporaryFileName {
    /// What every temporary name starts with.
    package static let prefix = ".kvtmp-"
    /// The longest target a name carries.
    static let maxTarget = 200

    /// A fresh temporary name for `target`, carrying this process's ID.
    package static func make(for target: String, pid: Int32 = getpid()) -> String {
        var generator = SystemRandomNumberGenerator()
        let random: UInt64 = generator.next()
        let digits = String(random, radix: 16)
        let carried = target.utf8.count <= maxTarget ? target : ""
        return prefix + carried + "-" + String(pid) + "-" + String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// What a temporary name tells: the target (possibly empty) and the writer's process ID, which is
    /// `nil` for a name of the older `.kvtmp-<16 hex digits>` form. `nil` if `name` is not temporary.
    package static func parse(_ name: String) -> (target: String, pid: Int32?)? {
        let bytes = Array(name.utf8)
        let head = Array(prefix.utf8)
        guard bytes.starts(with: head) else { return nil }
        let rest = bytes[head.count...]
        let fields = rest.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        let isHex16 = { (field: ArraySlice<UInt8>) in field.count == 16 && field.allSatisfy { Hex.value($0) != nil } }
        guard let last = fields.last, isHex16(last) else { return ("", nil) }
        guard fields.count >= 3, let pid = Int32(String(decoding: fields[fields.count - 2], as: UTF8.self)), pid > 0 else {
            return ("", nil)
        }
        let target = fields.dropLast(2).map { String(decoding: $0, as: UTF8.self) }.joined(separator: "-")
        return (target, pid)
    }
}
