#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PostgresNIO
import SyncKitPostgres

/// The metrics address cannot be listened on (in use, or not this machine's): one line naming it.
public struct GatewayListenError: Error, CustomStringConvertible {
    public let description: String
}
#endif
