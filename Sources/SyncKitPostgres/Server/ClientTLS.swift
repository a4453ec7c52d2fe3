#if PostgreSQL
import Foundation
import NIOSSL
import PostgresNIO

/// A client's TLS that verifies the server: version 1.2 at least, the certificate checked against the
/// system's roots or the PEM certificates in `caFile` (a private CA). `url` is named in the errors.
func verifyingTLS(trusting caFile: String?, for url: String) throws -> TLSConfiguration {
    var configuration = TLSConfiguration.makeClientConfiguration()
    configuration.minimumTLSVersion = .tlsv12
    configuration.certificateVerification = .fullVerification
    if let caFile {
        do {
            configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
        } catch {
            throw ReplicationError.invalidServerURL(url, reason: "cannot read the root certificates \(caFile): \(error)")
        }
    }
    return configuration
}

/// `configuration`'s context; a failure names `url`.
func clientSSLContext(_ configuration: TLSConfiguration, for url: String) throws -> NIOSSLContext {
    do {
        return try NIOSSLContext(configuration: configuration)
    } catch {
        throw ReplicationError.invalidServerURL(url, reason: "cannot set up TLS: \(error)")
    }
}
#endif
