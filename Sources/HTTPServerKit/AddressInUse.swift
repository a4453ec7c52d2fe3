#if PostgreSQL || Serve
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Whether a listen failed because another socket holds the address: SwiftNIO's bind error, by its
/// errno (not by its text, which is the C library's and may change with the locale or the release).
public func isAddressInUse(_ error: any Error) -> Bool {
    (error as? IOError)?.errnoCode == EADDRINUSE
}
#endif
