# make demo   builds kvtool and runs the demo (app, widget and extension processes) against the default root
# make test   runs every test (unit, multi-process, CLI end-to-end)
# make perf   prints the point-operation figures of the README from a release build
SWIFT ?= swift
KVTOOL := .build/release/kvtool

.PHONY: deps test-deps build demo test perf clean

deps:
	@./scripts/install-deps.sh

test-deps:
	@./scripts/install-deps.sh --test

build: deps
	$(SWIFT) build -c release --product kvtool

demo: build
	$(KVTOOL) demo

test: test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

perf: test-deps
	$(SWIFT) test -c release -Xswiftc -enable-testing --filter KVStorePerformanceTests
	$(CC) -O2 -o .build/raw-lmdb-point scripts/raw-lmdb-point.c $$(pkg-config --cflags --libs lmdb)
	.build/raw-lmdb-point

clean:
	rm -rf .build
