extension Store {
    /// The collection `name` as raw bytes, whatever its Swift types: keys as ``ByteKey`` (the stored
    /// bytes), values as stored. For tools that work from the catalog alone, such as `kvtool`.
    ///
    /// Writes through it maintain no index or derived collection; check
    /// ``CatalogEntry/hasMaintainedData`` before writing.
    ///
    /// - Throws: ``KVStoreError/collectionNotFound(_:)`` if the catalog has no such collection.
    public func untypedCollection(named name: String) throws -> (entry: CatalogEntry, collection: KVCollection<ByteKey, [UInt8]>) {
        guard let entry = try catalogEntry(forCollection: name) else { throw KVStoreError.collectionNotFound(name) }
        let database = try self.database(named: entry.database, create: false)
        let collection = KVCollection<ByteKey, [UInt8]>(
            name: name, store: self, database: database, codec: RawBytesCodec(), indexes: [], derivations: [], aggregations: [])
        return (entry, collection)
    }
}
