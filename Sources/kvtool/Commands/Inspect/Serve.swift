#if Serve
import ArgumentParser
import Foundation
import HTTPServerKit
import KVStore

/// `kvtool serve`: a live view of the container in a browser.
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a live view of the container to a browser on this machine.",
        discussion: """
            Shows the catalog, collections page by page with search by prefix or range, the defaults \
            suites, the Files/ tree with its images, a live timeline of every process's commits, the \
            history consumers and their lag, the snapshots and their checksums, the reader slots, and \
            the checklist dashboard as a chart. Listens on 127.0.0.1 only. Every request needs the \
            random token in the URL it prints (the page then keeps it in a cookie named for the port); any \
            other gets 403, and so does a request a page of another origin (another port of 127.0.0.1 \
            included) makes. Read-only unless --allow-writes. Runs until interrupted.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: "The port on 127.0.0.1 (0: any free port).") var port: Int = 8390
    @Flag(help: "Open the store read-write and accept POST /api/put and /api/delete.") var allowWrites = false
    @Option(help: "Seconds a request's head and body may take to arrive; a slower client is disconnected.")
    var requestTimeout: Int = Int(ServeLimits.requestTimeout.components.seconds)

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be from 0 to 65535, got \(port)") }
        guard (1...3600).contains(requestTimeout) else {
            throw ValidationError("--request-timeout must be from 1 to 3600 seconds, got \(requestTimeout)")
        }
    }

    func run() throws {
        let container = try global.openContainer(readOnly: !allowWrites, clearStaleReaders: false)
        let server = ServeServer(api: ServeAPI(container: container, allowWrites: allowWrites, author: global.author),
                                 feed: CommitFeed(container: container), requestTimeout: .seconds(requestTimeout))
        let failure = Locked<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let (group, json, mode) = (container.groupIdentifier.rawValue, global.json, allowWrites ? "writes allowed" : "read-only")
        Task {
            do {
                try await server.run(port: port) { [token = server.token] bound in
                    let url = "http://127.0.0.1:\(bound)/?token=\(token)"
                    if json {
                        print((try? Output.line(["url": .string(url), "port": .integer(bound), "group": .string(group)])) ?? "")
                    } else {
                        print("serving \(group) at \(url) (\(mode))")
                    }
                    Output.flush()
                }
            } catch {
                failure.withLock { $0 = error }
            }
            done.signal()
        }
        done.wait()
        if let error = failure.withLock({ $0 }) {
            if isAddressInUse(error) {
                throw CLIError(.failure, "port \(port) on 127.0.0.1 is in use: pass --port N, or --port 0 for any free port")
            }
            throw CLIError(.failure, "kvtool serve stopped: \(error)")
        }
    }
}
#endif
