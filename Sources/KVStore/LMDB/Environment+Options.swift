import Logging

extension Environment.Configuration {
    /// What differs between the configuration an environment was opened with (`self`) and the one a
    /// second open of its path in this process asks for, among what cannot differ between handles on
    /// one environment; `nil` when nothing does. ``Environment/open(directory:descriptor:configuration:)``
    /// throws ``KVStoreError/conflictingOptions(path:detail:)`` with it.
    ///
    /// Not compared, because a later handle can differ there: the initial `mapSize` (the map grows by
    /// itself, and every handle uses the current one); `durability` (the environment commits in the
    /// strongest mode any handle asked for, see ``Store``); `readOnly` (a read-only handle on a
    /// read-write environment refuses writes itself, and the reverse is
    /// ``KVStoreError/readOnly(path:)``); `clearStaleReadersOnOpen`, which only the first open does;
    /// and the `logger`, for which the first open's is used.
    func conflict(with requested: Self) -> String? {
        func differs<T: Equatable>(_ name: String, _ mine: T, _ theirs: T, _ show: (T) -> String = { "\($0)" }) -> String? {
            mine == theirs ? nil : "\(name) is \(show(mine)) there and \(show(theirs)) here"
        }
        return differs("maxMapSize", maxMapSize, requested.maxMapSize)
            ?? differs("maxReaders", maxReaders, requested.maxReaders)
            ?? differs("maxDatabases", maxDatabases, requested.maxDatabases)
            ?? differs("fileMode", fileMode, requested.fileMode) { "0" + String($0, radix: 8) }
            ?? differs("staleReaderCheckInterval", staleReaderCheckInterval, requested.staleReaderCheckInterval) {
                $0.map { "\($0)" } ?? "nil"
            }
    }
}

extension Environment {
    /// Logs through ``Configuration/logger``, with the environment's path as metadata.
    func log(_ level: Logger.Level, _ message: Logger.Message, _ metadata: Logger.Metadata) {
        var metadata = metadata
        metadata["path"] = "\(directory)"
        configuration.logger.log(level: level, message, metadata: metadata)
    }
}
