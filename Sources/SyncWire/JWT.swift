import KVStore

/// What a gateway requires of the JWTs it accepts, beyond their signature.
package struct JWTPolicy: Sendable, Equatable {
    /// When given, the `aud` claim must be (or, as an array, hold) this. When not, a JWT that carries
    /// an `aud` is refused (RFC 7519 §4.1.3: a recipient that does not find itself there must refuse).
    package var audience: String?
    /// When given, the `iss` claim must be this.
    package var issuer: String?
    /// The longest a JWT may live: `exp` − `iat` when it has an `iat`, and `exp` − now in any case.
    package var maxLifetime: Duration = JWTPolicy.defaultMaxLifetime
    /// 24 hours: a JWT cannot be revoked before its `exp`, so it must not outlive a day.
    package static let defaultMaxLifetime: Duration = .seconds(86_400)
    /// How far a clock may be off for `nbf` and `iat`.
    package static let leeway = 60.0

    package init(audience: String? = nil, issuer: String? = nil, maxLifetime: Duration = JWTPolicy.defaultMaxLifetime) {
        (self.audience, self.issuer, self.maxLifetime) = (audience, issuer, maxLifetime)
    }
}

/// Why a JWT is refused: the rest of a line that starts with "the JWT".
package struct JWTRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { "the JWT \(reason)" }

    /// The refusal of a JWT signed with `algorithm`, which is not one accepted: it names the algorithm
    /// when it is one of JOSE's registered names (RFC 7518, RFC 8037), and never a name of the
    /// client's own, which the gateway's log would otherwise hold.
    package static func algorithmRefused(_ algorithm: some StringProtocol) -> JWTRefusal {
        let registered: Set<String> = ["none", "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512",
                                       "PS256", "PS384", "PS512", "EdDSA", "ES256K"]
        return JWTRefusal(registered.contains(String(algorithm))
            ? "is signed with \(algorithm), which this gateway does not accept (HS256 or ES256 only)"
            : "is signed with an algorithm this gateway does not accept (HS256 or ES256 only)")
    }
}

/// A compact JWS (RFC 7515) split and its header checked, its claims not yet trusted: the signature
/// is the caller's to check (over ``signingInput``), and only then are the claims read
/// (``claims(policy:now:)``).
package struct JWT: Sendable {
    /// `HS256` or `ES256` (or anything else the header says: the verifier refuses what it has no key for).
    package var algorithm: String
    /// The first two parts and their dot, as sent: what the signature signs.
    package var signingInput: [UInt8]
    package var signature: [UInt8]
    /// The claims' bytes (the second part, decoded).
    package var payload: [UInt8]

    /// Nesting in a header or claims, at most.
    static let maxDepth = 8
    /// The algorithms a gateway may be given a key for; any other (`none` first) is refused here.
    package static let algorithms: Set<String> = ["HS256", "ES256"]

    /// Splits `token` into its three base64url parts and reads its header: a JSON object (no member
    /// twice) with an `alg` of HS256 or ES256 and no `crit` (this gateway understands no extension, and RFC 7515
    /// §4.1.11 says a recipient must then refuse).
    package init(_ token: String) throws(JWTRefusal) {
        guard CredentialText.isJWT(token) else { throw JWTRefusal("is not three base64url parts") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64.decodeURL(parts[0]), let payload = Base64.decodeURL(parts[1]),
              let signature = Base64.decodeURL(parts[2]) else {
            throw JWTRefusal("is not three base64url parts")
        }
        let members = try Self.object(header, "header")
        guard case .string(let algorithm)? = members.first(where: { $0.key == "alg" })?.value.kind else {
            throw JWTRefusal("has no alg in its header")
        }
        guard Self.algorithms.contains(algorithm) else {
            throw JWTRefusal.algorithmRefused(algorithm)
        }
        if members.contains(where: { $0.key == "crit" }) {
            throw JWTRefusal("has a crit header parameter, and this gateway understands no extension")
        }
        self.algorithm = algorithm
        signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        self.signature = signature
        self.payload = payload
    }

    /// The members of a JSON object, refused if `bytes` is not exactly one object, or if any object
    /// in it names a member twice (which JSON libraries read differently: the first, the last).
    static func object(_ bytes: [UInt8], _ what: String) throws(JWTRefusal) -> [(key: String, value: JSONNode)] {
        var parser = JSONParser(bytes, range: 0..<bytes.count, maxDepth: maxDepth)
        do {
            let node = try parser.parseValue()
            parser.skipWhitespace()
            guard parser.isAtEnd else { throw JWTRefusal("has text after its \(what)'s JSON object") }
            guard case .object(let members) = node.kind else { throw JWTRefusal("has a \(what) that is not a JSON object") }
            return members
        } catch let error as JSONParser.SyntaxError {
            throw JWTRefusal("has a \(what) that is not strict JSON (\(error.message))")
        } catch let refusal as JWTRefusal {
            throw refusal
        } catch {
            throw JWTRefusal("has an unreadable \(what)")
        }
    }

    /// The claims, read only after the signature was checked, against `policy` and `now` (seconds
    /// since 1970).
    package func claims(policy: JWTPolicy, now: Double) throws(JWTRefusal) -> JWTClaims {
        try JWTClaims(payload, policy: policy, now: now)
    }
}

/// The claims of a verified JWT: `group` (required), `device` or else `sub`, `exp` (required), `nbf`,
/// `iat`, `read_only`, `aud` and `iss`.
package struct JWTClaims: Sendable, Equatable {
    package var group: String
    /// The device the JWT's pushes are recorded under; `nil` when it names none (it pulls only).
    package var device: String?
    package var readOnly: Bool
    /// `exp`, in seconds since 1970: the gateway closes the JWT's live streams then.
    package var expiresAt: Double

    /// The device ids a gateway derives for tokens issued without a name start with this; no JWT and
    /// no token name may take it.
    package static let reservedDevicePrefix = "credential-"

    package init(_ payload: [UInt8], policy: JWTPolicy, now: Double) throws(JWTRefusal) {
        let members = try JWT.object(payload, "claims")
        var claims: [String: JSONNode.Kind] = [:]
        for member in members { claims[member.key] = member.value.kind }
        func number(_ name: String) throws(JWTRefusal) -> Double? {
            guard let kind = claims[name] else { return nil }
            guard case .number(let text) = kind, let value = Double(text), value.isFinite else {
                throw JWTRefusal("has a \(name) claim that is not a number")
            }
            return value
        }
        func string(_ name: String) throws(JWTRefusal) -> String? {
            guard let kind = claims[name] else { return nil }
            guard case .string(let text) = kind else { throw JWTRefusal("has a \(name) claim that is not a string") }
            return text
        }
        guard let exp = try number("exp") else { throw JWTRefusal("has no exp claim") }
        guard exp > now else { throw JWTRefusal("has expired") }
        let limit = Double(policy.maxLifetime.components.seconds)
        guard exp - now <= limit else {
            throw JWTRefusal("expires more than \(Int(limit)) s from now, past this gateway's longest lifetime")
        }
        if let iat = try number("iat") {
            guard iat <= now + JWTPolicy.leeway else { throw JWTRefusal("was issued in the future (iat)") }
            guard exp - iat <= limit else { throw JWTRefusal("lives more than \(Int(limit)) s (exp - iat), past this gateway's longest lifetime") }
        }
        if let nbf = try number("nbf"), nbf > now + JWTPolicy.leeway { throw JWTRefusal("is not valid yet (nbf)") }
        if let issuer = policy.issuer {
            guard try string("iss") == issuer else { throw JWTRefusal("is not issued by \(GatewayRequestHead.shown(issuer)) (iss)") }
        }
        if let kind = claims["aud"] {
            guard let audience = policy.audience else {
                throw JWTRefusal("has an aud claim, and this gateway has no audience to check it against (--jwt-audience)")
            }
            let audiences: [String]
            switch kind {
            case .string(let one): audiences = [one]
            case .array(let items):
                var strings: [String] = []
                for item in items {
                    guard case .string(let one) = item.kind else { throw JWTRefusal("has an aud claim that is not a string or strings") }
                    strings.append(one)
                }
                audiences = strings
            default: throw JWTRefusal("has an aud claim that is not a string or strings")
            }
            guard audiences.contains(audience) else { throw JWTRefusal("is for another audience (aud)") }
        } else if policy.audience != nil {
            throw JWTRefusal("has no aud claim")
        }
        guard let group = try string("group"), !group.isEmpty, group.utf8.count <= 1024 else { throw JWTRefusal("has no group claim") }
        self.group = group
        var device = try string("device")
        if device == nil { device = try string("sub") }
        if let device {
            guard !device.isEmpty, device.utf8.count <= GatewayWire.maxNameBytes,
                  !device.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
                throw JWTRefusal("has a device (or sub) claim that is empty, over \(GatewayWire.maxNameBytes) bytes or holds a control character")
            }
            guard !device.hasPrefix(Self.reservedDevicePrefix) else {
                throw JWTRefusal("has a device (or sub) claim that starts with \(Self.reservedDevicePrefix), which names tokens' devices")
            }
            guard !InstallID.endsWithPublicID(device) else {
                throw JWTRefusal("has a device (or sub) claim that ends like an install's id (\(InstallID.separator) and \(InstallID.publicIDLength) hexadecimal digits), which is reserved")
            }
        }
        self.device = device
        if let kind = claims["read_only"] {
            guard case .bool(let flag) = kind else { throw JWTRefusal("has a read_only claim that is not true or false") }
            readOnly = flag
        } else {
            readOnly = false
        }
        expiresAt = exp
    }
}
