#if PostgreSQL
import Foundation
import NIOCore
import NIOSSL

/// The certificate a sync gateway presented does not name the host the device asked for.
struct CertificateNameMismatch: Error, CustomStringConvertible {
    var host: String
    var names: [String]

    var description: String {
        "the gateway's certificate does not name \(host) (it names \(names.isEmpty ? "nothing a device can check" : names.prefix(8).joined(separator: ", "))): use a URL with one of its names, or a certificate for \(host)"
    }
}
#endif
