#!/usr/bin/env bash
# libFuzzer harnesses for KVStore's hostile-input surfaces (see fuzz/README.md).
#
#   scripts/fuzz.sh build [TARGET...]          build the harnesses (default: all)
#   scripts/fuzz.sh run TARGET [SECONDS]       fuzz TARGET, starting from fuzz/corpus/TARGET (default 60 s)
#   scripts/fuzz.sh merge TARGET               minimise what runs found into fuzz/corpus/TARGET
#   scripts/fuzz.sh all [SECONDS]              build, then run every target for SECONDS each
#
# SwiftPM cannot build with -sanitize=fuzzer, so this calls swiftc directly: the codecs' sources
# (Sources/Codecs: CBOR, the JSON projection, which the `cbor` target fuzzes) become one instrumented
# static library, KVStore's (built on them, re-exporting them) a second, fuzz/Properties/ (the same files the FuzzProperties target of
# Package.swift builds for the replay tests) a third, and each fuzz/Targets/NAME.swift is linked with
# the three and libFuzzer's main; the SyncKit targets (feed, manifest, history) also with SyncKit's sources
# and fuzz/SyncProperties/ (the SyncFuzzProperties target), and `gateway` with SyncWire's sources and
# fuzz/GatewayProperties/ (the GatewayFuzzProperties target). Everything lands in .build-fuzz-libfuzzer/: the binaries, the working
# corpora (new inputs go there, never straight into fuzz/corpus/) and crash artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(cbor keys paths dump catalog feed manifest history gateway)
# SyncKit's parsers: SyncKit (compiled with testing enabled, as the properties reach its internal
# parsers with @testable import) and fuzz/SyncProperties/ are two more libraries for these targets.
SYNC_TARGETS=(feed manifest history)
# The sync gateway's parsers (SyncWire, which needs no networking) and fuzz/GatewayProperties/.
GATEWAY_TARGETS=(gateway)
# The dump target is kvtool's dump parser: these kvtool files are compiled into its harness, with its
# property (which needs their internal types, so it is not in fuzz/Properties/).
# Sources/kvtool/Dump/ holds the dump's reader and checker and nothing else (writers such as the CSV
# export live in Support/): the folder is compiled whole, with the error type it throws.
DUMP_SOURCES=(Sources/kvtool/Dump/*.swift Sources/kvtool/Support/CLIError.swift fuzz/DumpProperty/DumpProperty.swift)
OUT=.build-fuzz-libfuzzer
SWIFTC=${SWIFTC:-swiftc}
MAX_LEN=${FUZZ_MAX_LEN:-4096}
# A property violation is a Swift trap: let libFuzzer and ASan report it (and save the input) rather
# than the Swift runtime's backtracer, which is slow under ASan and trips over its redzones.
export SWIFT_BACKTRACE=enable=no
# -package-name: KVStore's `package` declarations (such as Locked) are shared with its own modules.
SAN=(-sanitize=fuzzer,address -O -g -parse-as-library -package-name kvstore)

die() { echo "fuzz.sh: $*" >&2; exit 2; }

known() {
    local t
    for t in "${TARGETS[@]}"; do [[ $t == "$1" ]] && return 0; done
    die "unknown target '$1' (known: ${TARGETS[*]})"
}

is_sync() {
    local t
    for t in "${SYNC_TARGETS[@]}"; do [[ $t == "$1" ]] && return 0; done
    return 1
}

is_gateway() {
    local t
    for t in "${GATEWAY_TARGETS[@]}"; do [[ $t == "$1" ]] && return 0; done
    return 1
}

# True when $1 exists and is newer than every other argument. (Not `ls -t | head -1`: under
# pipefail, head closing the pipe early kills ls with SIGPIPE once the list outgrows one write.)
up_to_date() {
    local target=$1 f; shift
    [[ -f $target ]] || return 1
    for f in "$@"; do [[ $target -nt $f ]] || return 1; done
}

# One static library per module; rebuilt when a source, or a library it imports, is newer than it.
build_module() {
    local name=$1; shift
    local extra=() deps=()
    case $name in
        Codecs) deps=() ;;
        KVStore) deps=("$OUT/libLogging.a" "$OUT/libCodecs.a") ;;
        SyncKit) extra=(-enable-testing); deps=("$OUT/libKVStore.a") ;;
        FuzzProperties) deps=("$OUT/libKVStore.a" "$OUT/libLogging.a") ;;
        SyncFuzzProperties) deps=("$OUT/libKVStore.a" "$OUT/libSyncKit.a" "$OUT/libFuzzProperties.a") ;;
        SyncWire) deps=("$OUT/libKVStore.a") ;;
        GatewayFuzzProperties) deps=("$OUT/libKVStore.a" "$OUT/libSyncWire.a" "$OUT/libFuzzProperties.a") ;;
    esac
    local lib=$OUT/lib$name.a
    if up_to_date "$lib" "$@" "${deps[@]}"; then return; fi
    echo "fuzz.sh: compiling $name ($# files)" >&2
    "$SWIFTC" "${SAN[@]}" "${extra[@]}" -module-name "$name" -emit-library -static \
        -emit-module -emit-module-path "$OUT/$name.swiftmodule" \
        -I Sources/CLMDB -I "$OUT" -o "$lib" "$@"
}

# A module and the properties that test it: every .swift file of each folder, in name order.
build_pair() {
    local module sources
    mapfile -t module < <(find "$2" -name '*.swift' | sort)
    mapfile -t sources < <(find "$4" -name '*.swift' | sort)
    build_module "$1" "${module[@]}"
    build_module "$3" "${sources[@]}"
}

build() {
    mkdir -p "$OUT"
    local codecs kvstore properties logging
    # KVStore logs through swift-log: its Logging module, from SwiftPM's checkout of the package.
    [[ -d .build/checkouts/swift-log/Sources/Logging ]] || swift package resolve >&2
    mapfile -t logging < <(find .build/checkouts/swift-log/Sources/Logging -name '*.swift' | sort)
    build_module Logging "${logging[@]}"
    mapfile -t codecs < <(find Sources/Codecs -name '*.swift' | sort)
    mapfile -t kvstore < <(find Sources/KVStore -name '*.swift' | sort)
    mapfile -t properties < <(find fuzz/Properties -name '*.swift' | sort)
    build_module Codecs "${codecs[@]}"
    build_module KVStore "${kvstore[@]}"
    build_module FuzzProperties "${properties[@]}"
    # The module and properties some targets link besides KVStore's, built when one of them is asked for.
    local t needs_sync=0 needs_gateway=0
    for t in "$@"; do
        is_sync "$t" && needs_sync=1
        is_gateway "$t" && needs_gateway=1
    done
    ((needs_sync)) && build_pair SyncKit Sources/SyncKit SyncFuzzProperties fuzz/SyncProperties
    ((needs_gateway)) && build_pair SyncWire Sources/SyncWire GatewayFuzzProperties fuzz/GatewayProperties
    for t in "$@"; do
        known "$t"
        local exe=$OUT/fuzz-$t
        local sources=("fuzz/Targets/$t.swift")
        [[ $t == dump ]] && sources+=("${DUMP_SOURCES[@]}")
        local libs=("$OUT/libFuzzProperties.a" "$OUT/libKVStore.a" "$OUT/libCodecs.a" "$OUT/libLogging.a")
        is_sync "$t" && libs=("$OUT/libSyncFuzzProperties.a" "$OUT/libSyncKit.a" "${libs[@]}")
        is_gateway "$t" && libs=("$OUT/libGatewayFuzzProperties.a" "$OUT/libSyncWire.a" "${libs[@]}")
        if up_to_date "$exe" "${sources[@]}" "${libs[@]}"; then continue; fi
        echo "fuzz.sh: compiling and linking fuzz-$t" >&2
        # gold warns once per ASan helper symbol ("Cannot export local symbol"); that is noise.
        "$SWIFTC" "${SAN[@]}" -module-name "fuzz_$t" -I "$OUT" -I Sources/CLMDB \
            "${sources[@]}" "${libs[@]}" -llmdb -o "$exe" \
            2> >(grep -v "Cannot export local symbol" >&2)
    done
}

# The hand-made seeds of scripts/fuzz-seeds.py, written fresh for each run and merge.
seeds() {
    python3 scripts/fuzz-seeds.py "$OUT/seeds" >/dev/null
    echo "$OUT/seeds/$1"
}

run() {
    local t=$1 seconds=${2:-60}
    known "$t"
    build "$t"
    [[ -d fuzz/corpus/$t ]] || die "fuzz/corpus/$t is missing"
    mkdir -p "$OUT/work/$t" "$OUT/artifacts/$t"
    local max_len=$MAX_LEN
    # Real dumps are a few kilobytes (the seeds, fuzz/seeds/dump, are up to 21 kB).
    [[ $t == dump ]] && max_len=${FUZZ_DUMP_MAX_LEN:-24576}
    echo "fuzz.sh: fuzzing $t for ${seconds}s (max_len $max_len)" >&2
    "$OUT/fuzz-$t" "$OUT/work/$t" "fuzz/corpus/$t" $(seeds "$t") \
        -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$OUT/artifacts/$t/" -print_final_stats=1
}

merge() {
    local t=$1
    known "$t"
    build "$t"
    local fresh=$OUT/merge/$t
    rm -rf "$fresh"
    mkdir -p "$fresh" "$OUT/work/$t"
    # Edge coverage only (no hit counts): hundreds of inputs rather than thousands.
    "$OUT/fuzz-$t" -set_cover_merge=1 -use_counters=0 -max_len=$([[ $t == dump ]] && echo "${FUZZ_DUMP_MAX_LEN:-24576}" || echo "$MAX_LEN") "$fresh" "fuzz/corpus/$t" "$OUT/work/$t" $(seeds "$t")
    # Name files by content, so that merges give stable names. The hand-made seeds (seed-NAME) and the
    # inputs of fixed crashes (crash-NAME, added by hand) are kept whole, whether or not they add
    # coverage: each is a case someone thought of or a bug that was.
    find "fuzz/corpus/$t" -maxdepth 1 -type f ! -name 'crash-*' -delete
    local f
    for f in "$fresh"/*; do cp "$f" "fuzz/corpus/$t/$(sha1sum "$f" | cut -c1-16)"; done
    for f in "$OUT/seeds/$t"/*; do cp "$f" "fuzz/corpus/$t/seed-$(basename "$f")"; done
    echo "fuzz.sh: fuzz/corpus/$t now has $(ls "fuzz/corpus/$t" | wc -l) inputs" >&2
}

cmd=${1:-}
shift || true
case $cmd in
    build) if [[ $# -eq 0 ]]; then build "${TARGETS[@]}"; else build "$@"; fi ;;
    run) [[ $# -ge 1 ]] || die "usage: fuzz.sh run TARGET [SECONDS]"; run "$@" ;;
    merge) [[ $# -eq 1 ]] || die "usage: fuzz.sh merge TARGET"; merge "$1" ;;
    all)
        seconds=${1:-60}
        build "${TARGETS[@]}"
        for t in "${TARGETS[@]}"; do run "$t" "$seconds"; done
        ;;
    *) die "usage: fuzz.sh build|run|merge|all (see the top of scripts/fuzz.sh)" ;;
esac
