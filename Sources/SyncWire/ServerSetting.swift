/// The PostgreSQL settings a gateway sets in each transaction (`set_config(NAME, VALUE, true)`) and the
/// server's schema reads (`current_setting(NAME, true)`): the scope its row-level security and
/// `kvsync_push` check. Spelled here once, for the SQL the schema generator writes and the gateway's
/// statements alike.
package enum ServerSetting: String, CaseIterable, Sendable {
    /// The group the transaction may read and write.
    case group = "kvsync.group"
    /// The device it may push as (empty: any, for the owner's own sessions).
    case device = "kvsync.device"
    /// `on` when the credential is read-only.
    case readOnly = "kvsync.read_only"

    /// `current_setting('NAME', true)`: the setting, or NULL where it was never set.
    package var current: String { "current_setting('\(rawValue)', true)" }
}
