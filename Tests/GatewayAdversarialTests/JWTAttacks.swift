#if PostgreSQL
import Crypto
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import SyncTestSupport
import SyncWire
import PostgresTesting
import TestSupport
import Testing

/// JWTs an attacker makes: unsigned, signed with the wrong kind of key, with an extension the gateway
/// does not know, with two claims of one name, for another audience or issuer, too long-lived, with a
/// malleated ES256 signature; and a genuine one that expires while its stream is open.
@Suite(.serialized) struct JWTAttacks {
    static let secret = Array("a shared secret of at least thirty-two bytes".utf8)

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A JWT of `header` and `claims` (JSON text as given: members may repeat), signed by `sign`.
    static func jwt(_ header: String, _ claims: String, sign: ([UInt8]) throws -> [UInt8]) rethrows -> String {
        let input = base64URL(Array(header.utf8)) + "." + base64URL(Array(claims.utf8))
        return input + "." + base64URL(try sign(Array(input.utf8)))
    }

    static func hs256(_ claims: String, header: String = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}", key: [UInt8] = secret) -> String {
        jwt(header, claims) { Array(HMAC<Crypto.SHA256>.authenticationCode(for: $0, using: SymmetricKey(data: key))) }
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }

    /// A gateway that takes HS256 with ``secret`` and ES256 with `signing`'s public key, plus `extra`.
    static func arena(_ name: String, signing: P256.Signing.PrivateKey, extra: [String] = []) async throws -> Arena {
        let keys = TemporaryDirectory()
        try writeSecretFile(keys.path + "/secret", secret)
        try signing.publicKey.pemRepresentation.write(toFile: keys.path + "/public.pem", atomically: true, encoding: .utf8)
        return try await Arena(name, gatewayArguments: ["--jwt-hs256-secret-file", keys.path + "/secret",
                                                        "--jwt-es256-public-key", keys.path + "/public.pem"] + extra)
    }

    @Test func forgedAndMalformedJWTsAreRefusedWithTheirReason() async throws {
        let signing = P256.Signing.PrivateKey()
        let arena = try await Self.arena("jwt-forged", signing: signing, extra: ["--jwt-issuer", "https://backend.example"])
        let group = arena.group
        let good = "\"group\":\"\(group)\",\"device\":\"tablet\",\"iss\":\"https://backend.example\""
        let hour = Self.now + 3600
        #expect(try await arena.get("/v1/hello", Self.hs256("{\(good),\"exp\":\(hour)}")).status == 200)
        let pem = signing.publicKey.pemRepresentation
        let cases: [(String, String)] = [
            ("alg none", Self.base64URL(Array("{\"alg\":\"none\"}".utf8)) + "." + Self.base64URL(Array("{\(good),\"exp\":\(hour)}".utf8)) + "."),
            ("HS256 signed with the ES256 public key", Self.hs256("{\(good),\"exp\":\(hour)}", key: Array(pem.utf8))),
            ("a crit extension", Self.hs256("{\(good),\"exp\":\(hour)}", header: "{\"alg\":\"HS256\",\"crit\":[\"exp\"],\"exp\":1}")),
            ("two group claims", Self.hs256("{\"group\":\"group.com.example.adversary.other\",\(good),\"exp\":\(hour)}")),
            ("two alg members", Self.hs256("{\(good),\"exp\":\(hour)}", header: "{\"alg\":\"none\",\"alg\":\"HS256\"}")),
            ("a claims object with trailing text", Self.hs256("{\(good),\"exp\":\(hour)} {}")),
            ("an exp that is a string", Self.hs256("{\(good),\"exp\":\"\(hour)\"}")),
            ("another issuer", Self.hs256("{\"group\":\"\(group)\",\"iss\":\"https://evil.example\",\"exp\":\(hour)}")),
            ("no issuer", Self.hs256("{\"group\":\"\(group)\",\"exp\":\(hour)}")),
            ("an aud this gateway was not told of", Self.hs256("{\(good),\"aud\":\"anything\",\"exp\":\(hour)}")),
            ("a lifetime of two days", Self.hs256("{\(good),\"exp\":\(Self.now + 2 * 86_400)}")),
            ("issued two days before its exp", Self.hs256("{\(good),\"iat\":\(Self.now - 2 * 86_400),\"exp\":\(hour)}")),
            ("a device under the tokens' prefix", Self.hs256("{\"group\":\"\(group)\",\"device\":\"credential-1\",\"iss\":\"https://backend.example\",\"exp\":\(hour)}")),
        ]
        for (what, token) in cases {
            let answer = try await arena.get("/v1/hello", token)
            #expect(answer.status == 401 && answer.text.hasPrefix("the JWT ") && answer.text.split(separator: "\n").count == 1,
                    "\(what): \(answer.status) \(answer.text)")
        }
        // Pushes with them change nothing.
        for (_, token) in cases {
            _ = try await arena.push(token, changes: [try note("k", "forged", token: 1)])
        }
        #expect(try await arena.log().isEmpty)
    }

    @Test func anAudienceIsRequiredWhenTheGatewayNamesOne() async throws {
        let arena = try await Self.arena("jwt-aud", signing: P256.Signing.PrivateKey(), extra: ["--jwt-audience", "kvsync-test"])
        let base = "\"group\":\"\(arena.group)\",\"device\":\"tablet\",\"exp\":\(Self.now + 3600)"
        #expect(try await arena.get("/v1/hello", Self.hs256("{\(base),\"aud\":\"kvsync-test\"}")).status == 200)
        #expect(try await arena.get("/v1/hello", Self.hs256("{\(base),\"aud\":[\"other\",\"kvsync-test\"]}")).status == 200)
        for (claims, reason) in [("{\(base)}", "has no aud"), ("{\(base),\"aud\":\"other\"}", "another audience"),
                                 ("{\(base),\"aud\":[1]}", "not a string")] {
            let answer = try await arena.get("/v1/hello", Self.hs256(claims))
            #expect(answer.status == 401 && answer.text.contains(reason), "\(claims): \(answer.text)")
        }
    }

    /// The order of P-256 (big-endian).
    static let order: [UInt8] = Array(Data(base64Encoded: "/////wAAAAD//////////7zm+q2nF56E87nKwvxjJVE=")!)

    /// `n - s`, big-endian, 32 bytes.
    static func negate(_ s: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in stride(from: 31, through: 0, by: -1) {
            var digit = Int(order[index]) - Int(s[index]) - borrow
            borrow = digit < 0 ? 1 : 0
            if digit < 0 { digit += 256 }
            result[index] = UInt8(digit)
        }
        return result
    }

    /// An ES256 signature (r, s) also verifies as (r, n - s): a second text of one JWT. The live
    /// streams a credential may hold are counted by its device, so the copy takes no more.
    @Test func aMalleatedES256SignatureGetsNoStreamsOfItsOwn() async throws {
        let signing = P256.Signing.PrivateKey()
        let arena = try await Self.arena("jwt-malleable", signing: signing, extra: ["--max-streams-per-credential", "2"])
        let claims = "{\"group\":\"\(arena.group)\",\"device\":\"tablet\",\"exp\":\(Self.now + 3600)}"
        let original = try Self.jwt("{\"alg\":\"ES256\"}", claims) { Array(try signing.signature(for: $0).rawRepresentation) }
        let parts = original.split(separator: ".")
        var standard = String(parts[2]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        let signature = try #require(Data(base64Encoded: standard))
        let malleated = parts[0] + "." + parts[1] + "." + Self.base64URL(Array(signature.prefix(32)) + Self.negate(Array(signature.suffix(32))))
        #expect(malleated != original)
        #expect(try await arena.get("/v1/hello", malleated).status == 200, "the malleated signature verifies, as ECDSA's does")
        let url = try SyncGatewayURL(arena.url)
        let opened = Locked(0)
        let streams = (0..<2).map { _ in
            Task { try await SyncGatewayClient.followChanges(gateway: url, token: original, group: arena.group) { opened.withLock { $0 += 1 } } }
        }
        #expect(await eventuallyAsync(30) { opened.withLock { $0 } == 2 })
        // The third stream, with the malleated copy, is refused at once (an accepted one would stay open:
        // the test waits 15 s for its end, then fails).
        let third = Task { () -> (any Error)? in
            do {
                try await SyncGatewayClient.followChanges(gateway: url, token: malleated, group: arena.group) {}
                return nil
            } catch {
                return error
            }
        }
        if let error = await outcome(of: third, within: 15) {
            // The stream cap's refusal: 429 with Retry-After 15 (the request rate limiter's wait is its own).
            #expect({ if case .rateLimited(.seconds(15), let budget?)? = error as? ReplicationError { budget.hasPrefix("too many live streams for this credential") } else { false } }(),
                    "\(String(describing: error))")
        } else {
            Issue.record("a stream with the malleated signature was accepted past the credential's limit of 2")
        }
        for stream in streams { stream.cancel() }
    }

    /// A JWT's live stream closes when it expires.
    @Test func aJWTsLiveStreamClosesAtItsExpiry() async throws {
        let arena = try await Self.arena("jwt-expiry", signing: P256.Signing.PrivateKey())
        let expiry = Self.now + 4
        let token = Self.hs256("{\"group\":\"\(arena.group)\",\"device\":\"tablet\",\"exp\":\(expiry)}")
        let started = ContinuousClock.now
        let stream = Task { () -> Result<Void, any Error> in
            await Result(catching: { () async throws -> Void in
                try await SyncGatewayClient.followChanges(gateway: try SyncGatewayURL(arena.url), token: token, group: arena.group) {}
            })
        }
        guard let ended = await outcome(of: stream, within: BuildScale.seconds(30)) else {
            Issue.record("the JWT's live stream was still open 30 s later, long past its exp")
            return
        }
        let lasted = ContinuousClock.now - started
        let late = Date().timeIntervalSince1970 - Double(expiry)
        print("[adversary] a JWT's live stream ended \(late) s after its exp (open \(lasted))")
        guard case .failure(let error) = ended else {
            Issue.record("the stream ended without a refusal")
            return
        }
        #expect(error as? ReplicationError == .credentialRefused("the credential has expired"), "\(error)")
        #expect(late >= 0 && late < BuildScale.seconds(5), "\(late)")
    }
}

#endif
