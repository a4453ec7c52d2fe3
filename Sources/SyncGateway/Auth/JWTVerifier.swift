#if PostgreSQL
import Crypto
import Foundation
import KVStore
import SyncKitPostgres
import SyncWire

/// JSON Web Tokens signed by an app's own backend (RFC 7519, compact JWS): how an app with its own
/// login hands its users' devices sync credentials, as with PowerSync or Supabase, without issuing
/// tokens through the database.
///
/// The gateway accepts the algorithms it was given a key for, and no other: `HS256` with a shared
/// secret, `ES256` with a P-256 public key (PEM). `none` is always refused, and so is `HS256` when
/// only an ES256 key is configured (a token "signed" with the public key as an HMAC secret). The
/// header and the claims must be strict JSON with no member named twice, and a header with `crit`
/// is refused (no extension is understood). The claims: `group` (required), `device` (or `sub`: the
/// device id its pushes are recorded under; a JWT with neither pulls only), `exp` (required, at most
/// ``maxLifetime`` ahead, and at most that after `iat` when there is one), `nbf`, `read_only`; `aud`
/// and `iss` are checked when ``audience`` and ``issuer`` are given, and a JWT with an `aud` is refused
/// when no audience is given.
public struct JWTVerifier: Sendable {
    public enum Key: Sendable {
        /// HMAC with SHA-256 and this secret (at least 32 bytes).
        case hs256(secret: [UInt8])
        /// ECDSA on P-256 with SHA-256, with this public key.
        case es256(publicKeyPEM: String)
    }

    private let hmacKey: SymmetricKey?
    private let publicKey: P256.Signing.PublicKey?
    let policy: JWTPolicy
    /// The clock `exp`, `nbf` and `iat` are checked against (a seam for tests).
    let now: @Sendable () -> Date

    /// The `aud` a JWT must carry (nil: a JWT that carries one is refused).
    public var audience: String? { policy.audience }
    /// The `iss` a JWT must carry (nil: any).
    public var issuer: String? { policy.issuer }
    /// The longest a JWT may live (`exp` − `iat`, and `exp` − now): 24 hours by default.
    public var maxLifetime: Duration { policy.maxLifetime }

    /// - Throws: ``ReplicationError/invalidCredential(_:)`` for a secret under 32 bytes, a key that
    ///   is not a P-256 public key in PEM, or a lifetime that is not from 1 second to 30 days.
    public init(keys: [Key], audience: String? = nil, issuer: String? = nil, maxLifetime: Duration = .seconds(86_400),
                now: @escaping @Sendable () -> Date = { Date() }) throws {
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
                    throw ReplicationError.invalidCredential("the ES256 key is not a P-256 public key in PEM")
                }
            }
        }
        guard maxLifetime >= .seconds(1), maxLifetime <= .seconds(30 * 86_400) else {
            throw ReplicationError.invalidCredential("a JWT's longest lifetime must be from 1 second to 30 days")
        }
        self.hmacKey = hmacKey
        self.publicKey = publicKey
        policy = JWTPolicy(audience: audience, issuer: issuer, maxLifetime: maxLifetime)
        self.now = now
    }

    /// The verified principal of `token`, or a refusal that says why in one line. The signature is
    /// checked before a byte of the claims is read.
    func verify(_ token: String) throws(SyncGateway.Refusal) -> SyncGateway.Principal {
        do {
            let jwt = try JWT(token)
            switch jwt.algorithm {
            case "HS256":
                guard let hmacKey else { throw JWTRefusal("is signed with HS256, which this gateway does not accept") }
                guard HMAC<SHA256>.isValidAuthenticationCode(jwt.signature, authenticating: jwt.signingInput, using: hmacKey) else {
                    throw JWTRefusal("has a bad signature")
                }
            case "ES256":
                guard let publicKey else { throw JWTRefusal("is signed with ES256, which this gateway does not accept") }
                guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: jwt.signature),
                      publicKey.isValidSignature(ecdsa, for: jwt.signingInput) else {
                    throw JWTRefusal("has a bad signature")
                }
            default:
                throw JWTRefusal.algorithmRefused(jwt.algorithm)
            }
            let claims = try jwt.claims(policy: policy, now: now().timeIntervalSince1970)
            // The limits' key: the device when the JWT names one (however many JWTs it is given, and
            // whatever their signatures: an ES256 signature (r, s) also verifies as (r, n - s)); else
            // the signed header and claims, which no change of the signature alters.
            let key = claims.device.map { "device \(claims.group)\u{0}\($0)" }
                ?? "jwt " + Hex.encode(Array(SHA256.hash(data: jwt.signingInput)))
            return SyncGateway.Principal(id: 0, group: claims.group, device: claims.device,
                                         readOnly: claims.readOnly || claims.device == nil,
                                         expiresAt: Date(timeIntervalSince1970: claims.expiresAt), key: key)
        } catch {
            throw SyncGateway.Refusal(status: .unauthorized, line: (error as? JWTRefusal)?.description ?? "the JWT is refused")
        }
    }
}
#endif
