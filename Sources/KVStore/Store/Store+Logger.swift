import Logging

extension Store.Options {
    /// The default ``logger``: discards everything.
    static let silentLogger = Logger(label: "kvstore", factory: { _ in SwiftLogNoOpLogHandler() })
}
