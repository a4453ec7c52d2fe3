#if PostgreSQL
import ArgumentParser
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import SyncGateway
#if canImport(Glibc)
import Glibc
#endif

extension Bench {
    /// `kvtool bench files`: the files that travel with the container (issue 49), through a sync gateway.
    struct Files: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "files",
            abstract: "Time the files' bytes through a sync gateway against COPY and a plain file copy; the gateway's RSS under many downloads; a record and its image from A to B.",
            discussion: """
                Starts its own cluster (fsync=off, loopback) and `kvtool sync gateway` processes. In one run: device A \
                uploads a --file-mib file through the gateway (the replicator's transfer engine: 1 MiB chunks, \
                HEAD then PUT at offsets) and device B downloads it (GET with Range, hashed, fsync, rename), against \
                COPY of the same bytes into a bytea table and out of it (binary COPY through psql, 1 MiB rows) and a \
                plain file copy (read, write, fsync); then --downloaders devices, each with its own credential, \
                download that file from a fresh gateway at once, and the gateway's peak RSS is given beside its \
                answer budget; then A writes a record and a --image-kib image under an eager prefix in one \
                transaction and syncs, --samples times, timed until B (a live replicator) has both.
                """)

        @Option(help: "MiB of the file uploaded and downloaded.") var fileMib = 64
        @Option(help: "Devices downloading the file at once.") var downloaders = 100
        @Option(help: "Record-and-image samples.") var samples = 40
        @Option(help: "KiB of each record's image.") var imageKib = 200

        func validate() throws {
            guard (1...64).contains(fileMib), (1...1_000).contains(downloaders), (1...10_000).contains(samples), (1...(64 << 10)).contains(imageKib) else {
                throw ValidationError("--file-mib must be 1 to 64, --downloaders 1 to 1000, --samples 1 to 10000, --image-kib 1 to 65536")
            }
        }

        func run() throws {
            let cluster = try LocalPostgresCluster()
            defer { try? cluster.stop() }
            // The gateway's process helpers of `bench gateway`, with its defaults (no push budgets to raise).
            let gateways = try GatewayScale.parse([])
            let (gateway, url) = try gateways.startGateway(cluster)
            defer { gateways.stop(gateway) }
            let group = "group.bench.files"
            let (tokenA, tokenB) = try blocking {
                (try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "a").token,
                 try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "b").token)
            }
            let prefixes: [(String, FileFetch)] = [("Bench/", .lazy(budget: 1 << 40)), ("TrainerImages/", .eager)]
            let a = try BenchDevice(group: group, .gateway(url, token: tokenA), files: prefixes)
            let b = try BenchDevice(group: group, .gateway(url, token: tokenB), files: prefixes)
            _ = try blocking { try await a.replicator.sync() }   // connected: not timed
            _ = try blocking { try await b.replicator.sync() }
            let size = fileMib << 20
            let bytes = Self.bytes(size, seed: 49)
            let mib = Double(size) / Double(1 << 20)
            print("PostgreSQL cluster on 127.0.0.1:\(cluster.port) (fsync=off), a sync gateway on \(url); a file of \(fileMib) MiB")
            Output.flush()

            // Through the gateway, as a device: A's upload, then B's download of the row A pushed.
            let path = "Bench/file.bin"
            try a.container.store.write(author: "app") { tx in _ = try a.container.files.write(bytes, to: path, in: tx) }
            let endpointA = Replicator.Endpoint.gateway(url, token: tokenA), endpointB = Replicator.Endpoint.gateway(url, token: tokenB)
            let uploadStart = Bench.now()
            let uploaded = try blocking { try await FileTransfers.upload(path: path, in: a.container, endpoint: endpointA, group: group) }
            let upload = mib / (Double(Bench.now() - uploadStart) / 1e9)
            guard uploaded.sentBytes == Int64(size) else { throw CLIError(.failure, "the upload sent \(uploaded.sentBytes) of \(size) bytes") }
            _ = try blocking { try await a.replicator.sync() }   // the manifest row, after its bytes
            _ = try blocking { try await b.replicator.sync() }   // B has the row; the prefix is lazy
            let downloadStart = Bench.now()
            let downloaded = try blocking { try await FileTransfers.download(path: path, in: b.container, endpoint: endpointB, group: group) }
            let download = mib / (Double(Bench.now() - downloadStart) / 1e9)
            guard downloaded == Int64(size), try b.container.files.readVerified(path) == Data(bytes) else {
                throw CLIError(.failure, "B downloaded \(downloaded) of \(size) bytes, or other bytes")
            }

            // The floors: COPY of the same bytes into a bytea table and out of it, a plain file copy.
            let directory = try Demo.temporaryDirectory("kvstore-bench-files-")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (copyIn, copyOut) = try copy(bytes, cluster: cluster, directory: directory)
            let fileCopy = try plainCopy(bytes, directory: directory)
            print(String(format: "%d MiB through the gateway (the device's transfer engine, 1 MiB chunks): upload %.1f MiB/s, download %.1f MiB/s; COPY into a bytea table %.1f MiB/s, out of it %.1f MiB/s; a plain file copy %.1f MiB/s; the gateway/COPY ratio: upload %.2f, download %.2f (goal: at least 0.5, within 2× of COPY)",
                         fileMib, upload, download, copyIn, copyOut, fileCopy, upload / copyIn, download / copyOut))
            Output.flush()

            try manyDownloads(sha256: SHA256Hasher.hash(bytes), size: size, group: group, cluster: cluster, gateways: gateways)
            try latency(a, b)
            _ = try? blocking { await a.replicator.close() }
            _ = try? blocking { await b.replicator.close() }
        }

        /// `count` bytes that look like nothing in particular (a generator, so that no layer compresses them).
        static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
            var state = seed | 1
            var bytes = [UInt8](repeating: 0, count: count)
            bytes.withUnsafeMutableBytes { buffer in
                var index = 0
                while index < count {
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17
                    withUnsafeBytes(of: state) { word in
                        let take = min(8, count - index)
                        buffer.baseAddress!.advanced(by: index).copyMemory(from: word.baseAddress!, byteCount: take)
                    }
                    index += 8
                }
            }
            return bytes
        }

        /// MiB/s of binary COPY of `bytes` (1 MiB rows) into a bytea table, then out of it to a file, each
        /// through psql's `\copy` (its start, a few ms, included).
        private func copy(_ bytes: [UInt8], cluster: LocalPostgresCluster, directory: String) throws -> (in: Double, out: Double) {
            // PGCOPY: the signature, flags and header extension; per row a field count, a length and the
            // bytes; -1 at the end.
            var file: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [0, 0, 0, 0] + [0, 0, 0, 0]
            file.reserveCapacity(bytes.count + 4_096)
            for start in stride(from: 0, to: bytes.count, by: 1 << 20) {
                let row = bytes[start..<min(bytes.count, start + (1 << 20))]
                file += [0, 1]
                file += withUnsafeBytes(of: UInt32(row.count).bigEndian, Array.init)
                file += row
            }
            file += [0xFF, 0xFF]
            let input = directory + "/in.copy", output = directory + "/out.copy"
            try Data(file).write(to: URL(fileURLWithPath: input))
            chmod(input, 0o644)
            chmod(directory, 0o777)   // psql may run as the cluster's user, and writes the copy out here
            _ = try cluster.psql("CREATE TABLE bench_files_copy (data bytea)")
            let inStart = Bench.now()
            _ = try cluster.psql("\\copy bench_files_copy (data) FROM '\(input)' WITH (FORMAT binary)")
            let seconds = Double(Bench.now() - inStart) / 1e9
            let outStart = Bench.now()
            _ = try cluster.psql("\\copy bench_files_copy TO '\(output)' WITH (FORMAT binary)")
            let outSeconds = Double(Bench.now() - outStart) / 1e9
            let stored = try cluster.psql("SELECT sum(octet_length(data)) FROM bench_files_copy").trimmingCharacters(in: .whitespacesAndNewlines)
            let written = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0
            guard stored == String(bytes.count), written == file.count else {
                throw CLIError(.failure, "COPY stored \(stored) of \(bytes.count) bytes and wrote \(written) of \(file.count)")
            }
            let mib = Double(bytes.count) / Double(1 << 20)
            return (mib / seconds, mib / outSeconds)
        }

        /// MiB/s of a plain copy of a file of `bytes`: 1 MiB reads and writes, then fsync (as a download ends).
        private func plainCopy(_ bytes: [UInt8], directory: String) throws -> Double {
            let source = directory + "/source.bin", target = directory + "/target.bin"
            try Data(bytes).write(to: URL(fileURLWithPath: source))
            let start = Bench.now()
            let input = open(source, O_RDONLY | O_CLOEXEC), output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            defer { close(input); close(output) }
            guard input >= 0, output >= 0 else { throw CLIError(.failure, "cannot open the copy's files: \(String(cString: strerror(errno)))") }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var copied = 0
            while true {
                let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress!, $0.count) }
                guard count >= 0 else { throw CLIError(.failure, "cannot read the copy's source: \(String(cString: strerror(errno)))") }
                if count == 0 { break }
                try buffer.withUnsafeBytes { try SystemCall.writeAll(output, UnsafeRawBufferPointer(rebasing: $0[0..<count]), path: target) }
                copied += count
            }
            guard fsync(output) == 0, copied == bytes.count else { throw CLIError(.failure, "the plain copy copied \(copied) of \(bytes.count) bytes") }
            return Double(copied) / Double(1 << 20) / (Double(Bench.now() - start) / 1e9)
        }

        /// `downloaders` devices of `group`, each with a credential of its own, download the blob at once
        /// through a gateway started for them (so that its peak RSS is theirs alone); each checks the hash
        /// and keeps nothing.
        private func manyDownloads(sha256: [UInt8], size: Int, group: String, cluster: LocalPostgresCluster, gateways: GatewayScale) throws {
            let (gateway, url) = try gateways.startGateway(cluster)
            defer { gateways.stop(gateway) }
            let pid = gateway.process.processIdentifier
            let count = downloaders
            let tokens = try blocking {
                var tokens: [String] = []
                for index in 0..<count { tokens.append(try await SyncTokens.issue(on: cluster.tcpURL, group: group, device: "reader-\(index)").token) }
                return tokens
            }
            let idle = residentMemory(of: pid)
            let start = Bench.now()
            let sampler = Locked(0.0)
            let sampling = Task {
                while !Task.isCancelled {
                    let now = residentMemory(of: pid).now
                    sampler.withLock { $0 = max($0, now) }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            defer { sampling.cancel() }
            let total = try blocking {
                try await withThrowingTaskGroup(of: Int64.self) { tasks in
                    for token in tokens {
                        tasks.addTask { try await FileTransfers.fetch(sha256: sha256, group: group, from: .gateway(url, token: token)) { _ in } }
                    }
                    return try await tasks.reduce(0, +)
                }
            }
            let seconds = Double(Bench.now() - start) / 1e9
            let peak = residentMemory(of: pid).peak
            guard total == Int64(downloaders) * Int64(size) else { throw CLIError(.failure, "the devices downloaded \(total) of \(downloaders * size) bytes") }
            let budget = Double(SyncGateway.Limits().maxAnswerBytes) / Double(1 << 20)
            print(String(format: "%d devices (a credential each) downloading the same %d MiB file at once, each hashing it: %.1f s, %.1f MiB/s in all; gateway RSS idle %.1f MiB, peak %.1f MiB (sampled every 20 ms: %.1f MiB), against its answer budget of %.0f MiB",
                         downloaders, fileMib, seconds, Double(total) / Double(1 << 20) / seconds, idle.now, peak, sampler.withLock { $0 }, budget))
            Output.flush()
        }

        /// A writes a trainer record and its image under the eager prefix in one transaction and syncs;
        /// timed until B, a live replicator, has the record and the image's bytes present.
        private func latency(_ a: BenchDevice, _ b: BenchDevice) throws {
            let live = Task { try await b.replicator.run() }
            defer { live.cancel() }
            var latencies: [Double] = []
            for sample in 0..<samples {
                let image = Self.bytes(imageKib << 10, seed: UInt64(1_000 + sample))
                let key = "trainer-\(sample)", path = "TrainerImages/\(sample).png"
                let start = Bench.now()
                try a.container.store.write(author: "app") { tx in
                    try a.collection.put(#"{"image":"\#(path)"}"#, forKey: key, in: tx)
                    _ = try a.container.files.write(image, to: path, in: tx)
                }
                _ = try blocking { try await a.replicator.sync() }
                let deadline = start + 30_000_000_000
                while try b.value(key) == nil || (try? b.container.files.localState(for: path))?.state != .present {
                    guard Bench.now() < deadline else { throw CLIError(.failure, "B did not have \(key) and its image within 30 s") }
                    usleep(200)
                }
                latencies.append(Double(Bench.now() - start) / 1e6)
                guard try b.container.files.readVerified(path) == Data(image) else { throw CLIError(.failure, "B's \(path) is not A's image") }
            }
            live.cancel()
            latencies.sort()
            func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            print(String(format: "a trainer record and its %d KiB image (eager prefix TrainerImages/), A's write and sync until B (live, through the gateway) has both, %d samples: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms",
                         imageKib, samples, percentile(0.5), percentile(0.9), percentile(0.99), latencies.last ?? 0))
        }
    }
}
#endif
