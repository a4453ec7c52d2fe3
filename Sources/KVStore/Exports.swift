/// The codecs (CBOR, the JSON projection, hex, base64) are a target of their own (Sources/Codecs),
/// which KVStore's collections and SyncKit's exports build on. Re-exported so that `import KVStore`
/// keeps giving `CBOREncoder`, `JSONValue`, `JSONWriter`… as it did when they lived in this module.
@_exported import Codecs
