// The store's options that `SharedContainer.Options` used to copy field by field. They are
// `SharedContainer.Options.store` now (one `Store.Options`, so a new store option needs no copy);
// these forward to it, so that code written against the copies still compiles.
extension SharedContainer.Options {
    @available(*, deprecated, renamed: "store.durability")
    public var durability: Durability {
        get { store.durability }
        set { store.durability = newValue }
    }

    @available(*, deprecated, renamed: "store.mapSize")
    public var mapSize: Int {
        get { store.mapSize }
        set { store.mapSize = newValue }
    }

    @available(*, deprecated, renamed: "store.maxMapSize")
    public var maxMapSize: Int {
        get { store.maxMapSize }
        set { store.maxMapSize = newValue }
    }

    @available(*, deprecated, renamed: "store.clearStaleReadersOnOpen")
    public var clearStaleReadersOnOpen: Bool {
        get { store.clearStaleReadersOnOpen }
        set { store.clearStaleReadersOnOpen = newValue }
    }

    @available(*, deprecated, renamed: "store.staleReaderCheckInterval")
    public var staleReaderCheckInterval: Duration? {
        get { store.staleReaderCheckInterval }
        set { store.staleReaderCheckInterval = newValue }
    }
}
