#!/usr/bin/env bash
# Installs what a fresh Debian machine with Swift lacks for building and testing KVStore:
# LMDB's library and headers (liblmdb-dev), LMDB's own tools (lmdb-utils: mdb_stat, mdb_dump,
# mdb_load, used by the tests), pkg-config, PostgreSQL (the replication tests and demo start their
# own throwaway clusters), Python's cbor2 (the interoperability tests; with --test) and valgrind (`make
# instructions` counts instructions under callgrind, and `make lean` times processes with hyperfine and
# /usr/bin/time; with --perf), and Debian's chromium and chromium-driver with Selenium from PyPI (the
# browser tests of `kvtool serve`; with --test), openssl (the sync gateway's TLS tests; with --test), and
# Debian's prometheus (a test scrapes a gateway with it and queries it through its HTTP API, another
# fires the shipped alerting rules in it, and its promtool checks and tests those rules; with --test:
# the package's service is not started, the tests run /usr/bin/prometheus and /usr/bin/promtool), and
# Debian's haproxy (a test puts the sync gateway behind it with send-proxy-v2; with --test, its service
# not started either).
set -euo pipefail

sudo_if_needed() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
pkg-config --exists lmdb 2>/dev/null || missing+=(liblmdb-dev)
command -v mdb_stat >/dev/null 2>&1 || missing+=(lmdb-utils)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
# PostgreSQL's server programs: the replication tests and the demo start throwaway clusters.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# The lean executables link GCC's libstdc++ statically (Package.swift's leanLinking).
ls /usr/lib/gcc/*/*/libstdc++.a >/dev/null 2>&1 || missing+=(libstdc++-12-dev)
if [ "${1:-}" = "--test" ]; then
    # The sync gateway's TLS tests make a certificate authority of their own.
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
    { [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; } || missing+=(prometheus)
    # A test runs the sync gateway behind Debian's HAProxy with send-proxy-v2 (its service is not started).
    [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
fi
if [ "${1:-}" = "--perf" ]; then
    command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
    command -v hyperfine >/dev/null 2>&1 || missing+=(hyperfine)
    # make bench: scripts/save-io.py counts what a durable save writes.
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    command -v strip >/dev/null 2>&1 || missing+=(binutils)
    [ -x /usr/bin/time ] || missing+=(time)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    sudo_if_needed apt-get update -qq
    # Debian's postgresql package creates and starts a cluster of its own (and prometheus a service);
    # the tests and the demo start their own instead, and a machine without an init system cannot start it: while installing, a
    # policy-rc.d (the standard Debian hook) tells the package scripts not to start services.
    added_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | sudo_if_needed tee /usr/sbin/policy-rc.d >/dev/null
        sudo_if_needed chmod 755 /usr/sbin/policy-rc.d
        added_policy=1
    fi
    status=0
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null || status=$?
    if [ -n "$added_policy" ]; then sudo_if_needed rm -f /usr/sbin/policy-rc.d; fi
    [ "$status" -eq 0 ] || { echo "install-deps: apt-get install ${missing[*]} failed ($status)" >&2; exit "$status"; }
fi

if [ "${1:-}" = "--test" ]; then
    if ! python3 -c 'import cbor2' >/dev/null 2>&1; then
        echo "installing cbor2 for python3"
        python3 -m pip install --quiet --disable-pip-version-check cbor2 2>/dev/null \
            || python3 -m pip install --quiet --disable-pip-version-check --user cbor2 \
            || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages cbor2
    fi
    if ! python3 -c 'import selenium' >/dev/null 2>&1; then
        echo "installing selenium for python3"
        python3 -m pip install --quiet --disable-pip-version-check selenium 2>/dev/null \
            || python3 -m pip install --quiet --disable-pip-version-check --user selenium \
            || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages selenium
    fi
fi
