#if PostgreSQL
import Crypto
import Foundation
import KVStore
import SyncKitPostgres

/// JSON Web Tokens signed by an app's own backend (RFC 7519, compact JWS): how an app with its own
/// login hands its users' devices sync credentials, as with PowerSync or Supabase, without issuing
/// tokens through the database.
///
/// The gateway accepts the algorithms it was given a key for, and no other: `HS256` with a shared
/// secret, `ES256` with a P-256 public key (PEM). `none` is always refused, and so is `HS256` when
/// only an ES256 key is configured (a token "signed" with the public key as an HMAC secret). The
/// claims: `group` (required), `device` (or `sub`), `exp` (required, seconds since 1970; checked
/// against the gateway's clock), `nbf` (optional) and `read_only` (optional, `false` by default).
public struct JWTVerifier: Sendable {
    public enum Key: Sendable {
        /// HMAC with SHA-256 and this secret (at least 32 bytes).
        case hs256(secret: [UInt8])
        /// ECDSA on P-256 with SHA-256, with this public key.
        case es256(publicKeyPEM: String)
    }

    private let hmacKey: SymmetricKey?
    private let publicKey: P256.Signing.PublicKey?
    /// The clock `exp` and `nbf` are checked against (a seam for tests).
    let now: @Sendable () -> Date

    /// - Throws: ``ReplicationError/invalidCredential(_:)`` for a secret under 32 bytes or a key that
    ///   is not a P-256 public key in PEM.
    public init(keys: [Key], now: @escaping @Sendable () -> Date = { Date() }) throws {
        var hmacKey: SymmetricKey?
        var publicKey: P256.Signing.PublicKey?
        for key in keys {
            switch key {
            case .hs256(let secret):
                guard secret.count >= 32 else { throw ReplicationError.invalidCredential("an HS256 secret must be at least 32 bytes") }
                hmacKey = SymmetricKey(data: secret)
            case .es256(let pem):
                do {
                    publicKey = try P256.Signing.PublicKey(pemRepresentation: pem)
                } catch {
                    throw ReplicationError.invalidCredential("the ES256 key is not a P-256 public key in PEM: \(error)")
                }
            }
        }
        self.hmacKey = hmacKey
        self.publicKey = publicKey
        self.now = now
    }

    struct Header: Decodable {
        var alg: String
    }

    struct Claims: Decodable {
        var group: String?
        var device: String?
        var sub: String?
        var exp: Double?
        var nbf: Double?
        var read_only: Bool?
    }

    /// The verified principal of `token`, or a refusal that says why in one line.
    func verify(_ token: String) throws(SyncGateway.Refusal) -> SyncGateway.Principal {
        func refuse(_ reason: String) -> SyncGateway.Refusal { SyncGateway.Refusal(status: .unauthorized, line: "the JWT \(reason)") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URL(parts[0]), let claimBytes = Self.base64URL(parts[1]),
              let signature = Self.base64URL(parts[2]) else {
            throw refuse("is not three base64url parts")
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)) else { throw refuse("has no readable header") }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        switch header.alg {
        case "HS256":
            guard let hmacKey else { throw refuse("is signed with HS256, which this gateway does not accept") }
            guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: hmacKey) else {
                throw refuse("has a bad signature")
            }
        case "ES256":
            guard let publicKey else { throw refuse("is signed with ES256, which this gateway does not accept") }
            guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
                  publicKey.isValidSignature(ecdsa, for: signingInput) else {
                throw refuse("has a bad signature")
            }
        default:
            throw refuse("is signed with \(header.alg.prefix(20)), which this gateway does not accept (HS256 or ES256 only)")
        }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimBytes)) else { throw refuse("has no readable claims") }
        let now = self.now().timeIntervalSince1970
        guard let exp = claims.exp else { throw refuse("has no exp claim") }
        guard exp > now else { throw refuse("has expired") }
        if let nbf = claims.nbf, nbf > now { throw refuse("is not valid yet (nbf)") }
        guard let group = claims.group, !group.isEmpty, group.utf8.count <= 1024 else { throw refuse("has no group claim") }
        let device = claims.device ?? claims.sub
        if let device, device.isEmpty || device.utf8.count > 200 { throw refuse("has a device claim that is empty or over 200 bytes") }
        return SyncGateway.Principal(id: 0, group: group, device: device, readOnly: claims.read_only ?? false,
                                     expiresAt: Date(timeIntervalSince1970: exp))
    }

    static func base64URL(_ part: Substring) -> [UInt8]? { Base64.decodeURL(part) }
}
#endif
