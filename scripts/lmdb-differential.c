// Generated sequences of LMDB operations for the differential test of KVStore's open check
// (Tests/KVStoreTests/LMDBDifferentialTests.swift): whatever LMDB commits, KVStore must open when
// LMDB's own tools read it, and refuse it when a page they read is cut off.
//
//     lmdb-differential DIR SEED STEPS DATABASE...
//
// DIR is a store LMDB can open (a container's Store/, made by KVStore); each DATABASE is a named
// database of its catalog. A name containing "dup" is made MDB_DUPSORT, "fix" MDB_DUPSORT|MDB_DUPFIXED
// (both dropped and made again in the first transaction). Scratch databases s/0 to s/3, which the
// catalog does not know, come and go during the run; the last transaction drops them and makes every
// DATABASE exist again, so that the store ends as the catalog describes it.
//
// A step is one of: a write transaction (puts of every size from 1 byte up, the largest 2 MiB in
// about one run of 8 and 256 KiB in the others, to keep the cases quick; overwrites with larger and
// smaller values, MDB_RESERVE, MDB_APPEND, deletes of keys and of single duplicates, a value of a
// page or more put and deleted in one transaction, emptying a database and deleting a scratch one,
// nested transactions committed or aborted, and the whole transaction committed or aborted); a read
// transaction held across the next steps (so that no page freed meanwhile is reused) or released;
// the map grown or shrunk (to its minimum); the environment closed and opened again with another map
// size; a copy with mdb_env_copy2, compacted (MDB_CP_COMPACT) or not, put in place of data.mdb (a
// write instead when LMDB_DIFFERENTIAL_NO_COPIES is set).
// MDB_MAP_FULL aborts the transaction and grows the map, as KVStore does. Any other unexpected return
// code ends the run with exit status 1.
//
// The same SEED gives the same operations. The one line on stdout counts what was done, as pairs of a
// name and a number.
#include <errno.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAIL(...) do { fprintf(stderr, "lmdb-differential: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CHECK(call) do { int rc_ = (call); if (rc_ != MDB_SUCCESS) FAIL("%s: %s", #call, mdb_strerror(rc_)); } while (0)

enum { SCRATCH = 4, MAX_DBS = 32, MAX_NESTING = 2 };

static uint64_t state;
static uint64_t next(void) {  // SplitMix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return n ? next() % n : 0; }
static int chance(int percent) { return (int)below(100) < percent; }

static const char *dir;
static MDB_env *env;
static size_t map_size;
static int named_count;
static char *names[MAX_DBS];      // catalog databases, then s/0 .. s/3
static unsigned flags_of[MAX_DBS];
static MDB_txn *pinned;           // a read transaction held across steps
static struct { unsigned long commits, aborts, nested, nested_aborts, puts, overflow_puts, huge_puts, deletes,
                empties, drops, pins, resizes, reopens, copies, compactions, map_full; } count;
static unsigned char *big;        // the bytes values are cut from
enum { BIG = 2 << 20 };
static size_t largest;            // the largest value of this run

static int total(void) { return named_count + SCRATCH; }
static int is_scratch(int db) { return db >= named_count; }

static void open_env(size_t size) {
    CHECK(mdb_env_create(&env));
    CHECK(mdb_env_set_maxdbs(env, MAX_DBS));
    CHECK(mdb_env_set_mapsize(env, size));
    CHECK(mdb_env_open(env, dir, MDB_NOTLS | MDB_NOSYNC, 0600));
    MDB_envinfo info;
    CHECK(mdb_env_info(env, &info));
    map_size = info.me_mapsize;
}

static void close_env(void) {
    if (pinned) { mdb_txn_abort(pinned); pinned = NULL; }
    mdb_env_close(env);
    env = NULL;
}

// A key: a short prefix and a number from a small range, so that puts overwrite and deletes find keys.
static MDB_val make_key(unsigned char *buffer) {
    size_t length = 1 + below(chance(5) ? 400 : 24);
    uint64_t number = below(chance(70) ? 64 : 4096);
    memset(buffer, 'k', length);
    for (size_t i = 0; i < 8 && i < length; i++) buffer[length - 1 - i] = (unsigned char)(number >> (8 * i));
    return (MDB_val){ length, buffer };
}

// Every size: small, around the largest that fits in a page (~2 KiB for 4 KiB pages), one page and
// more (overflow pages), and now and then up to 2 MiB.
static size_t value_size(void) {
    switch (below(20)) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: return below(64);
    case 7: case 8: case 9: case 10: return 64 + below(1500);
    case 11: case 12: case 13: return 1900 + below(300);
    case 14: case 15: case 16: return 2200 + below(6000);
    case 17: case 18: return 8192 + below(60000);
    default: return chance(25) ? (64 << 10) + below(largest - (64 << 10)) : 4096 * (1 + below(16)) - below(32);
    }
}

static MDB_val make_value(int db) {
    size_t size;
    if (flags_of[db] & MDB_DUPFIXED) size = 16;
    else if (flags_of[db] & MDB_DUPSORT) size = 1 + below(chance(10) ? 511 : 40);
    else size = value_size();
    return (MDB_val){ size, big + below(BIG - size + 1) };
}

// Returns 0, or MDB_MAP_FULL for the caller to abort on.
static int op(MDB_txn *txn, MDB_dbi *dbis, int depth) {
    unsigned char keybuf[512];
    int db = (int)below(total());
    MDB_dbi dbi = dbis[db];
    int rc = 0;
    unsigned kind = (unsigned)below(100);
    if (kind < 55) {
        MDB_val key = make_key(keybuf), value = make_value(db);
        unsigned flags = 0;
        if (value.mv_size > 4096) count.overflow_puts++;
        if (value.mv_size > (256 << 10)) count.huge_puts++;
        if (!(flags_of[db] & MDB_DUPSORT) && chance(15)) flags = MDB_RESERVE;
        if (flags == MDB_RESERVE) {
            MDB_val reserved = { value.mv_size, NULL };
            rc = mdb_put(txn, dbi, &key, &reserved, flags);
            if (rc == MDB_SUCCESS) memcpy(reserved.mv_data, value.mv_data, value.mv_size);
        } else {
            rc = mdb_put(txn, dbi, &key, &value, flags);
        }
        if (rc == MDB_SUCCESS && !(flags_of[db] & MDB_DUPSORT) && chance(20)) {
            // The same key again in the same transaction, larger or smaller: an overflow value
            // rewritten in its own dirty pages keeps their count (mp_pages) when it shrinks.
            MDB_val again = make_value(db);
            rc = mdb_put(txn, dbi, &key, &again, 0);
        }
        count.puts++;
    } else if (kind < 60) {
        // Appended past the last key (MDB_APPEND): 0xFF bytes sort after every generated key.
        unsigned char last[512];
        size_t length = 400 + below(100);
        memset(last, 0xFF, length);
        last[length - 1] = (unsigned char)below(256);
        MDB_val key = { length, last }, value = make_value(db);
        rc = mdb_put(txn, dbi, &key, &value, (flags_of[db] & MDB_DUPSORT) ? MDB_APPENDDUP : MDB_APPEND);
        if (rc == MDB_KEYEXIST) rc = 0;  // not past the last key: LMDB refuses, nothing written
        count.puts++;
    } else if (kind < 63 && !(flags_of[db] & MDB_DUPSORT)) {
        // A value of one page or more put and deleted in the same transaction: its pages, taken
        // from the end of the file, go back to the free list without ever being written, so the
        // file can end before the last page the meta page records (issue 46's probe).
        MDB_val key = make_key(keybuf), value = { 4096 + below(largest - 4096), big };
        rc = mdb_put(txn, dbi, &key, &value, 0);
        if (rc == MDB_SUCCESS) rc = mdb_del(txn, dbi, &key, NULL);
        count.puts++;
        count.deletes++;
        count.huge_puts += value.mv_size > (256 << 10);
    } else if (kind < 85) {
        // Deletes a key near a random one (with all its duplicates, or one of them).
        MDB_cursor *cursor;
        CHECK(mdb_cursor_open(txn, dbi, &cursor));
        MDB_val key = make_key(keybuf), value;
        int found = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE);
        if (found == MDB_NOTFOUND) found = mdb_cursor_get(cursor, &key, &value, MDB_FIRST);
        if (found == MDB_SUCCESS) {
            rc = mdb_cursor_del(cursor, (flags_of[db] & MDB_DUPSORT) && chance(50) ? MDB_NODUPDATA : 0);
            count.deletes++;
        } else if (found != MDB_NOTFOUND) {
            FAIL("mdb_cursor_get: %s", mdb_strerror(found));
        }
        mdb_cursor_close(cursor);
    } else if (kind < 89 || depth > 0) {
        // Empties a database (the catalog's databases stay; their pages go to the free list).
        rc = mdb_drop(txn, dbi, 0);
        count.empties++;
    } else {
        // Deletes a scratch database and opens it again (empty), in the same transaction; only at the
        // top level (mdb_drop closes the handle in the environment, which a nested transaction that
        // aborts would leave closed for its parent).
        int scratch = named_count + (int)below(SCRATCH);
        rc = mdb_drop(txn, dbis[scratch], 1);
        if (rc == MDB_SUCCESS) rc = mdb_dbi_open(txn, names[scratch], MDB_CREATE | flags_of[scratch], &dbis[scratch]);
        count.drops++;
    }
    if (rc == MDB_MAP_FULL) return rc;
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) FAIL("operation %u on %s: %s", kind, names[db], mdb_strerror(rc));
    return 0;
}

static int ops(MDB_txn *txn, MDB_dbi *dbis, int depth) {
    int n = 1 + (int)below(chance(10) ? 200 : 30);
    for (int i = 0; i < n; i++) {
        if (depth < MAX_NESTING && chance(4)) {
            MDB_txn *child;
            CHECK(mdb_txn_begin(env, txn, 0, &child));
            int rc = ops(child, dbis, depth + 1);
            if (rc == MDB_MAP_FULL) { mdb_txn_abort(child); return rc; }
            if (chance(30)) {
                mdb_txn_abort(child);
                count.nested_aborts++;
            } else {
                rc = mdb_txn_commit(child);
                if (rc == MDB_MAP_FULL) return rc;
                if (rc) FAIL("nested mdb_txn_commit: %s", mdb_strerror(rc));
            }
            count.nested++;
        } else if (op(txn, dbis, depth) == MDB_MAP_FULL) {
            return MDB_MAP_FULL;
        }
    }
    return 0;
}

static void grow_map(void) {
    if (pinned) { mdb_txn_abort(pinned); pinned = NULL; }
    CHECK(mdb_env_set_mapsize(env, map_size * 2));
    map_size *= 2;
    count.map_full++;
}

// Opens every database (creating it, with its flags) and runs `body` in one write transaction.
static void write_step(int final) {
    for (int attempt = 0; ; attempt++) {
        if (attempt > 8) FAIL("the map stayed full after 8 doublings (%zu bytes)", map_size);
        MDB_txn *txn;
        MDB_dbi dbis[MAX_DBS];
        CHECK(mdb_txn_begin(env, NULL, 0, &txn));
        int rc = MDB_SUCCESS;
        for (int db = 0; db < total() && rc == MDB_SUCCESS; db++) {
            rc = mdb_dbi_open(txn, names[db], MDB_CREATE | flags_of[db], &dbis[db]);
            if (rc == MDB_INCOMPATIBLE && !is_scratch(db)) {
                // First run over a catalog database KVStore made without flags: made again with them.
                MDB_dbi plain;
                CHECK(mdb_dbi_open(txn, names[db], 0, &plain));
                rc = mdb_drop(txn, plain, 1);
                if (rc == MDB_SUCCESS) rc = mdb_dbi_open(txn, names[db], MDB_CREATE | flags_of[db], &dbis[db]);
            }
            if (rc && rc != MDB_MAP_FULL) FAIL("mdb_dbi_open %s: %s", names[db], mdb_strerror(rc));
        }
        if (rc == MDB_SUCCESS) rc = ops(txn, dbis, 0);
        for (int db = named_count; final && rc == MDB_SUCCESS && db < total(); db++) {
            rc = mdb_drop(txn, dbis[db], 1);
            if (rc && rc != MDB_MAP_FULL) FAIL("mdb_drop %s: %s", names[db], mdb_strerror(rc));
        }
        if (rc == MDB_MAP_FULL) { mdb_txn_abort(txn); grow_map(); continue; }
        if (!final && chance(10)) {
            mdb_txn_abort(txn);
            count.aborts++;
            return;
        }
        rc = mdb_txn_commit(txn);
        if (rc == MDB_MAP_FULL) { grow_map(); continue; }
        if (rc) FAIL("mdb_txn_commit: %s", mdb_strerror(rc));
        count.commits++;
        return;
    }
}

static void copy_step(int compact) {
    char tmp[4096], from[4200], to[4200];
    snprintf(tmp, sizeof tmp, "%s/../.differential-copy-%d", dir, (int)getpid());
    snprintf(from, sizeof from, "%s/data.mdb", tmp);
    snprintf(to, sizeof to, "%s/data.mdb", dir);
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) FAIL("mkdir %s: %s", tmp, strerror(errno));
    unlink(from);
    CHECK(mdb_env_copy2(env, tmp, compact ? MDB_CP_COMPACT : 0));
    size_t size = map_size;
    close_env();
    struct stat original;
    if (stat(to, &original) != 0) FAIL("stat %s: %s", to, strerror(errno));
    if (chmod(from, original.st_mode & 07777) != 0) FAIL("chmod %s: %s", from, strerror(errno));  // the copy's mode is 0644 less the umask
    if (rename(from, to) != 0) FAIL("rename %s: %s", from, strerror(errno));
    rmdir(tmp);
    open_env(size);
    compact ? count.compactions++ : count.copies++;
}

int main(int argc, char **argv) {
    if (argc < 4) FAIL("usage: lmdb-differential DIR SEED STEPS DATABASE...");
    dir = argv[1];
    state = strtoull(argv[2], NULL, 10);
    long steps = strtol(argv[3], NULL, 10);
    named_count = argc - 4;
    if (named_count > MAX_DBS - SCRATCH) FAIL("at most %d databases", MAX_DBS - SCRATCH);
    for (int i = 0; i < named_count; i++) {
        names[i] = argv[4 + i];
        flags_of[i] = strstr(names[i], "fix") ? MDB_DUPSORT | MDB_DUPFIXED : strstr(names[i], "dup") ? MDB_DUPSORT : 0;
    }
    for (int i = 0; i < SCRATCH; i++) {
        names[named_count + i] = malloc(8);
        snprintf(names[named_count + i], 8, "s/%d", i);
        flags_of[named_count + i] = i == 1 ? MDB_DUPSORT : 0;
    }
    largest = chance(12) ? BIG : 256 << 10;
    big = malloc(BIG);
    for (size_t i = 0; i < BIG; i++) big[i] = (unsigned char)next();

    open_env((size_t)(1 + below(8)) << 20);
    // Another process opening the store while this one runs (ShortDataFileTests) would see a copy put
    // in place of data.mdb as the replacement it is: LMDB_DIFFERENTIAL_NO_COPIES makes those steps
    // writes (the sequence of the other operations is the seed's either way).
    int no_copies = getenv("LMDB_DIFFERENTIAL_NO_COPIES") != NULL;
    for (long step = 0; step < steps; step++) {
        unsigned kind = (unsigned)below(100);
        if (kind < 75) {
            write_step(0);
        } else if (kind < 83) {
            if (pinned) { mdb_txn_abort(pinned); pinned = NULL; }
            else { CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &pinned)); count.pins++; }
        } else if (kind < 89) {
            // Grows the map, or shrinks it to its minimum (LMDB never maps less than the pages in use).
            if (pinned) { mdb_txn_abort(pinned); pinned = NULL; }
            size_t size = chance(50) ? map_size * 2 : 1;
            CHECK(mdb_env_set_mapsize(env, size));
            MDB_envinfo info;
            CHECK(mdb_env_info(env, &info));
            map_size = info.me_mapsize;
            count.resizes++;
        } else if (kind < 94) {
            size_t size = chance(50) ? map_size : (size_t)(1 + below(4)) << 20;
            close_env();
            open_env(size);
            count.reopens++;
        } else if (no_copies) {
            write_step(0);
        } else {
            copy_step(chance(50));
        }
    }
    write_step(1);
    struct stat st;
    char data[4200];
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    if (stat(data, &st) != 0) FAIL("stat %s: %s", data, strerror(errno));
    MDB_envinfo info;
    MDB_stat stat;
    CHECK(mdb_env_info(env, &info));
    CHECK(mdb_env_stat(env, &stat));
    close_env();
    printf("steps %ld commits %lu aborts %lu nested %lu nested-aborted %lu puts %lu overflow-puts %lu huge-puts %lu "
           "deletes %lu emptied %lu dropped %lu pins %lu resizes %lu reopens %lu copies %lu compactions %lu map-full %lu "
           "last-page %zu file-pages %lld\n",
           steps, count.commits, count.aborts, count.nested, count.nested_aborts, count.puts, count.overflow_puts,
           count.huge_puts, count.deletes, count.empties, count.drops, count.pins, count.resizes, count.reopens,
           count.copies, count.compactions, count.map_full, info.me_last_pgno,
           (long long)(st.st_size / stat.ms_psize));
    return 0;
}
