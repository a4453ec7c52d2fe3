import CLMDB
import Foundation
import KVStore
import Testing
import TestSupport

/// Each ``Durability`` mode sets exactly the LMDB environment flags its documentation names
/// (`MDB_NOMETASYNC`, `MDB_NOSYNC`), read back from LMDB with `mdb_env_get_flags`: in a fresh store,
/// in a second process opening an existing store (the mode is per process, whatever the creator
/// chose), and in the creator after the other process opened. No mode may set the flags that weaken
/// durability further than documented (`MDB_MAPASYNC`, `MDB_WRITEMAP`).
@Suite struct DurabilityFlagsTests {
    let dir = TemporaryDirectory()

    /// The flags that decide what a commit flushes.
    static let syncFlags = UInt32(MDB_NOSYNC | MDB_NOMETASYNC | MDB_MAPASYNC | MDB_WRITEMAP)

    /// What Durability.swift documents for each mode.
    static func documented(_ mode: Durability) -> UInt32 {
        switch mode {
        case .durable: 0
        case .noMetaSync: UInt32(MDB_NOMETASYNC)
        case .noSync: UInt32(MDB_NOSYNC)
        }
    }

    func container(_ group: String, _ mode: Durability) throws -> SharedContainer {
        var options = SharedContainer.Options()
        options.store.durability = mode
        return try dir.container(group, options: options)
    }

    @Test(.blockingWork, arguments: Durability.allCases)
    func aFreshStoreHasExactlyTheDocumentedFlags(mode: Durability) throws {
        let container = try container("group.com.example.flags.\(mode)", mode)
        let flags = try container.store.environmentFlags
        #expect(flags & Self.syncFlags == Self.documented(mode), "\(mode): flags \(String(flags, radix: 16))")
        // The environment is opened MDB_NOTLS (Environment.swift says why), never read-only here.
        #expect(flags & UInt32(MDB_NOTLS) != 0)
        #expect(flags & UInt32(MDB_RDONLY) == 0)
        // A plain Store in a directory of its own, too.
        var options = Store.Options()
        options.durability = mode
        let store = try dir.store("plain-\(mode)", options: options)
        #expect(try store.environmentFlags & Self.syncFlags == Self.documented(mode))
    }

    /// Every pair (creator's mode, second process's mode): the second process gets its own mode's
    /// flags, and the creator keeps its own.
    @Test(.blockingWork, arguments: Durability.allCases)
    func aSecondProcessGetsTheFlagsOfItsOwnMode(creator: Durability) throws {
        let group = "group.com.example.second.\(creator)"
        let container = try container(group, creator)
        for other in Durability.allCases {
            let result = try helper(["env-flags", dir.path, group, other.rawValue])
            #expect(result.status == 0, "\(result.stderr)")
            let flags = result.stdout.split(separator: "\n").first { $0.hasPrefix("flags ") }.flatMap { UInt32($0.dropFirst(6)) }
            #expect(flags.map { $0 & Self.syncFlags } == Self.documented(other), "creator \(creator), second \(other): \(result.stdout)")
            #expect(try container.store.environmentFlags & Self.syncFlags == Self.documented(creator))
        }
    }

    /// A second handle in the same process shares the one environment (LMDB allows one per process).
    /// Every pair (first handle's mode, second's): the environment commits in the stronger of the two,
    /// so a `durable` handle opened after a `noSync` one really is durable (before the fix it silently
    /// kept `MDB_NOSYNC` while its options said `durable`), and a weaker second handle weakens nothing.
    @Test(.blockingWork, arguments: Durability.allCases)
    func bothHandlesCommitInTheStrongerOfTheirModes(first: Durability) throws {
        for second in Durability.allCases {
            let group = "group.com.example.pair.\(first).\(second)"
            let one = try container(group, first)
            let two = try container(group, second)
            let stronger = first.rawValue == second.rawValue ? first
                : [first, second].contains(.durable) ? .durable : .noMetaSync
            #expect(try two.store.environmentFlags & Self.syncFlags == Self.documented(stronger), "first \(first), second \(second)")
            #expect(try one.store.environmentFlags == two.store.environmentFlags)
            // A read-only handle asks for nothing.
            var readOnly = SharedContainer.Options()
            readOnly.readOnly = true
            readOnly.store.durability = .durable
            if stronger != .durable {
                let three = try dir.container("group.com.example.pair.\(first).\(second)", options: readOnly)
                _ = three
                #expect(try one.store.environmentFlags & Self.syncFlags == Self.documented(stronger))
            }
        }
    }

    /// A second handle asking for the same mode has the first handle's flags.
    @Test(.blockingWork, arguments: Durability.allCases)
    func aSecondHandleInTheSameProcessHasTheSameFlags(mode: Durability) throws {
        let group = "group.com.example.handle.\(mode)"
        let first = try container(group, mode)
        let second = try container(group, mode)
        #expect(try second.store.environmentFlags == first.store.environmentFlags)
        #expect(try second.store.environmentFlags & Self.syncFlags == Self.documented(mode))
    }
}
