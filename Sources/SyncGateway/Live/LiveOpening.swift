#if PostgreSQL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

/// A live stream admitted from its request's head, waiting for its credential's check.
struct LiveOpening: Sendable {
    let request: SyncGateway.Admitted
    let answers: AnswerWriter
}
#endif
