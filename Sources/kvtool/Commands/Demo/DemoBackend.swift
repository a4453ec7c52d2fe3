#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres
import PostgresTesting
import Workloads

extension Demo {
    /// Issue 50's demo: the app's backend in SQL. Seed 003's push service reads the devices'
    /// registrations through the JSON view, as a login of `kvsync_backend` granted this group only;
    /// seed 002's backend refuses a subscription whose amount is out of range (a validator in
    /// PL/pgSQL), and machine B, which wrote it, shows the server's value and the reason.
    func backend(group: String, a: [String], b: [String], viaGateway: [String], server: String, cluster: LocalPostgresCluster) throws {
        func on(_ root: [String], _ arguments: [String]) throws {
            try ChildProcess(arguments: arguments + ["--group", group] + root).finish()
        }
        let login = "push_service"
        print("   the app's backend: a login that is only a member of kvsync_backend, granted this group (kvtool sync setup --backend-login \(login); kvtool sync backend grant):")
        try ChildProcess(arguments: ["sync", "setup", "--database", server, "--backend-login", login]).finish()
        try ChildProcess(arguments: ["sync", "backend", "grant", "--database", server, "--login", login, "--group", group]).finish()
        print("   seed 003's push service reads the devices' registrations from SQL, through the JSON view (row-level security applies to it):")
        let query = """
            SELECT group_id || ': token ' || left(value_json->>'token', 8) || '…, platform ' || (value_json->>'platform') \
            || ', device record ' || (value_json->>'id') FROM kvsync_state_json \
            WHERE kind = 'defaults' AND key_text = '\(PushSDKStore.lastRegistrationKey)'
            """
        print("     \(query.replacingOccurrences(of: "\\", with: ""))")
        for line in try cluster.psql(query, as: login).split(separator: "\n") { print("     → \(line)") }

        print("   seed 002's backend checks subscriptions: a validator in PL/pgSQL, registered for the collection by the owner:")
        try cluster.psql(Self.subscriptionRules)
        print("     \(Self.subscriptionRules.split(separator: "\n").first(where: { $0.contains("NOT BETWEEN") }).map { $0.trimmingCharacters(in: .whitespaces) } ?? "")")
        try on(a, ["sync", "enable", "subscriptions"])
        try on(a, ["sync", "run", "--once", "--server", server])
        try on(b, ["sync", "enable", "subscriptions"] + viaGateway)
        try on(b, ["sync", "run", "--once"] + viaGateway)
        print("   machine B, on an older release that does not check amounts, saves Netflix at -1490 JPY and syncs; the server refuses it with the validator's reason, and B's sync goes on:")
        try on(b, ["demo", "machine", "--label", "B", "--subscription-amount", "Netflix=-1490"])
        try on(b, ["sync", "run", "--once"] + viaGateway)
        try on(b, ["demo", "machine", "--label", "B", "--show-subscription", "Netflix"])
        try on(b, ["sync", "rejected", "list"])
    }

    /// The validator the demo registers: a reason for an amount the app's own checks refuse.
    static let subscriptionRules = """
        CREATE OR REPLACE FUNCTION subscription_rules(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text)
        RETURNS text LANGUAGE sql IMMUTABLE AS $$
            SELECT CASE WHEN p_new IS NULL THEN NULL
                        WHEN (p_new->>'amount')::numeric NOT BETWEEN 0 AND 1000000 THEN 'amount ' || (p_new->>'amount') || ' is outside 0...1000000'
                   END
        $$;
        INSERT INTO kvsync_validators (kind, name, fn) VALUES ('collection', 'subscriptions', 'subscription_rules(text, bytea, jsonb, jsonb, text)')
        ON CONFLICT DO NOTHING;
        """
}
#endif
