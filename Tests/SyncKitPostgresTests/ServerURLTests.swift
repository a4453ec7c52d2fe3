#if PostgreSQL
import SyncKitPostgres
import Testing

@Suite struct ServerURLTests {
    @Test func tcpAndSocketURLsParse() throws {
        let tcp = try ServerURL("postgres://kv:secret@127.0.0.1:5433/kvdb")
        #expect(tcp.endpoint == .tcp(host: "127.0.0.1", port: 5433))
        #expect(tcp.user == "kv" && tcp.password == "secret" && tcp.database == "kvdb")
        #expect(tcp.description == "postgres://kv:***@127.0.0.1:5433/kvdb")
        let byDefault = try ServerURL("postgresql://kv@db.example/kvdb")
        #expect(byDefault.endpoint == .tcp(host: "db.example", port: 5432))
        let socket = try ServerURL("postgres://kv@/kvdb?host=/run/postgresql&port=5433")
        #expect(socket.endpoint == .unixSocket(path: "/run/postgresql/.s.PGSQL.5433"))
        let encoded = try ServerURL("postgres://kv@%2Ftmp%2Fpg/kvdb")
        #expect(encoded.endpoint == .unixSocket(path: "/tmp/pg/.s.PGSQL.5432"))
        #expect(tcp.tls == .disable)
        let required = try ServerURL("postgres://kv@db.example/kvdb?sslmode=require")
        #expect(required.tls == .require && required.description == "postgres://kv@db.example:5432/kvdb?sslmode=require")
        let verified = try ServerURL("postgres://kv@db.example/kvdb?sslmode=verify-full&sslrootcert=/etc/ca.pem")
        #expect(verified.tls == .verifyFull(rootCertificates: "/etc/ca.pem"))
        #expect(verified.description == "postgres://kv@db.example:5432/kvdb?sslmode=verify-full&sslrootcert=/etc/ca.pem")
    }

    @Test(arguments: [
        ("mysql://kv@host/db", "scheme"),
        ("postgres://host/db", "no user"),
        ("postgres://kv@host", "no database"),
        ("postgres://kv@host:0/db", "port"),
        ("postgres://kv@/db?host=relative", "absolute socket directory"),
        ("postgres://kv@host/db?sslmode=prefer", "unsupported sslmode 'prefer'"),
        ("postgres://kv@host/db?sslmode=require&sslrootcert=/ca.pem", "needs sslmode=verify-full"),
        ("postgres://kv@host/db?sslrootcert=/ca.pem", "needs sslmode=verify-full"),
        ("postgres://kv@/db?host=/run/postgresql&sslmode=require", "a Unix socket is local"),
        ("postgres://kv@host/db?application_name=x", "unsupported parameter"),
        ("postgres://kv:pw@/db", "no host"),
    ])
    func badURLsNameTheProblem(text: String, expected: String) {
        do {
            _ = try ServerURL(text)
            Issue.record("\(text) parsed")
        } catch {
            let message = "\(error)"
            #expect(message.contains(expected), "\(message)")
            #expect(!message.contains("\n"))
            #expect(!message.contains(":pw@"), "the password leaked: \(message)")
        }
    }
}
#endif
