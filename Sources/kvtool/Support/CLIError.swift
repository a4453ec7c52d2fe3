import Foundation

/// An error `kvtool` reports as one line on stderr, with the exit code of its class. How library
/// errors are classified: CLIError+Mapping.swift (this file is also compiled into the dump's fuzz
/// target, without SyncKit).
struct CLIError: Error, CustomStringConvertible {
    /// The documented exit codes, each with its one-line meaning: `kvtool help`, the README and the
    /// DocC pages list these (a test checks that they agree).
    enum Kind: Int32, CaseIterable {
        case notFound = 1
        case usage = 64
        case badInput = 65
        /// A sync request the server did not acknowledge: nothing can take it there, or not within its
        /// deadline (sysexits' EX_UNAVAILABLE).
        case unavailable = 69
        /// A store or I/O failure, and any error nothing classified.
        case failure = 74
        /// The replication server refused this device's changes: its clock is too far ahead.
        case clockSkew = 75
        /// A sync request acknowledged for everything but keys held behind other devices' quarantined
        /// changes (`kvtool sync quarantine drop|keep-mine` settles them).
        case held = 76
        /// The sync gateway refused this device's credential (sysexits' EX_NOPERM).
        case credential = 77

        var meaning: String {
            switch self {
            case .notFound: "not found"
            case .usage: "usage"
            case .badInput: "bad input data"
            case .unavailable: "a sync request was not acknowledged: nothing enabled for sync, no owner and none can start, or not within its deadline (no network, an error)"
            case .failure: "store or I/O failure, or an error nothing classified"
            case .clockSkew: "the replication server refused this machine's changes: its clock is too far ahead"
            case .held: "a sync request was acknowledged except for keys held behind other devices' changes this device cannot apply (kvtool sync quarantine keep-mine|drop)"
            case .credential: "a gateway refused this device's credential (or the server its device id)"
            }
        }

        /// "0 success, 1 not found, 64 usage, …": the list `kvtool help` prints.
        static var summary: String {
            (["0 success"] + allCases.map { "\($0.rawValue) \($0.meaning)" }).joined(separator: "; ")
        }
    }

    let kind: Kind
    let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    var description: String { message }

    func exit() -> Never {
        let line = "kvtool: error: " + message.replacingOccurrences(of: "\n", with: " ") + "\n"
        FileHandle.standardError.write(Data(line.utf8))
        Foundation.exit(kind.rawValue)
    }
}
