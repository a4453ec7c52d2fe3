#if PostgreSQL
import Crypto
import KVStore
import SyncWire

extension InstallID {
    /// A new secret: 256 bits from the system's generator, as base64url (what ``isSecret(_:)`` accepts).
    package static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64.url((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The public id of `secret`: the first ``publicIDLength`` hexadecimal digits of its SHA-256. What
    /// the server's log shows of an install, and what no one can turn back into the secret it needs to
    /// push as that install.
    package static func publicID(of secret: String) -> String {
        String(Hex.encode(Array(SHA256.hash(data: Array(secret.utf8)))).prefix(publicIDLength))
    }
}
#endif
