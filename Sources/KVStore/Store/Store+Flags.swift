extension Store {
    /// The flags LMDB reports for this store's environment (`mdb_env_get_flags`): `MDB_NOMETASYNC`,
    /// `MDB_NOSYNC`, `MDB_RDONLY`, `MDB_NOTLS`… as LMDB's raw bit set. Read-only; for tests and tools
    /// that check a ``Durability`` really reached LMDB. The flags are per process: another process
    /// opening the same environment has its own.
    package var environmentFlags: UInt32 {
        get throws { try environment.flags() }
    }

    /// Every `Store` on one directory in a process shares one LMDB environment, and so one set of
    /// flags: without this, a handle opened ``Durability/durable`` after a ``Durability/noSync`` one
    /// would commit without syncing, and its `options` would still say `durable`. Makes the
    /// environment at least as durable as this handle asks (see
    /// ``Environment/commitAtLeast(_:)``). A weaker request leaves it as it is: no handle ever commits
    /// less durably than it asked.
    static func adoptStrongestDurability(_ environment: Environment, _ options: Options) throws {
        guard !options.readOnly, !options.immutableFile else { return }
        try environment.commitAtLeast(options.durability)
    }
}

extension Durability {
    /// `durable` 2, `noMetaSync` 1, `noSync` 0.
    var strength: Int {
        switch self {
        case .durable: 2
        case .noMetaSync: 1
        case .noSync: 0
        }
    }
}
