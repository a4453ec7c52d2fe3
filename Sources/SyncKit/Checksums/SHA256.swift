import KVStore

/// SHA-256 (FIPS 180-4), in plain Swift: the checksum of snapshot files and widget feeds. It is
/// KVStore's ``KVStore/SHA256Hasher`` (moved there in issue 49, so that a container's file manifest
/// can hash what it records); the name stays here, as SyncKit's API had it.
///
/// ```swift
/// let digest = SHA256.hash(Array("abc".utf8))
/// SHA256.hex(digest)  // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// ```
public typealias SHA256 = SHA256Hasher
