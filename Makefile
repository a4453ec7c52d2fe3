# make demo   builds kvtool, trainer-extension, checklist-widget and push-extension, and runs the demo
#             (app, widget and extension processes) against the default root
# make test   runs every test (unit, multi-process, CLI end-to-end, replication through throwaway
#             PostgreSQL clusters the tests start and stop), with the reliability suite's short
#             versions (Tests/ReliabilityTests: 50 writer kills + 20 in each other durability mode,
#             10 s of contention, 1,000 power-cut states (Tests/PowerCut), …; 2 to 3 minutes)
# make stress runs the reliability suite's long versions (KVSTORE_STRESS=1) from a release build
#             (in debug, `kvtool check` after each of the 1,000 kills alone takes most of half an
#             hour): 1,000 kill -9s of a writer (+ 300 per other durability mode), 6,000 power-cut
#             states, dead readers, 60 s of contention with SIGSTOPs, map
#             growth to 128 MiB across processes, a full disk, snapshots and feeds under fire, and the
#             randomized replication model with faults at 1,000 operations on 8 devices (150 in make
#             test; KVSTORE_MODEL_SEED=N replays a seed), a 1 GiB group resynced through a sync gateway
#             (40 MiB over an 8 MiB answer budget in make test), the differential test of the store's
#             open check against LMDB's own tools at 3,000 generated cases (150 in make test;
#             KVSTORE_DIFFERENTIAL_SEED=N replays a seed), and the server-state fuzzer at 10,000 cases
#             (40 in make test; KVSTORE_SERVER_FUZZ_SEED=N replays a run); each test prints its figures
#             ([reliability], [model], [resync], [differential] and [server-fuzz] lines). SWIFT_FLAGS passes options such as
#             --scratch-path to swift.
# make perf   prints the point-operation figures (README, benchmarks/baseline.md) from a release build
# make bench  runs benchmarks/ (KVStore, GRDB/SQLite, UserDefaults, raw LMDB) and prints the ratios,
#             then scripts/save-io.py (what a durable save writes, by strace, and the saves timed
#             interleaved, 3 runs, medians), then make bench-sync: kvtool bench sync, replication through a throwaway PostgreSQL
#             cluster (push and pull 10,000 changes, commit-to-other-device latency, 1 to 32 devices),
#             and kvtool bench gateway (1,000 and 10,000 live devices in 100 groups through a sync
#             gateway process: commit-to-every-device latency, the gateway's RSS; push through it),
#             and kvtool bench files (a 64 MiB file through the gateway against COPY and a file copy, the
#             gateway's RSS with 100 devices downloading at once, a record and its image from A to B),
#             and kvtool bench json (kvsync_cbor_to_jsonb per 1 KiB value against PostgreSQL's own jsonb parse)
#             and kvtool bench validators (pushes per second with one validator on the collection against none)
# make lean  times the lean executables (trainer-extension, checklist-widget, push-extension) from process
#             start to their answer beside an empty Swift program (hyperfine), with their peak RSS,
#             instructions and sizes
# make instructions counts the instructions per operation of each benchmarks/ workload under valgrind's
#             callgrind (installed by install-deps.sh --perf), with the ratios to KVStore and to the floor;
#             FILTER="Decode" keeps the workloads whose name contains it
# make fuzz   runs each libFuzzer target (cbor, keys, paths, dump, catalog, feed, manifest, history) for
#             FUZZ_SECONDS (default 60); see fuzz/README.md
# make sanitize runs the tests under ThreadSanitizer (in-process: the store, SyncKit, kvtool's local side), then under
#             AddressSanitizer (replication and the sync gateway included), durability and performance suites
#             aside; make sanitize-all runs every suite under both
SWIFT ?= swift
SWIFT_FLAGS ?=
KVTOOL := .build/release/kvtool
FUZZ_SECONDS ?= 60

.PHONY: deps test-deps build demo test stress perf bench bench-sync lean instructions fuzz sanitize sanitize-all clean

deps:
	@./scripts/install-deps.sh

test-deps:
	@./scripts/install-deps.sh --test

build: deps
	$(SWIFT) build -c release --product kvtool
	$(SWIFT) build -c release --product trainer-extension
	$(SWIFT) build -c release --product checklist-widget
	$(SWIFT) build -c release --product push-extension

demo: build
	$(KVTOOL) demo

# The results also go to .build/test-results/ as xUnit: .ci/run checks the suites that need PostgreSQL,
# the sync gateway or Chromium against their floors (.ci/test-floors, scripts/check-test-floors.py).
test: test-deps
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	mkdir -p .build/test-results
	$(SWIFT) test $(SWIFT_FLAGS) --xunit-output $(CURDIR)/.build/test-results/make-test.xml

stress: test-deps
	$(SWIFT) build -c release --build-tests -Xswiftc -enable-testing $(SWIFT_FLAGS)
	KVSTORE_STRESS=1 $(SWIFT) test -c release -Xswiftc -enable-testing $(SWIFT_FLAGS) --filter "ReliabilityTests|ReplicationModelTests|GatewayResyncTests|LMDBDifferentialTests|ServerStateFuzzTests"

perf: test-deps
	$(SWIFT) test -c release -Xswiftc -enable-testing --filter KVStorePerformanceTests
	$(CC) -O2 -o .build/raw-lmdb-point scripts/raw-lmdb-point.c $$(pkg-config --cflags --libs lmdb)
	.build/raw-lmdb-point

lean: build
	@./scripts/install-deps.sh --perf
	python3 scripts/lean-processes.py

bench: deps
	@./scripts/install-deps.sh --perf
	mkdir -p benchmarks/.build
	cd benchmarks && $(SWIFT) package --disable-sandbox benchmark --no-progress --format markdown > .build/results.md
	python3 scripts/bench-ratios.py < benchmarks/.build/results.md
	cd benchmarks && $(SWIFT) build -c release --product Instructions
	python3 scripts/save-io.py
	@cat benchmarks/.build/sizes.txt
	@echo "(every percentile and metric: benchmarks/.build/results.md)"
	$(MAKE) bench-sync

bench-sync: build
	$(KVTOOL) bench sync
	$(KVTOOL) bench pushers
	$(KVTOOL) bench requests
	$(KVTOOL) bench gateway
	$(KVTOOL) bench files
	$(KVTOOL) bench json
	$(KVTOOL) bench validators

instructions: deps
	@./scripts/install-deps.sh --perf
	python3 scripts/instructions.py "$(FILTER)"

fuzz: deps
	./scripts/fuzz.sh all $(FUZZ_SECONDS)

# XCTest and Foundation leak a little at exit: scripts/sanitize/lsan.supp says why each suppression
# is there (scripts/sanitize/asan.supp, for a read past a buffer inside Foundation's Process.run); scripts/sanitize/tsan.supp does the same for ThreadSanitizer's one (a runtime false
# positive). The Swift backtracer is off because it trips over ASan's redzones when a test process traps.
#
# What each sanitizer runs in CI (`make sanitize`; CI's hour did not hold both over every suite: the
# run of issue 48 was stopped at 59 min on the CI machine, 54 min here):
# - ThreadSanitizer without the PostgreSQL trait: the store, SyncKit (history, notifications, the sync
#   service's local side), the codecs, the workloads and kvtool's local commands, where our own threads
#   meet in one process (transactions, observations, closes, the history's consumers). Its build then
#   compiles nothing of NIO (half the time).
# - AddressSanitizer with the PostgreSQL trait: all that, and replication, the sync gateway and its
#   adversarial suites, so that the code that parses a device's bytes runs under it.
# Neither runs the durability suites (ReliabilityTests, PowerCut: what survives kill -9 and a power cut is
# a property of LMDB and the file system, which a sanitizer does not change) nor the performance tests
# (figures only); all three run in `make test`. `make sanitize-all` runs every suite under both, with
# PostgreSQL (about 35 min here). Neither has the Serve trait (measured: kvtool serve's tests alone took
# 443 s under ThreadSanitizer); kvtool serve and its tests run (unsanitized) in `make test`. Nor the
# gateway fleet behind HAProxy (SyncKitPostgresTests.GatewayFleetTests: five gateway processes, a proxy
# and their kills and drains; the code it runs is the gateways' and the replicator's, sanitized by the
# other gateway suites). Nor issue 51's other suites of several servers (FailoverTests: a primary killed
# and its standby promoted; ReadReplicaTests: a standby held 500 ms behind; DirectoryTests: two clusters):
# what they add is which server a connection goes to, and their timing-bound waits only grow slower
# under a sanitizer; the host list's parser runs under it in ServerURLTests.
SANITIZE_SKIP ?= ^((ReliabilityTests|PowerCut|KVStorePerformanceTests)\.|SyncKitPostgresTests\.(GatewayFleetTests|FailoverTests|ReadReplicaTests|DirectoryTests))
TSAN_ENV = TSAN_OPTIONS="suppressions=$(CURDIR)/scripts/sanitize/tsan.supp"
ASAN_ENV = ASAN_OPTIONS="detect_leaks=1:suppressions=$(CURDIR)/scripts/sanitize/asan.supp" LSAN_OPTIONS="suppressions=$(CURDIR)/scripts/sanitize/lsan.supp" SWIFT_BACKTRACE=enable=no

sanitize: test-deps
	$(TSAN_ENV) $(SWIFT) test --sanitize=thread --disable-default-traits --scratch-path .build-sanitize-thread --skip '$(SANITIZE_SKIP)'
	$(ASAN_ENV) $(SWIFT) test --sanitize=address --disable-default-traits --traits PostgreSQL --scratch-path .build-sanitize-address --skip '$(SANITIZE_SKIP)'

sanitize-all: test-deps
	$(TSAN_ENV) $(SWIFT) test --sanitize=thread --disable-default-traits --traits PostgreSQL --scratch-path .build-sanitize-thread-pg
	$(ASAN_ENV) $(SWIFT) test --sanitize=address --disable-default-traits --traits PostgreSQL --scratch-path .build-sanitize-address

clean:
	rm -rf .build .build-fuzz-libfuzzer .build-sanitize-thread .build-sanitize-thread-pg .build-sanitize-address
