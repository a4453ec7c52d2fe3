#if Serve
import KVStore
import SyncKit

/// What `kvtool serve`'s API answers, one type per route: the contract `app.js` reads. Each is
/// written through `JSONValue(encoding:)` by the package's one JSON writer, keys sorted
/// (``ServeResponse/json(_:status:)``), except a page of a collection and the timeline, whose members
/// keep the order declared here (``ServeResponse/jsonInOrder(_:)``). A `nil` is written as `null`.
enum ServeAnswer {
    /// `/api/overview`.
    struct Overview: Encodable {
        var group, path: String
        var transaction: Int
        var writesAllowed: Bool
        /// `collection:NAME` or `defaults:NAME` for each target that records history.
        var history: [String]
        var serverTime: String
        /// The page's tabs, in order (``ServeAPI/table``).
        var views: [View]
    }

    /// A tab of the page and the route whose answer it shows.
    struct View: Encodable {
        var tab, label, api: String
    }

    /// `/api/catalog`: what `kvtool collections --json` prints for each entry.
    struct Catalog: Encodable {
        var entries: [JSONValue]
    }

    /// `/api/collection`: a page of entries, in key order (or reversed).
    struct Page: Encodable {
        var name, keyEncoding, valueEncoding: String
        var count: Int
        var entries: [Row]
        /// The last key of the page, in hex, when there are more: the next page's `after=`.
        var next: String?
    }

    /// One entry of a ``Page``: its key rendered and in hex, its value indented and cut.
    struct Row: Encodable {
        var key, keyHex, value: String
        var size: Int
        var truncated: Bool
    }

    /// `/api/defaults`.
    struct Defaults: Encodable {
        var suites: [Suite]
    }

    struct Suite: Encodable {
        var suite: String
        var entries: [Setting]
        var count: Int
    }

    struct Setting: Encodable {
        var key, value, type: String
        var truncated: Bool
    }

    /// `/api/files`.
    struct Files: Encodable {
        var dir: String
        var count: Int
        var entries: [File]
        /// The replicated files under `dir` (rows of the manifest, at any depth) and where each stands
        /// on this device, as `kvtool files status` shows them; empty when no prefix replicates.
        var replicated: [ReplicatedFile]
    }

    /// A row of `kvtool files status`: `state` is `present`, `downloading`, `missing` or
    /// `waiting_to_upload`; `problem` why its last transfer stopped (a refusal with its limit).
    struct ReplicatedFile: Encodable {
        var path, state, sha256, type: String
        var size: Int64
        var problem: String?
    }

    struct File: Encodable {
        var name, path, kind: String
        var size: Int
        var modified: String
        /// Whether the page may show it as an image (its name says so; its bytes are checked when served).
        var image: Bool
    }

    /// `/api/sync`: the container's sync service, as `kvtool sync status` shows it (no endpoint, no
    /// credential: those are in the agent's registration file, which is never read here).
    struct Sync: Encodable {
        var available: Bool
        var status: SyncStatus?
    }

    /// `/api/consumers`.
    struct Consumers: Encodable {
        var current: UInt64
        var historyEnabled: Bool
        var consumers: [Consumer]
    }

    struct Consumer: Encodable {
        var name: String
        var token, behind: UInt64
        var updatedAt: String
    }

    /// `/api/timeline`: the last commits, each as the event stream sends it.
    struct Timeline: Encodable {
        var transaction: Int
        var events: [Commit]
    }

    /// A commit, on the timeline and in `/api/events`: at most ``ServeLimits/listing`` of its history
    /// entries, and how many more there were.
    struct Commit: Encodable {
        var transaction: Int
        var seen: String
        /// Whether the commit recorded history (a commit without is shown bare).
        var history: Bool
        var entries: [JSONValue]
        var omitted: Int
    }

    /// `/api/snapshots`: each with `status` (`ok`, or its problems).
    struct Snapshots: Encodable {
        var snapshots: [JSONValue]
        var problems: [String]
    }

    /// `/api/readers`.
    struct Readers: Encodable {
        var readers: [Reader]
    }

    struct Reader: Encodable {
        var pid: Int32
        var thread: String
        var transactionID: Int?
        var alive: Bool
        var isSelf: Bool
        var process: String?

        enum CodingKeys: String, CodingKey {
            case pid, thread, transactionID, alive, isSelf = "self", process
        }
    }

    /// `/api/put`.
    struct Stored: Encodable {
        var transaction: Int
    }

    /// `/api/delete`.
    struct Deleted: Encodable {
        var deleted: Bool
    }

    /// Any refusal.
    struct Failure: Encodable {
        var error: String
    }
}
#endif
