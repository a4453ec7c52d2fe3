// The commands that work on no container, and why (``WithoutContainer``): given `--root` (or another
// global option they do not declare), they say so in one line.
#if PostgreSQL
extension SyncCommand.Setup: WithoutContainer {
    static let withoutContainer = "it works on the database, not on a container"
}

extension SyncCommand.Token: WithoutContainer {
    static let withoutContainer = "credentials live in the database, not in a container"
}

extension SyncCommand.Token.Issue: WithoutContainer {
    static let withoutContainer = SyncCommand.Token.withoutContainer
}

extension SyncCommand.Token.List: WithoutContainer {
    static let withoutContainer = SyncCommand.Token.withoutContainer
}

extension SyncCommand.Token.Revoke: WithoutContainer {
    static let withoutContainer = SyncCommand.Token.withoutContainer
}

extension SyncCommand.Blobs: WithoutContainer {
    static let withoutContainer = "the server's blobs live in the database, not in a container"
}

extension SyncCommand.Blobs.List: WithoutContainer {
    static let withoutContainer = SyncCommand.Blobs.withoutContainer
}

extension SyncCommand.Blobs.Collect: WithoutContainer {
    static let withoutContainer = SyncCommand.Blobs.withoutContainer
}

extension SyncCommand.Gateway: WithoutContainer {
    static let withoutContainer = "a gateway serves the database to devices and opens no container"
}

extension Bench.Sync: WithoutContainer {
    static let withoutContainer = "it times throwaway containers of its own"
}

extension Bench.Requests: WithoutContainer {
    static let withoutContainer = "it times throwaway containers of its own"
}

extension Bench.GatewayScale: WithoutContainer {
    static let withoutContainer = "it times throwaway containers of its own"
}

extension Bench.GatewayDevices: WithoutContainer {
    static let withoutContainer = "its devices follow a gateway's live streams and keep no container"
}

extension Bench.Files: WithoutContainer {
    static let withoutContainer = "it times throwaway containers of its own"
}

extension Bench.JSON: WithoutContainer {
    static let withoutContainer = "it times a throwaway PostgreSQL cluster of its own"
}

extension Bench.Pushers: WithoutContainer {
    static let withoutContainer = "it times a throwaway PostgreSQL cluster of its own"
}

extension Bench.Validators: WithoutContainer {
    static let withoutContainer = "it times throwaway containers of its own"
}
#endif
