// Files that travel with the container (issue 49): a writer of records and their files in one
// transaction each, and a resumable upload to kill halfway.
import Foundation
import KVStore
import SyncKit
#if PostgreSQL
import SyncKitPostgres
#endif

/// The bytes `files-write` and `files-writer` write: `size` bytes from a generator seeded with `seed`.
func fileBytes(size: Int, seed: UInt64) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: size)
    for i in 0..<size {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        bytes[i] = UInt8(truncatingIfNeeded: state)
    }
    return bytes
}

func fileCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "files-writer":
        // files-writer ROOT GROUP COUNT: declares `img/` replicated, then COUNT times, in one
        // transaction each, writes the note `img/I.png` → the file's SHA-256 (hex) in the collection
        // `notes` and the file (4 KiB to 68 KiB) at `img/I.png`. Prints "ok COUNT".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        try FileManifest.declare(prefix: "img/", fetch: .eager, in: container.store)
        let notes = try container.store.collection("notes", key: String.self, value: String.self)
        let count = Int(rest[0])!
        for i in 0..<count {
            let bytes = fileBytes(size: 4096 + (i % 17) * 4096, seed: UInt64(i))
            let path = "img/\(i).png"
            try container.store.write(author: "app") { tx in
                try notes.put(SHA256Hasher.hex(SHA256Hasher.hash(bytes)), forKey: path, in: tx)
                try container.files.write(bytes, to: path, in: tx)
            }
        }
        print("ok \(count)")
    case "files-write":
        // files-write ROOT GROUP PATH SIZE SEED: declares PATH's first directory replicated and writes
        // SIZE bytes from SEED at PATH in a transaction. Prints the SHA-256 (hex).
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let path = rest[0]
        try FileManifest.declare(prefix: String(path.split(separator: "/")[0]), fetch: .eager, in: container.store)
        let bytes = fileBytes(size: Int(rest[1])!, seed: UInt64(rest[2])!)
        try container.store.write(author: "app") { tx in _ = try container.files.write(bytes, to: path, in: tx) }
        print(SHA256Hasher.hex(SHA256Hasher.hash(bytes)))
    case "files-upload":
        // files-upload ROOT GROUP URL PATH [PAUSE_AT]: uploads the bytes the manifest row of PATH names
        // to the database at URL for group GROUP, printing "at N" (flushed) after each chunk the server
        // accepted, then "ok resumed R sent S complete C". With PAUSE_AT, once the server holds that
        // many bytes it prints "paused" and stops there until killed (a `kill -9` halfway).
        #if PostgreSQL
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let url = try ServerURL(rest[0])
        let pauseAt = rest.count > 2 ? Int64(rest[2])! : Int64.max
        let outcome = Locked<Result<FileUploadReport, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let report = try await FileTransfers.upload(path: rest[1], in: container, server: url, group: group) { received in
                    print("at \(received)")
                    if received >= pauseAt {
                        print("paused")
                        fflush(nil)
                        while true { sleep(60) }
                    }
                    fflush(nil)
                }
                outcome.withLock { $0 = .success(report) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        switch outcome.withLock({ $0 })! {
        case .success(let report):
            print("ok resumed \(report.resumedFrom) sent \(report.sentBytes) complete \(report.alreadyComplete)")
        case .failure(let error):
            print("error \(error)")
            exit(2)
        }
        #else
        fail("files-upload needs the PostgreSQL trait")
        #endif
    case "files-read-loop":
        // files-read-loop ROOT GROUP PATH HEX SECONDS: prints "reading", then reads Files/PATH with the
        // plain read over and over until it holds the bytes hashing to HEX (or SECONDS pass), counting
        // what each read saw: nothing, those bytes, or anything else (a half file). Prints
        // "reads N missing M whole W other O".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let deadline = Date(timeIntervalSinceNow: Double(rest[2])!)
        var (reads, missing, whole, other) = (0, 0, 0, 0)
        print("reading")
        fflush(nil)
        while Date() < deadline && whole == 0 {
            reads += 1
            do {
                let data = try container.files.read(rest[0])
                if SHA256Hasher.hex(SHA256Hasher.hash(Array(data))) == rest[1] { whole += 1 } else { other += 1 }
            } catch KVStoreError.fileNotFound {
                missing += 1
            }
        }
        print("reads \(reads) missing \(missing) whole \(whole) other \(other)")
    default:
        return false
    }
    return true
}
