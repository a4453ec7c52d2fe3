import KVStore

/// A container's install id, as the sync protocol carries it: a secret made once per container (256
/// random bits, 43 characters of base64url, kept in its replication state) that the device sends with
/// its credential in the `KVSync-Install` header.
///
/// A credential names a device; an install is one container under that name. The gateway records a
/// push under the credential's device name and the install's **public id**, the first 24 hexadecimal
/// digits of the secret's SHA-256 (`NAME#9f86d081884c7d659a2feaa0`; SyncKitPostgres computes it):
///
/// - A new container under a name used before (the app installed again, a token issued again after a
///   revocation, a JWT's `sub`) is a device id of its own, so its history tokens, which start at 1
///   again, never meet the old container's rows.
/// - The public id is all that the log shows, and it does not give the secret: a holder of the
///   credential alone (stolen, or issued again) cannot push as an install it does not hold, only as a
///   new one under the credential's name.
/// - A device name that ends like a public id (`#` and 24 lowercase hexadecimal digits) is refused
///   (as a token's name, a JWT's `device` or `sub`), so that no credential's device is another's install.
/// - A device that sends no install id (a release before this one) is recorded under the name alone, as
///   it was. So is one whose name leaves no room for the suffix within ``GatewayWire/maxNameBytes``.
package enum InstallID {
    /// The header a device sends its install id in, with every request.
    package static let header = GatewayHeader.install.rawValue
    /// The length of a secret's text: 32 bytes of base64url, unpadded.
    package static let secretLength = 43
    /// Between a device's name and an install's public id.
    package static let separator = "#"
    /// Hexadecimal digits of a public id: 96 bits of the secret's SHA-256.
    package static let publicIDLength = 24
    /// The longest name that takes an install's suffix (the device id stays within
    /// ``GatewayWire/maxNameBytes``, which every server statement and wire reader holds device ids to).
    package static var maxNameBytesWithInstall: Int { GatewayWire.maxNameBytes - separator.utf8.count - publicIDLength }

    /// Whether `text` has a secret's form.
    package static func isSecret(_ text: String) -> Bool {
        let utf8 = text.utf8
        return utf8.count == secretLength && utf8.allSatisfy(isBase64URL)
    }

    /// Whether `text` has a public id's form (24 lowercase hexadecimal digits).
    package static func isPublicID(_ text: some StringProtocol) -> Bool {
        text.utf8.count == publicIDLength && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// Whether `name` ends like a device id made of a name and a public id: reserved, refused as a
    /// credential's device.
    package static func endsWithPublicID(_ name: String) -> Bool {
        let utf8 = Array(name.utf8)
        guard utf8.count >= separator.utf8.count + publicIDLength else { return false }
        let suffix = utf8.suffix(publicIDLength)
        let mark = utf8[utf8.count - publicIDLength - separator.utf8.count ..< utf8.count - publicIDLength]
        return Array(mark) == Array(separator.utf8) && isPublicID(String(decoding: suffix, as: UTF8.self))
    }

    /// The device id a push is recorded under: `name#publicID`, or `name` alone when there is no
    /// install id or no room for it.
    package static func device(named name: String, publicID: String?) -> String {
        guard let publicID, name.utf8.count <= maxNameBytesWithInstall else { return name }
        return name + separator + publicID
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
    }
}
