#!/usr/bin/env bash
# Fails when a build of this package's own code prints a compiler (or linker) warning: zero warnings
# in debug (with the tests) and in release (issue 46).
#
# A warning is printed only when its file compiles, so an incremental build of an unchanged tree
# shows none. This script makes the package's own modules compile again (it touches their Swift
# files; the dependencies' modules are left as built, their warnings are not ours and SwiftPM
# suppresses them anyway), builds, and reads the build's output for `warning:` lines whose file is
# under Sources/, Tests/, Examples/ or fuzz/, or that name no file (SwiftPM's and the linker's own).
# Dependencies' lines (.build/checkouts/…) are left out.
#
# Usage: scripts/check-warnings.sh [debug|release|all]   (default all: `swift build --build-tests`,
#                                                          then `make build`'s release products:
#                                                          kvtool and the three lean executables)
#        scripts/check-warnings.sh --log FILE...          (reads logs of builds made elsewhere, for
#                                                          example .build/ci-make-test.log of a
#                                                          clean CI build)
#        scripts/check-warnings.sh --self-test
# SWIFT_FLAGS passes options such as --scratch-path to swift build. Exit 0: no warning of ours.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SWIFT="${SWIFT:-swift}"
read -r -a EXTRA <<< "${SWIFT_FLAGS:-}"

# Prints the warning lines of ours in the build output on standard input (once each, in order).
ours() {
    awk -v root="$ROOT/" '
        / warning: / || /^warning: / {
            line = $0
            # The source excerpt under a diagnostic (`    |   `- warning: …`) repeats its line.
            if (line ~ /^[ \t]*\|/) next
            # A dependency'"'"'s file, or a tool'"'"'s remark about one.
            if (index(line, "/.build/checkouts/") || index(line, "/checkouts/")) next
            # A file of ours: ROOT/Sources/… (or a relative path from a build run in ROOT).
            file = line
            sub(/:[0-9]+(:[0-9]+)?: warning: .*/, "", file)
            if (file != line) {
                rel = file
                if (index(rel, root) == 1) rel = substr(rel, length(root) + 1)
                if (rel !~ /^(Sources|Tests|Examples|fuzz)\//) next
            }
            if (!(line in seen)) { seen[line] = 1; print line }
        }'
}

self_test() {
    local planted expected found
    planted=$(cat <<EOF
Compiling KVStore Store.swift
$ROOT/Sources/KVStore/Store.swift:12:9: warning: variable 'x' was never mutated; consider changing to 'let' constant
$ROOT/Sources/KVStore/Store.swift:12:9: warning: variable 'x' was never mutated; consider changing to 'let' constant
$ROOT/.build/checkouts/swift-nio/Sources/NIOCore/Channel.swift:3:1: warning: a dependency's
/elsewhere/.build/checkouts/postgres-nio/Sources/A.swift:1:1: warning: a dependency's, built elsewhere
$ROOT/Tests/KVToolTests/KVToolTests.swift:5:1: warning: 'foo' is deprecated
Sources/SyncKit/History.swift:7:3: warning: will never be executed
warning: 'kvstore': found 1 file(s) which are unhandled; explicitly declare them as resources or exclude from the target
ld.lld: warning: something the linker says
    |             \`- warning: variable 'x' was never mutated; consider changing to 'let' constant
$ROOT/Sources/KVStore/Store.swift:14:1: error: not a warning
$ROOT/Sources/KVStore/Store.swift:15:1: note: not a warning either
EOF
)
    expected=$(cat <<EOF
$ROOT/Sources/KVStore/Store.swift:12:9: warning: variable 'x' was never mutated; consider changing to 'let' constant
$ROOT/Tests/KVToolTests/KVToolTests.swift:5:1: warning: 'foo' is deprecated
Sources/SyncKit/History.swift:7:3: warning: will never be executed
warning: 'kvstore': found 1 file(s) which are unhandled; explicitly declare them as resources or exclude from the target
ld.lld: warning: something the linker says
EOF
)
    found=$(printf '%s\n' "$planted" | ours)
    if [ "$found" != "$expected" ]; then
        echo "check-warnings: self-test failed; found:" >&2
        printf '%s\n' "$found" >&2
        exit 1
    fi
    # A log without any warning of ours passes.
    found=$(printf 'Compiling KVStore Store.swift\n%s/.build/checkouts/x/y.swift:1:1: warning: theirs\n' "$ROOT" | ours)
    [ -z "$found" ] || { echo "check-warnings: self-test failed: a dependency's warning was counted" >&2; exit 1; }
    echo "check-warnings: self-test passed (5 planted warnings of ours found, 2 of dependencies, a source excerpt's copy and 2 other diagnostics left out)"
}

report() {
    local what="$1" found="$2"
    if [ -n "$found" ]; then
        local count
        count=$(printf '%s\n' "$found" | wc -l)
        echo "check-warnings: $count warning(s) in $what:" >&2
        printf '%s\n' "$found" >&2
        return 1
    fi
    echo "check-warnings: no warning in $what"
}

build() {
    local config="$1" log
    log="$(mktemp)"
    # Every Swift file of ours compiles again (their modules only: the dependencies are not touched).
    find "$ROOT/Sources" "$ROOT/Tests" "$ROOT/Examples" -name '*.swift' -exec touch {} +
    local status=0
    if [ "$config" = debug ]; then
        echo "check-warnings: $SWIFT build --build-tests ${EXTRA[*]}"
        (cd "$ROOT" && "$SWIFT" build --build-tests "${EXTRA[@]}") >"$log" 2>&1 || status=$?
    else
        # What `make build` builds (a release build of every target would take the fuzz targets,
        # which need -enable-testing).
        for product in kvtool trainer-extension checklist-widget push-extension; do
            echo "check-warnings: $SWIFT build -c release --product $product ${EXTRA[*]}"
            (cd "$ROOT" && "$SWIFT" build -c release --product "$product" "${EXTRA[@]}") >>"$log" 2>&1 || status=$?
        done
    fi
    if [ "$status" -ne 0 ]; then
        tail -40 "$log" >&2
        rm -f "$log"
        echo "check-warnings: the $config build failed ($status)" >&2
        return 1
    fi
    local found
    found=$(ours < "$log")
    rm -f "$log"
    report "the $config build" "$found"
}

case "${1:-all}" in
    --self-test) self_test ;;
    --log)
        shift
        [ $# -gt 0 ] || { echo "usage: scripts/check-warnings.sh --log FILE..." >&2; exit 64; }
        status=0
        for file in "$@"; do
            report "$file" "$(ours < "$file")" || status=1
        done
        exit "$status"
        ;;
    debug|release) self_test >/dev/null; build "$1" ;;
    all)
        self_test >/dev/null
        status=0
        build debug || status=1
        build release || status=1
        exit "$status"
        ;;
    *) echo "usage: scripts/check-warnings.sh [debug|release|all] | --log FILE... | --self-test" >&2; exit 64 ;;
esac
