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

    /// libpq's host list: each host with its port or the default, `?port=` (one, or one per host)
    /// replacing the ports, and `target_session_attrs`.
    @Test func hostListsParse() throws {
        let list = try ServerURL("postgresql://kv:secret@db1:5433,[::1],db3:/kvdb?target_session_attrs=read-write")
        #expect(list.endpoints == [.tcp(host: "db1", port: 5433), .tcp(host: "::1", port: 5432), .tcp(host: "db3", port: 5432)])
        #expect(list.endpoint == .tcp(host: "db1", port: 5433))
        #expect(list.targetSessionAttributes == .readWrite && list.user == "kv" && list.password == "secret" && list.database == "kvdb")
        #expect(list.description == "postgres://kv:***@db1:5433,[::1]:5432,db3:5432/kvdb?target_session_attrs=read-write")
        #expect(list.shownEndpoint == "db1:5433,[::1]:5432,db3:5432")
        let ports = try ServerURL("postgres://kv@db1,db2/kvdb?port=5433,5434")
        #expect(ports.endpoints == [.tcp(host: "db1", port: 5433), .tcp(host: "db2", port: 5434)])
        let onePort = try ServerURL("postgres://kv@db1:1,db2/kvdb?port=5433&sslmode=require")
        #expect(onePort.endpoints == [.tcp(host: "db1", port: 5433), .tcp(host: "db2", port: 5433)])
        #expect(onePort.description == "postgres://kv@db1:5433,db2:5433/kvdb?sslmode=require")
        let sockets = try ServerURL("postgres://kv@/kvdb?host=/run/a,/run/b&port=5433")
        #expect(sockets.endpoints == [.unixSocket(path: "/run/a/.s.PGSQL.5433"), .unixSocket(path: "/run/b/.s.PGSQL.5433")])
        for attributes in ServerURL.TargetSessionAttributes.allCases {
            #expect(try ServerURL("postgres://kv@db/kvdb?target_session_attrs=\(attributes.rawValue)").targetSessionAttributes == attributes)
        }
        #expect(try ServerURL("postgres://kv@db/kvdb").targetSessionAttributes == .any)
        #expect(try ServerURL(list.description.replacingOccurrences(of: "***", with: "secret")) == list)
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
        ("postgres://kv:pw@db1,,db3/db", "empty host"),
        ("postgres://kv:pw@db1:x,db2/db", "the port 'x'"),
        ("postgres://kv:pw@db1:5432:1/db", "the port '5432:1'"),
        ("postgres://kv:pw@[::1/db", "no closing ]"),
        ("postgres://kv:pw@db1,db2/db?port=1,2,3", "3 ports for 2 hosts"),
        ("postgres://kv:pw@db1,db2/db?target_session_attrs=read-only-ish", "unsupported target_session_attrs 'read-only-ish'"),
        ("postgres://kv:pw@db1,%2Frun/db?sslmode=require", "a Unix socket is local"),
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
