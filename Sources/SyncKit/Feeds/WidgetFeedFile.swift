#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The on-disk format of a widget feed: a 64-byte header, then the payload (CBOR).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 6 | magic `KVFEED` |
/// | 6 | 2 | format version, big-endian (1) |
/// | 8 | 8 | generation, big-endian |
/// | 16 | 8 | payload length in bytes, big-endian |
/// | 24 | 8 | publication time, microseconds since 1970, big-endian two's complement |
/// | 32 | 32 | SHA-256 of bytes 0..<32 followed by the payload |
/// | 64 | n | payload |
///
/// The checksum covers the header fields as well as the payload, so a flipped generation is caught
/// just like a flipped payload byte; the length must match the file exactly, so a truncated or
/// extended file is caught before hashing.
enum WidgetFeedFile {
    static let magic: [UInt8] = Array("KVFEED".utf8)
    static let formatVersion: UInt16 = 1
    static let headerSize = 64

    struct Parsed {
        var generation: UInt64
        var publishedAt: Date
        var payload: ArraySlice<UInt8>
    }

    /// Header and payload, ready to write.
    static func encode(generation: UInt64, publishedAt: Date, payload: [UInt8]) -> [UInt8] {
        var bytes = magic
        append(UInt64(formatVersion), width: 2, to: &bytes)
        append(generation, width: 8, to: &bytes)
        append(UInt64(payload.count), width: 8, to: &bytes)
        // Clamped: a time beyond ±292,000 years (or not finite) must not trap the conversion.
        let exact = (publishedAt.timeIntervalSince1970 * 1_000_000).rounded(.down)
        let micros: Int64 = exact.isNaN ? 0 : exact >= 0x1p63 ? .max : exact < -0x1p63 ? .min : Int64(exact)
        append(UInt64(bitPattern: micros), width: 8, to: &bytes)
        var hasher = SHA256()
        hasher.update(bytes)
        hasher.update(payload)
        bytes += hasher.finalize()
        bytes += payload
        return bytes
    }

    /// Checks everything and returns the fields; throws ``WidgetFeedError`` naming the first problem.
    static func decode(_ bytes: [UInt8], path: String) throws -> Parsed {
        guard bytes.count >= headerSize else {
            throw WidgetFeedError.corrupt(path: path, reason: "the file is \(bytes.count) bytes, shorter than the \(headerSize)-byte header")
        }
        guard Array(bytes[0..<6]) == magic else {
            throw WidgetFeedError.corrupt(path: path, reason: "it does not start with the feed magic 'KVFEED'")
        }
        let version = read(bytes, at: 6, width: 2)
        guard version == UInt64(formatVersion) else {
            if version > UInt64(formatVersion) {
                throw WidgetFeedError.unsupportedVersion(path: path, version: Int(version), supported: Int(formatVersion))
            }
            throw WidgetFeedError.corrupt(path: path, reason: "format version \(version) is not a version")
        }
        let length = read(bytes, at: 16, width: 8)
        let actual = UInt64(bytes.count - headerSize)
        guard length == actual else {
            throw WidgetFeedError.corrupt(path: path, reason: "the header announces a \(length)-byte payload, the file holds \(actual) bytes after the header")
        }
        var hasher = SHA256()
        bytes.withUnsafeBytes { all in
            hasher.update(UnsafeRawBufferPointer(rebasing: all[0..<32]))
            hasher.update(UnsafeRawBufferPointer(rebasing: all[headerSize...]))
        }
        guard hasher.finalize()[...] == bytes[32..<64] else {
            throw WidgetFeedError.corrupt(path: path, reason: "checksum mismatch (SHA-256 of header and payload)")
        }
        let micros = Int64(bitPattern: read(bytes, at: 24, width: 8))
        return Parsed(generation: read(bytes, at: 8, width: 8),
                      publishedAt: Date(timeIntervalSince1970: Double(micros) / 1_000_000),
                      payload: bytes[headerSize...])
    }

    private static func append(_ value: UInt64, width: Int, to bytes: inout [UInt8]) {
        for i in (0..<width).reversed() { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(8 * i))) }
    }

    private static func read(_ bytes: [UInt8], at offset: Int, width: Int) -> UInt64 {
        bytes[offset..<(offset + width)].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
