// Issue 46's probe: LMDB commits a transaction whose last page is past the end of data.mdb, and its
// own tools read the store. Three small commits leave free pages, so the next transaction starts
// with a list of pages to reuse; it puts a 1 MiB value into a scratch database (its 257 pages come
// from the end of the file), deletes it and drops the database, and commits: the value's pages go
// back to the free list without ever being written, so the file is never extended to them.
//
//     lmdb-short-file-probe DIR        (DIR: an LMDB environment directory, made if empty)
//
// Prints "last page L, file P pages"; exits 1 on any LMDB error.
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHECK(call) do { int rc_ = (call); if (rc_ != MDB_SUCCESS) { \
    fprintf(stderr, "%s: %s\n", #call, mdb_strerror(rc_)); exit(1); } } while (0)

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: lmdb-short-file-probe DIR\n"); return 1; }
    static char value[1 << 20];
    memset(value, 7, sizeof value);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    CHECK(mdb_env_create(&env));
    CHECK(mdb_env_set_maxdbs(env, 64));
    CHECK(mdb_env_set_mapsize(env, 64 << 20));
    CHECK(mdb_env_open(env, argv[1], 0, 0600));
    MDB_val key = { 7, "scratch" }, small = { 100, value }, big = { sizeof value, value };
    for (int i = 0; i < 3; i++) {
        CHECK(mdb_txn_begin(env, NULL, 0, &txn));
        CHECK(mdb_dbi_open(txn, "scratch", MDB_CREATE, &dbi));
        CHECK(mdb_put(txn, dbi, &key, &small, 0));
        CHECK(mdb_txn_commit(txn));
    }
    CHECK(mdb_txn_begin(env, NULL, 0, &txn));
    CHECK(mdb_dbi_open(txn, "scratch", MDB_CREATE, &dbi));
    CHECK(mdb_put(txn, dbi, &key, &big, 0));
    CHECK(mdb_del(txn, dbi, &key, NULL));
    CHECK(mdb_drop(txn, dbi, 1));
    CHECK(mdb_txn_commit(txn));
    MDB_envinfo info;
    MDB_stat sizes;
    CHECK(mdb_env_info(env, &info));
    CHECK(mdb_env_stat(env, &sizes));
    char path[4096];
    snprintf(path, sizeof path, "%s/data.mdb", argv[1]);
    struct stat file;
    if (stat(path, &file) != 0) { perror(path); return 1; }
    printf("last page %zu, file %lld pages\n", info.me_last_pgno, (long long)(file.st_size / sizes.ms_psize));
    mdb_env_close(env);
    return 0;
}
