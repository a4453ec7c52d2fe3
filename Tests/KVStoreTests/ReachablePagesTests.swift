import Foundation
@testable import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// ``ReachablePages`` on data files written page by page, as a process that can write the container
/// could plant them: cycles, page numbers past the end or absurd, node offsets outside their page,
/// overflow runs of 2³² pages, deep chains. The walk ends, never traps, reads each page at most once,
/// and names the lowest page it reaches past the end of the file.
@Suite struct ReachablePagesTests {
    let dir = TemporaryDirectory()

    /// A data file under construction: `pageSize`-byte pages, meta pages 0 and 1.
    struct File {
        let pageSize: Int
        var pages: [[UInt8]]

        init(pageSize: Int = 512, pages count: Int, lastPage: UInt64, freeRoot: UInt64 = .max, mainRoot: UInt64) {
            self.pageSize = pageSize
            pages = Array(repeating: [UInt8](repeating: 0, count: pageSize), count: count)
            for meta in 0..<2 {
                put(UInt32(0xBEEF_C0DE), page: meta, at: 16)
                put(freeRoot, page: meta, at: 16 + 24 + 40)
                put(mainRoot, page: meta, at: 16 + 72 + 40)
                put(lastPage, page: meta, at: 16 + 120)
                put(UInt64(meta + 1), page: meta, at: 16 + 128)  // page 1 is the newer
            }
        }

        mutating func put<T: FixedWidthInteger>(_ value: T, page: Int, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { pages[page].replaceSubrange(offset..<offset + $0.count, with: $0) }
        }

        /// A branch page whose nodes point at `children`.
        mutating func branch(_ page: Int, children: [UInt64]) {
            put(UInt16(0x01), page: page, at: 10)
            put(UInt16(16 + 2 * children.count), page: page, at: 12)
            var offset = pageSize
            for (index, child) in children.enumerated() {
                offset -= 8
                put(UInt16(offset), page: page, at: 16 + 2 * index)
                put(UInt16(truncatingIfNeeded: child), page: page, at: offset)
                put(UInt16(truncatingIfNeeded: child >> 16), page: page, at: offset + 2)
                put(UInt16(truncatingIfNeeded: child >> 32), page: page, at: offset + 4)
            }
        }

        enum Node { case overflow(first: UInt64, size: UInt32), database(root: UInt64), inline }

        /// A leaf page holding `nodes`, each with a one-byte key.
        mutating func leaf(_ page: Int, nodes: [Node]) {
            put(UInt16(0x02), page: page, at: 10)
            put(UInt16(16 + 2 * nodes.count), page: page, at: 12)
            var offset = pageSize
            for (index, node) in nodes.enumerated() {
                let (flags, size, data): (UInt16, UInt32, [UInt8]) = switch node {
                case .overflow(let first, let size): (0x01, size, withUnsafeBytes(of: first.littleEndian) { Array($0) })
                case .database(let root): (0x02, 48, [UInt8](repeating: 0, count: 40) + withUnsafeBytes(of: root.littleEndian) { Array($0) })
                case .inline: (0, 4, [1, 2, 3, 4])
                }
                offset -= 8 + 1 + data.count
                offset &= ~1
                put(UInt16(offset), page: page, at: 16 + 2 * index)
                put(UInt16(truncatingIfNeeded: size), page: page, at: offset)
                put(UInt16(truncatingIfNeeded: size >> 16), page: page, at: offset + 2)
                put(flags, page: page, at: offset + 4)
                put(UInt16(1), page: page, at: offset + 6)
                pages[page][offset + 8] = 0x61
                pages[page].replaceSubrange(offset + 9..<offset + 9 + data.count, with: data)
            }
        }

        /// An overflow page's header: a run of `count` pages.
        mutating func overflowHeader(_ page: Int, count: UInt32) {
            put(UInt16(0x04), page: page, at: 10)
            put(count, page: page, at: 12)
        }
    }

    /// Writes `file` and walks it.
    func walk(_ file: File, name: String = #function) throws -> ReachablePages.Outcome {
        let path = dir.path + "/" + name.filter(\.isLetter)
        try Data(file.pages.joined()).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let meta = try #require(ReachablePages.newestMeta(fd, pageSize: file.pageSize))
        return ReachablePages.walk(fd, pageSize: file.pageSize, filePages: UInt64(file.pages.count), meta: meta)
    }

    @Test func aCycleEndsAndEachPageIsReadOnce() throws {
        var file = File(pages: 4, lastPage: 10, mainRoot: 2)
        file.branch(2, children: [2, 3, 3, 2])
        file.branch(3, children: [2, 3, 9])
        let outcome = try walk(file)
        #expect(outcome == .init(firstMissing: 9, highest: 9, pagesRead: 2))
    }

    @Test func pagesPastTheLastPageAreLeftToLMDB() throws {
        // mdb_page_get answers MDB_PAGE_NOTFOUND for them, without touching the map.
        var file = File(pages: 4, lastPage: 5, mainRoot: 2)
        file.branch(2, children: [6, 1 << 40, (1 << 48) - 1, 0, 1, 3])
        file.leaf(3, nodes: [.overflow(first: 200, size: 100), .database(root: .max), .database(root: 77)])
        #expect(try walk(file) == .init(firstMissing: nil, highest: 3, pagesRead: 2))
    }

    @Test func offsetsOutsideTheirPageAreSkipped() throws {
        var file = File(pages: 4, lastPage: 100, mainRoot: 2)
        file.put(UInt16(0x01), page: 2, at: 10)
        file.put(UInt16.max, page: 2, at: 12)  // mp_lower: more nodes than a page can hold
        for index in 0..<(512 - 16) / 2 { file.put(UInt16(index % 2 == 0 ? 0xFFFF : 508), page: 2, at: 16 + 2 * index) }
        file.leaf(3, nodes: [.overflow(first: 2, size: .max)])
        file.put(UInt16(0x7FF0), page: 3, at: 16 + 0)
        let outcome = try walk(file)
        #expect(outcome.pagesRead == 1)
    }

    @Test func anOverflowRunIsAsLongAsItsValueOrItsHeaderSaysWhicheverIsLonger() throws {
        var file = File(pages: 8, lastPage: 40, mainRoot: 2)
        // 3 pages by its size (2,000 bytes + the 16-byte header, 512-byte pages: 4 pages), 6 by its header.
        file.leaf(2, nodes: [.overflow(first: 3, size: 1_500), .inline])
        file.overflowHeader(3, count: 2)
        #expect(try walk(file) == .init(firstMissing: nil, highest: 5, pagesRead: 1))
        file.overflowHeader(3, count: 6)
        #expect(try walk(file, name: "longer") == .init(firstMissing: 8, highest: 8, pagesRead: 1))
        file.overflowHeader(3, count: .max)
        #expect(try walk(file, name: "absurd") == .init(firstMissing: 8, highest: 3 + UInt64(UInt32.max) - 1, pagesRead: 1))
    }

    @Test func namedDatabasesAndTheFreeListAreWalked() throws {
        var file = File(pages: 6, lastPage: 30, freeRoot: 5, mainRoot: 2)
        file.leaf(2, nodes: [.database(root: 3), .database(root: 4)])
        file.branch(3, children: [20])
        file.leaf(4, nodes: [.database(root: 2)])  // back to the main tree: a cycle through a database record
        file.leaf(5, nodes: [.overflow(first: 12, size: 100)])
        #expect(try walk(file) == .init(firstMissing: 12, highest: 20, pagesRead: 4))
    }

    /// 20,000 branch pages in a chain: no recursion, so no stack to exhaust.
    @Test func aDeepChainIsWalkedWithoutRecursion() throws {
        let count = 20_000
        var file = File(pages: count, lastPage: UInt64(count + 10), mainRoot: 2)
        for page in 2..<count { file.branch(page, children: [UInt64(page + 1)]) }
        #expect(try walk(file) == .init(firstMissing: UInt64(count), highest: UInt64(count), pagesRead: count - 2))
    }

    /// Random pages: whatever they hold, the walk ends and reads each page at most once.
    @Test func randomPagesNeverTrap() throws {
        var generator = SystemRandomNumberGenerator()
        let seed = UInt64.random(in: 1...UInt64.max, using: &generator)
        var rng = SplitMix(seed: seed)
        for round in 0..<300 {
            let count = 3 + Int(rng.next() % 40)
            var file = File(pages: count, lastPage: rng.next() % 2 == 0 ? rng.next() % 80 : rng.next(),
                            freeRoot: rng.next() % 50, mainRoot: rng.next() % 50)
            for page in 2..<count {
                for offset in stride(from: 0, to: file.pageSize, by: 8) { file.put(rng.next() & (rng.next() % 3 == 0 ? 0xFFFF_00FF_0003_00FF : .max), page: page, at: offset) }
                switch rng.next() % 4 {
                case 0: file.branch(page, children: (0..<(rng.next() % 8)).map { _ in rng.next() % 60 })
                case 1: file.leaf(page, nodes: (0..<(rng.next() % 6)).map { _ in rng.next() % 2 == 0 ? .overflow(first: rng.next() % 60, size: UInt32(truncatingIfNeeded: rng.next())) : .database(root: rng.next() % 60) })
                default: break
                }
            }
            let outcome = try walk(file, name: "random\(round)")
            #expect(outcome.pagesRead <= count - 2, "seed \(seed), round \(round)")
        }
    }
}

/// SplitMix64, for the random pages (the seed is printed in a failure).
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
