// The floor for KVStore's point operations: the same work in plain C on LMDB, for `make perf`.
// 10,000 entries of 100 bytes under 8-byte big-endian sign-flipped keys (as KVStore encodes Int),
// 20,000 gets in SplitMix64(seed 1) order, then put + commit in the default (durable) mode.
// Every return code is checked; any failure exits 1.
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call) do { int rc_ = (call); if (rc_ != MDB_SUCCESS) { \
    fprintf(stderr, "%s: %s\n", #call, mdb_strerror(rc_)); exit(1); } } while (0)

enum { ENTRIES = 10000, GETS = 20000, COMMITS = 100 };

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t key_bytes(uint64_t i) { return __builtin_bswap64(i ^ (1ULL << 63)); }

int main(void) {
    char dir[] = "/tmp/raw-lmdb-XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    CHECK(mdb_env_create(&env));
    CHECK(mdb_env_set_maxdbs(env, 4));
    CHECK(mdb_env_set_mapsize(env, 64 << 20));
    CHECK(mdb_env_open(env, dir, MDB_NOTLS, 0600));

    char value[100];
    memset(value, 7, sizeof value);
    CHECK(mdb_txn_begin(env, NULL, 0, &txn));
    CHECK(mdb_dbi_open(txn, "c/profiles", MDB_CREATE, &dbi));
    for (uint64_t i = 0; i < ENTRIES; i++) {
        uint64_t k = key_bytes(i);
        MDB_val key = {8, &k}, val = {sizeof value, value};
        CHECK(mdb_put(txn, dbi, &key, &val, 0));
    }
    CHECK(mdb_txn_commit(txn));

    static uint64_t keys[GETS];
    uint64_t state = 1;
    for (int i = 0; i < GETS; i++) {
        state += 0x9E3779B97F4A7C15ULL;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        keys[i] = (z ^ (z >> 31)) % ENTRIES;
    }

    size_t found = 0;
    CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
    double start = now_ns();
    for (int i = 0; i < GETS; i++) {
        uint64_t k = key_bytes(keys[i]);
        MDB_val key = {8, &k}, val;
        CHECK(mdb_get(txn, dbi, &key, &val));
        found += val.mv_size == sizeof value;
    }
    double shared = (now_ns() - start) / GETS;
    mdb_txn_reset(txn);

    start = now_ns();
    for (int i = 0; i < GETS; i++) {
        CHECK(mdb_txn_renew(txn));
        uint64_t k = key_bytes(keys[i]);
        MDB_val key = {8, &k}, val;
        CHECK(mdb_get(txn, dbi, &key, &val));
        found += val.mv_size == sizeof value;
        mdb_txn_reset(txn);
    }
    double own = (now_ns() - start) / GETS;
    mdb_txn_abort(txn);

    start = now_ns();
    for (uint64_t i = 0; i < COMMITS; i++) {
        CHECK(mdb_txn_begin(env, NULL, 0, &txn));
        uint64_t k = key_bytes(i);
        MDB_val key = {8, &k}, val = {sizeof value, value};
        CHECK(mdb_put(txn, dbi, &key, &val, 0));
        CHECK(mdb_txn_commit(txn));
    }
    double commit = (now_ns() - start) / COMMITS;
    mdb_env_close(env);

    char command[64];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (found != 2 * GETS) { fprintf(stderr, "found %zu of %d\n", found, 2 * GETS); return 1; }
    printf("raw C LMDB (the floor):\n");
    printf("  mdb_get, shared read transaction                  %10.0f ns\n", shared);
    printf("  renew + mdb_get + reset (own read transaction)    %10.0f ns\n", own);
    printf("  put + commit, durable                             %10.1f µs\n", commit / 1000);
    return 0;
}
