import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads

/// `kvtool put` into a collection whose type an app registered (issue 46, finding 3): a member the type
/// does not have, a misspelt `Memo` say, would be stored and never read by the app. It is refused in one
/// line that names it, unless `--allow-unknown-members`, which stores it as given.
@Suite struct TypedMemberTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.members"

    func tool(_ arguments: [String]) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", dir.path, "--group", group], timeout: 120)
    }

    /// The stored bytes of the sample subscription, as a CBOR map's members.
    func stored() throws -> [CBORMapEntry] {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let bytes = try container.store.untypedCollection(named: "subscriptions").collection
            .get(ByteKey(SubscriptionSampleData.subscriptions[0].id.encodedKey))
        guard case .map(let members)? = try bytes.map({ try CBORValue.decode($0) }) else { return [] }
        return members
    }

    func subscription() throws -> Subscription? {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        return try SubscriptionStore(store: container.store).subscriptions.get(SubscriptionSampleData.subscriptions[0].id)
    }

    @Test(.blockingWork) func aMemberTheTypeDoesNotHaveIsRefusedUnlessAllowed() throws {
        do {
            let container = try SharedContainer(groupIdentifier: group, root: dir.path)
            try SubscriptionStore(store: container.store).subscriptions
                .put(SubscriptionSampleData.subscriptions[0], forKey: SubscriptionSampleData.subscriptions[0].id)
        }
        let id = SubscriptionSampleData.subscriptions[0].id.uuidString
        let before = try stored()
        // --merge: the misspelt member is refused, named, and nothing is written.
        var arguments = ["put", "subscriptions", id, #"{"Memo":"typo"}"#, "--merge"]
        var r = try tool(arguments)
        expectOneLineError(r, arguments, status: 65,
                           mentioning: #"the Subscription has no member "Memo" (--allow-unknown-members stores it anyway); nothing was written"#)
        #expect(try stored() == before)
        // Two of them beside one the type has: both named, nothing written.
        arguments = ["put", "subscriptions", id, #"{"memo":"x","Memo":1,"nmae":"y"}"#, "--merge"]
        r = try tool(arguments)
        expectOneLineError(r, arguments, status: 65, mentioning: #"the Subscription has no members "Memo", "nmae" (--allow-unknown-members stores them anyway)"#)
        #expect(try stored() == before)
        // A member the type has is merged.
        r = try tool(["put", "subscriptions", id, #"{"memo":"right"}"#, "--merge"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try subscription()?.memo == "right")
        // Allowed: stored as given; the app still reads it, and `check` passes.
        r = try tool(["put", "subscriptions", id, #"{"Memo":"kept"}"#, "--merge", "--allow-unknown-members"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try stored().contains { $0.key == .text("Memo") })
        #expect(try subscription()?.memo == "right")
        r = try tool(["check"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        // A member the stored value already had (a newer app's, say) is not the caller's: merges go on.
        r = try tool(["put", "subscriptions", id, #"{"memo":"again"}"#, "--merge"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try subscription()?.memo == "again")

        // A whole value with a member the type does not have: refused; allowed, kept as given. An
        // optional member given as null is the type's own.
        let json = try tool(["get", "subscriptions", id]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(json.hasPrefix("{") && json.hasSuffix("}"), "\(json)")
        // (`get` prints dates without their zone, which `put` does not take back: given here in UTC.)
        let dated = json.replacingOccurrences(of: #"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?)""#, with: "$1Z\"", options: .regularExpression)
        let whole = String(dated.replacingOccurrences(of: #""memo":"again""#, with: #""memo":null"#).dropLast()) + #","Extra":true}"#
        #expect(whole.contains(#""memo":null"#), "\(json)")
        arguments = ["put", "subscriptions", id, whole]
        r = try tool(arguments)
        // (What `get` printed holds the "Memo" stored above: given again, it is named too.)
        expectOneLineError(r, arguments, status: 65, mentioning: #"the Subscription has no members "Extra", "Memo" ("#)
        r = try tool(["put", "subscriptions", id, whole, "--allow-unknown-members"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try stored().contains { $0.key == .text("Extra") })
        #expect(try subscription()?.memo == nil)
        r = try tool(["check"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
    }
}
