// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "KVStore",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "KVStore", targets: ["KVStore"]),
        // Only for the benchmarks' raw C LMDB floor (a package of its own, which must link the very same
        // liblmdb through the very same module as KVStore: a second module map over lmdb.h would give
        // it a second, incompatible set of C types). No library API shows LMDB's types: KVStore
        // imports CLMDB `internal`ly, in its LMDB/ folder alone (scripts/check-imports.py).
        .library(name: "CLMDB", targets: ["CLMDB"]),
        .library(name: "SyncKit", targets: ["SyncKit"]),
        .library(name: "Workloads", targets: ["Workloads"]),
        // Replication of containers across machines through PostgreSQL (postgres-nio, SwiftNIO).
        .library(name: "SyncKitPostgres", targets: ["SyncKitPostgres"]),
        // The sync gateway: devices that are not trusted with the database's credentials sync through
        // it, each with a credential of its own group (SyncKitPostgres, HTTP on SwiftNIO).
        .library(name: "SyncGateway", targets: ["SyncGateway"]),
        .executable(name: "kvtool", targets: ["kvtool"]),
        // The seeds' notification extension and widget as lean processes of their own: no
        // swift-argument-parser, no Foundation (FoundationEssentials only), read-only opens.
        .executable(name: "trainer-extension", targets: ["TrainerExtension"]),
        .executable(name: "checklist-widget", targets: ["ChecklistWidget"]),
        // The push SDK's notification service extension (seed 003): it records the notification and
        // asks the container's sync service for it to reach the server before it exits (SyncKit's
        // request, which links no networking).
        .executable(name: "push-extension", targets: ["PushExtension"]),
    ],
    // `PostgreSQL` (on by default) builds SyncKitPostgres on postgres-nio and `kvtool sync`; `Serve` (on
    // by default) builds `kvtool serve` on SwiftNIO's HTTP server. Without them
    // (`--disable-default-traits`, as the sanitizer runs build) nothing of NIO is built: SyncKitPostgres
    // is empty and kvtool has neither `sync` nor `serve`. KVStore, SyncKit and Workloads never depend
    // on NIO either way.
    traits: [
        .trait(name: "PostgreSQL", description: "Replication across machines through PostgreSQL (SyncKitPostgres, kvtool sync)"),
        .trait(name: "Serve", description: "kvtool serve: a live view of a container in a browser (SwiftNIO's HTTP server)"),
        .default(enabledTraits: ["PostgreSQL", "Serve"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // `kvtool serve`'s HTTP server (NIOHTTP1 on NIOPosix), with the `Serve` trait: postgres-nio builds
        // on the same SwiftNIO.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // SHA-256 of device tokens (postgres-nio already builds it, for SCRAM).
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3" ..< "5.0.0"),
        // TLS between devices and the sync gateway (postgres-nio already builds it).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        // CBOR, the JSON projection, hex and base64: formats with no store behind them (no LMDB, no
        // logging, no KVStoreError), so that they build, are tested and are fuzzed on their own. KVStore
        // re-exports them (`@_exported import Codecs`): `import KVStore` sees what it always saw.
        .target(name: "Codecs"),
        .target(name: "KVStore", dependencies: ["CLMDB", "Codecs", .product(name: "Logging", package: "swift-log")]),
        .target(name: "SyncKit", dependencies: ["KVStore", "Codecs"]),
        .target(name: "Workloads", dependencies: ["KVStore", "SyncKit"]),
        // The sync gateway's wire format, and the parsing of everything a device sends it (the request
        // line, the headers it is admitted on, a push body, a JWT): no networking and no database, so
        // that the fuzz harness (`make fuzz`, target `gateway`) compiles it as it is.
        .target(name: "SyncWire", dependencies: ["KVStore", "Codecs"]),
        .target(
            name: "SyncKitPostgres",
            dependencies: [
                "KVStore", "SyncKit", "SyncWire", "HTTPServerKit",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["PostgreSQL"])),
            ]
        ),
        // A throwaway PostgreSQL cluster (fsync=off) for tests, demos and benchmarks: not in any product,
        // so no app links it.
        .target(name: "PostgresTesting", dependencies: ["KVStore", "SyncKitPostgres"]),
        // What the sync gateway, its client and `kvtool serve` share of HTTP over SwiftNIO (empty without
        // both traits).
        .target(
            name: "HTTPServerKit",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["PostgreSQL", "Serve"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["PostgreSQL", "Serve"])),
            ]
        ),
        .target(
            name: "SyncGateway",
            dependencies: [
                "KVStore", "Codecs", "SyncWire", "SyncKitPostgres", "HTTPServerKit",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["PostgreSQL"])),
            ]
        ),
        .executableTarget(
            name: "kvtool",
            dependencies: [
                "KVStore", "Codecs", "SyncKit", "Workloads", "SyncKitPostgres", "SyncGateway", "HTTPServerKit", "PostgresTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Serve"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Serve"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["Serve"])),
            ],
            // `kvtool serve`'s page: plain HTML, CSS and JavaScript, compiled into the binary as bytes
            // (no bundle to find at run time, no build step).
            resources: [
                .embedInCode("Serve/Assets/index.html"),
                .embedInCode("Serve/Assets/app.css"),
                .embedInCode("Serve/Assets/app.js"),
            ]
        ),
        // The README's example, word for word (ReadmeExampleTests checks that it still is).
        .executableTarget(name: "ReadmeExample", dependencies: ["KVStore", "SyncKit"], path: "Examples/ReadmeExample"),
        .target(name: "LeanProcess", swiftSettings: leanMetadata),
        // The Swift runtime and FoundationEssentials linked in statically: no dynamic relocations of
        // libswiftCore and no shared-library loading at start-up. Measured (benchmarks/baseline.md, "Lean processes"):
        // the extension's peak RSS went from 15.2 to 11.0 - 11.4 MiB.
        .executableTarget(name: "TrainerExtension", dependencies: ["LeanProcess", "Workloads"],
                          swiftSettings: leanMetadata, linkerSettings: leanLinking),
        .executableTarget(name: "ChecklistWidget", dependencies: ["LeanProcess", "KVStore", "SyncKit", "Workloads"],
                          swiftSettings: leanMetadata, linkerSettings: leanLinking),
        // Linked as the other two are, as a PIE: `-no-pie` measured 1.2 MiB less peak RSS (the static
        // runtime's 41,000 relocations resolved at link time, not applied at each start), at the price of
        // the executable's own code at a fixed address: not taken for a process that parses untrusted
        // payloads (benchmarks/baseline.md, "Sync requests from any process"). `leanLinking`'s packed
        // relocations (DT_RELR) got most of that back, with the PIE kept.
        .executableTarget(name: "PushExtension", dependencies: ["LeanProcess", "KVStore", "SyncKit", "Workloads"],
                          swiftSettings: leanMetadata, linkerSettings: leanLinking),
        // A small program the multi-process tests start as a second (third, …) process.
        .executableTarget(
            name: "kvtest-helper",
            dependencies: ["KVStore", "SyncKit", "Workloads", "TestSupport", "SyncKitPostgres"],
            path: "Tests/Helper"
        ),
        // Temporary containers and process runners shared by the test targets.
        .target(name: "TestSupport", dependencies: ["KVStore"], path: "Tests/TestSupport"),
        // Devices, gateways and raw HTTP for the replication and gateway tests.
        .target(name: "SyncTestSupport", dependencies: ["KVStore", "SyncKit", "SyncKitPostgres", "PostgresTesting", "TestSupport"],
                path: "Tests/SyncTestSupport"),
        // Replication through a real PostgreSQL cluster the tests start and stop themselves.
        .testTarget(name: "SyncKitPostgresTests", dependencies: [
            "KVStore", "SyncKit", "SyncWire", "SyncKitPostgres", "SyncGateway", "Workloads", "TestSupport", "SyncTestSupport", "PostgresTesting",
            .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["PostgreSQL"])),
            // BlobServerTests run the blob statements in transactions scoped as a gateway scopes them.
            .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
        ]),
        // The gateway's rooms type by type, without a database or a process: the LRU, the limiters, the
        // live hub (registry and fan-out, on embedded channels), what /metrics renders, the resync queue,
        // the push budgets (empty without the PostgreSQL trait, as SyncGateway is).
        .testTarget(name: "SyncGatewayTests", dependencies: [
            "KVStore", "SyncWire", "SyncKitPostgres", "SyncGateway", "HTTPServerKit",
            .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
            .product(name: "NIOEmbedded", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
            .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
        ]),
        // A malicious device against real gateway processes, through the wire format: impersonation, the
        // clock bound, framing, smuggling, bodies before authentication, slow readers, JWTs, TLS and
        // revocation (RELIABILITY.md's sync threat model names the test of each finding).
        .testTarget(name: "GatewayAdversarialTests", dependencies: [
            "KVStore", "SyncKit", "SyncWire", "SyncKitPostgres", "PostgresTesting", "TestSupport", "SyncTestSupport",
            .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["PostgreSQL"])),
        ]),
        // The properties the fuzz harnesses check (fuzz/Targets, built by scripts/fuzz.sh with
        // swiftc, which compiles these same files), so that the replay tests check the same ones.
        .target(name: "FuzzProperties", dependencies: ["KVStore"], path: "fuzz/Properties"),
        // The same for the sync gateway's parsers of what devices send (SyncWire).
        .target(name: "GatewayFuzzProperties", dependencies: ["KVStore", "SyncWire", "FuzzProperties"], path: "fuzz/GatewayProperties"),
        // SyncWire's parsers, and the replay of the `gateway` fuzz corpus (no PostgreSQL needed).
        .testTarget(name: "SyncWireTests", dependencies: ["KVStore", "SyncWire", "FuzzProperties", "GatewayFuzzProperties"]),
        // The same for SyncKit's parsers of live metadata (feeds, the snapshot manifest, history).
        .target(name: "SyncFuzzProperties", dependencies: ["KVStore", "SyncKit", "FuzzProperties"], path: "fuzz/SyncProperties"),
        // The codecs' own tests: CBOR (with the interop checks against Python's cbor2), the JSON
        // projection and writer, escaping.
        .testTarget(name: "CodecsTests", dependencies: ["Codecs", "KVStore", "Workloads", "TestSupport"], exclude: ["Fixtures/cbor_interop.py"]),
        .testTarget(
            name: "KVStoreTests",
            dependencies: ["KVStore", "Workloads", "TestSupport", "FuzzProperties"]
        ),
        .testTarget(name: "SyncKitTests", dependencies: ["KVStore", "SyncKit", "Workloads", "TestSupport", "FuzzProperties", "SyncFuzzProperties"],
                    exclude: ["Fixtures"]),
        .testTarget(name: "WorkloadsTests", dependencies: ["KVStore", "SyncKit", "Workloads", "TestSupport"]),
        // kvtool for the dump parser's fuzz property (DumpProperty.swift, a link into fuzz/).
        .testTarget(name: "KVToolTests", dependencies: ["KVStore", "SyncKit", "Workloads", "TestSupport", "kvtool", "FuzzProperties"],
                    exclude: ["Fixtures"]),
        // Fault and stress scenarios with real processes (kill -9, SIGSTOP, map growth, a full disk):
        // short in `make test`, long with KVSTORE_STRESS=1 (`make stress`).
        .testTarget(name: "ReliabilityTests", dependencies: ["KVStore", "SyncKit", "Workloads", "TestSupport"]),
        // Timed workloads that print their figures and assert only correctness.
        .testTarget(name: "KVStorePerformanceTests", dependencies: ["KVStore", "Workloads", "TestSupport"]),
    ]
)

/// How the lean executables link on Linux, to start in few instructions and pages (issue 39; measured in
/// benchmarks/baseline.md, "Lean processes", and LeanProcesses.md):
/// - the Swift standard library and FoundationEssentials statically (swiftc's `-static-stdlib`);
/// - libstdc++ statically too (`scripts/lean-link/libstdc++.so` is a linker script that swiftc's
///   `-lstdc++` finds first, naming GCC's `libstdc++.a`): the shared one cost 1.5M instructions of
///   loading and symbol binding at each start, more than the rest of an empty program; and libgcc
///   (`-static-libgcc`: its unwinder as an archive, not libgcc_s.so, 0.5 MiB of peak RSS);
/// - with lld, the relative relocations packed (`-z pack-relative-relocs`, DT_RELR, glibc 2.36 or
///   later): the 41,000 relocations of the static runtime's metadata are a bitmap of a few kB to read,
///   not a megabyte of tables;
/// - the executable's own symbols not exported (`--no-export-dynamic`; swiftc exports them): nothing
///   looks them up, and the runtime's start-up `dladdr` walked all 5,500 of them;
/// - the functions they run placed side by side at the start of their code (lld's
///   `--symbol-ordering-file`, `scripts/lean-link/lean.order`, written by `scripts/lean-order.py` from
///   callgrind runs; issue 46): the kernel maps an executable's pages a folio at a time (up to 2 MiB)
///   around each page a process touches, and push-extension's 690 KiB of run code was scattered over
///   its 10.4 MiB, so that its code pages were 7.5 MiB of its 12.4 MiB peak (10.8 - 13.9 MiB, by how
///   the executable came into the page cache); placed together, 8.3 - 9.6 MiB. A function the file
///   does not name keeps its place (no warning: names that are gone are skipped).
/// Still a PIE (`-no-pie` was turned down: these processes parse untrusted input); libc, libm and liblmdb
/// stay shared.
var leanLinking: [LinkerSetting] {
    [.unsafeFlags(["-static-stdlib", "-l_FoundationCollections", "-l_FoundationCShims",
                   "-L\(Context.packageDirectory)/scripts/lean-link", "-Xclang-linker", "-static-libgcc", "-use-ld=lld",
                   "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic",
                   "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/scripts/lean-link/lean.order",
                   "-Xlinker", "--no-warn-symbol-ordering"],
                  .when(platforms: [.linux]))]
}

/// How the modules a lean executable is made of reach the metadata of concrete generic types (issue 39):
/// through the types' metadata accessors, given the conformances the compiler already knows, not by
/// mangled name. By mangled name (swiftc's default, for smaller code) the runtime demangles the type
/// and looks up each conformance its generic requirements need (`Dictionary`'s key `Hashable`,
/// `KeyedDecodingContainer`'s key `CodingKey`...), and each first look-up of a conformance scans every
/// conformance record of the process: 4,000 in a lean executable, about 150,000 instructions a scan.
/// Only on targets no other package can depend on: SwiftPM refuses a dependency taken by version whose
/// library products carry unsafe flags (so not on KVStore, SyncKit or Workloads, where it would take the
/// widget from 3.50M to 2.57M instructions). Measured in benchmarks/baseline.md ("issue 39 part 3,
/// second round").
var leanMetadata: [SwiftSetting] {
    [.unsafeFlags(["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"], .when(platforms: [.linux]))]
}
