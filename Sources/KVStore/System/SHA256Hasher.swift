#if canImport(Glibc)
import Glibc
#endif

/// SHA-256 (FIPS 180-4), in plain Swift: the checksum of snapshot files and widget feeds, and the name
/// of a container's file in its manifest (``FileManifestEntry``). It lives in KVStore since issue 49, so
/// that a write of a file records its hash in the store's transaction; SyncKit calls it `SHA256`.
///
/// ```swift
/// let digest = SHA256Hasher.hash(Array("abc".utf8))
/// SHA256Hasher.hex(digest)  // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
///
/// var hasher = SHA256Hasher()
/// hasher.update(part1)
/// hasher.update(part2)
/// let same = hasher.finalize()
/// ```
///
/// Why SHA-256 rather than CRC-32C: a snapshot's digest in the manifest can be checked from a shell
/// with `sha256sum` and needs no agreement on a polynomial, reflection or seed; it detects any change
/// with overwhelming probability, not merely burst errors; and there is no crypto package to lean on
/// here, so one well-specified hash serves both snapshots and feeds. It is not used as a MAC: nothing
/// secret is involved, so it guards against accidents (torn writes, bit rot, truncation), not attackers
/// who can rewrite the manifest too.
///
/// A value type; each instance is used by one thread at a time.
public struct SHA256Hasher: Sendable {
    /// The digest length in bytes.
    public static let digestSize = 32
    /// The block length in bytes.
    public static let blockSize = 64

    private var h0: UInt32 = 0x6A09_E667, h1: UInt32 = 0xBB67_AE85, h2: UInt32 = 0x3C6E_F372, h3: UInt32 = 0xA54F_F53A
    private var h4: UInt32 = 0x510E_527F, h5: UInt32 = 0x9B05_688C, h6: UInt32 = 0x1F83_D9AB, h7: UInt32 = 0x5BE0_CD19
    /// Bytes of an incomplete block, waiting for more input.
    private var pending: [UInt8] = []
    /// Total message length in bytes so far.
    private var length: UInt64 = 0

    public init() {
        pending.reserveCapacity(Self.blockSize)
    }

    /// Adds bytes to the message.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var base = bytes.baseAddress, bytes.count > 0 else { return }
        var remaining = bytes.count
        length &+= UInt64(remaining)
        if !pending.isEmpty {
            let take = min(Self.blockSize - pending.count, remaining)
            pending.append(contentsOf: UnsafeRawBufferPointer(start: base, count: take))
            base += take
            remaining -= take
            if pending.count == Self.blockSize {
                let block = pending
                block.withUnsafeBytes { compress(blocks: $0.baseAddress!, count: 1) }
                pending.removeAll(keepingCapacity: true)
            }
        }
        let whole = remaining / Self.blockSize
        if whole > 0 {
            compress(blocks: base, count: whole)
            base += whole * Self.blockSize
            remaining -= whole * Self.blockSize
        }
        if remaining > 0 {
            pending.append(contentsOf: UnsafeRawBufferPointer(start: base, count: remaining))
        }
    }

    /// Adds bytes to the message.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Pads the message and returns the 32-byte digest. Call it once; the hasher is spent afterwards.
    public mutating func finalize() -> [UInt8] {
        let bitLength = length &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % Self.blockSize != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        tail.withUnsafeBytes { compress(blocks: $0.baseAddress!, count: tail.count / Self.blockSize) }
        pending.removeAll()
        var digest: [UInt8] = []
        digest.reserveCapacity(Self.digestSize)
        for word in [h0, h1, h2, h3, h4, h5, h6, h7] {
            digest.append(UInt8(truncatingIfNeeded: word >> 24))
            digest.append(UInt8(truncatingIfNeeded: word >> 16))
            digest.append(UInt8(truncatingIfNeeded: word >> 8))
            digest.append(UInt8(truncatingIfNeeded: word))
        }
        return digest
    }

    /// The digest of `bytes`.
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// Lower-case hexadecimal, as `sha256sum` prints it.
    public static func hex(_ digest: [UInt8]) -> String {
        Hex.encode(digest)
    }

    /// The digest of the regular file at `path`, read in 1 MiB chunks, and the number of bytes read.
    ///
    /// The file is opened with `O_NOFOLLOW`: a symbolic link is refused.
    ///
    /// - Throws: ``KVStoreError/fileNotFound(path:)`` if it does not exist,
    ///   ``KVStoreError/invalidPath(_:reason:)`` for a symbolic link or a file that is not regular,
    ///   ``KVStoreError/io(operation:path:errno:)`` if it cannot be read.
    public static func hash(fileAt path: String) throws -> (digest: [UInt8], size: Int) {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        if fd < 0 {
            let code = errno
            if code == ENOENT { throw KVStoreError.fileNotFound(path: path) }
            if code == ELOOP { throw KVStoreError.invalidPath(path, reason: "is a symbolic link") }
            throw KVStoreError.io(operation: "open", path: path, errno: code)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw KVStoreError.io(operation: "stat", path: path, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw KVStoreError.invalidPath(path, reason: "is not a regular file")
        }
        return try hash(descriptor: fd, path: path)
    }

    /// The digest of everything readable from `descriptor` from offset 0 (read with `pread`, so the
    /// descriptor's offset is untouched), and the number of bytes read.
    ///
    /// - Throws: ``KVStoreError/io(operation:path:errno:)`` if a read fails; `path` names the file.
    public static func hash(descriptor fd: Int32, path: String) throws -> (digest: [UInt8], size: Int) {
        var hasher = SHA256Hasher()
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        var offset = 0
        while true {
            let n = pread(fd, chunk.baseAddress, chunk.count, off_t(offset))
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw KVStoreError.io(operation: "read", path: path, errno: errno)
            }
            if n == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
            offset += n
        }
        return (hasher.finalize(), offset)
    }

    // MARK: - Compression function

    private static let k: [UInt32] = [
        0x428A_2F98, 0x7137_4491, 0xB5C0_FBCF, 0xE9B5_DBA5, 0x3956_C25B, 0x59F1_11F1, 0x923F_82A4, 0xAB1C_5ED5,
        0xD807_AA98, 0x1283_5B01, 0x2431_85BE, 0x550C_7DC3, 0x72BE_5D74, 0x80DE_B1FE, 0x9BDC_06A7, 0xC19B_F174,
        0xE49B_69C1, 0xEFBE_4786, 0x0FC1_9DC6, 0x240C_A1CC, 0x2DE9_2C6F, 0x4A74_84AA, 0x5CB0_A9DC, 0x76F9_88DA,
        0x983E_5152, 0xA831_C66D, 0xB003_27C8, 0xBF59_7FC7, 0xC6E0_0BF3, 0xD5A7_9147, 0x06CA_6351, 0x1429_2967,
        0x27B7_0A85, 0x2E1B_2138, 0x4D2C_6DFC, 0x5338_0D13, 0x650A_7354, 0x766A_0ABB, 0x81C2_C92E, 0x9272_2C85,
        0xA2BF_E8A1, 0xA81A_664B, 0xC24B_8B70, 0xC76C_51A3, 0xD192_E819, 0xD699_0624, 0xF40E_3585, 0x106A_A070,
        0x19A4_C116, 0x1E37_6C08, 0x2748_774C, 0x34B0_BCB5, 0x391C_0CB3, 0x4ED8_AA4A, 0x5B9C_CA4F, 0x682E_6FF3,
        0x748F_82EE, 0x78A5_636F, 0x84C8_7814, 0x8CC7_0208, 0x90BE_FFFA, 0xA450_6CEB, 0xBEF9_A3F7, 0xC671_78F2,
    ]

    /// Rotates right. Transparent, with masking shifts (`&>>`, `&<<`): inlined even in debug builds,
    /// where generic smart shifts (`>>`) and ordinary functions are real calls.
    @_transparent
    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x &>> n) | (x &<< (32 &- n)) }

    /// Runs the compression function over `count` consecutive 64-byte blocks at `blocks`.
    private mutating func compress(blocks: UnsafeRawPointer, count: Int) {
        Self.k.withUnsafeBufferPointer { kBuffer in
            let k = kBuffer.baseAddress!
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { wBuffer in
                let w = wBuffer.baseAddress!
                // `while` loops rather than ranges: no iterator calls in debug builds.
                var blockIndex = 0
                while blockIndex < count {
                    let block = blocks + blockIndex &* Self.blockSize
                    blockIndex &+= 1
                    var t = 0
                    while t < 16 {
                        w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t &* 4, as: UInt32.self))
                        t &+= 1
                    }
                    while t < 64 {
                        let x = w[t &- 15], y = w[t &- 2]
                        let s0 = Self.rotr(x, 7) ^ Self.rotr(x, 18) ^ (x &>> 3)
                        let s1 = Self.rotr(y, 17) ^ Self.rotr(y, 19) ^ (y &>> 10)
                        w[t] = w[t &- 16] &+ s0 &+ w[t &- 7] &+ s1
                        t &+= 1
                    }
                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    t = 0
                    while t < 64 {
                        let s1 = Self.rotr(e, 6) ^ Self.rotr(e, 11) ^ Self.rotr(e, 25)
                        let choice = (e & f) ^ (~e & g)
                        let t1 = h &+ s1 &+ choice &+ k[t] &+ w[t]
                        let s0 = Self.rotr(a, 2) ^ Self.rotr(a, 13) ^ Self.rotr(a, 22)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = s0 &+ majority
                        h = g; g = f; f = e; e = d &+ t1
                        d = c; c = b; b = a; a = t1 &+ t2
                        t &+= 1
                    }
                    h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d
                    h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= h
                }
            }
        }
    }
}
