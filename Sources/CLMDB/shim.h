#ifndef CLMDB_SHIM_H
#define CLMDB_SHIM_H

// The whole C surface KVStore uses is Debian's liblmdb-dev (LMDB 0.9.x).
// Every flag and error code in lmdb.h is a plain integer literal, so Swift
// imports them directly and no wrapper functions are needed here. KVStore
// calls LMDB from Sources/KVStore/LMDB/ alone, whose files import this module
// `internal`ly (scripts/check-imports.py fails CI otherwise); every return
// code goes through `LMDBError.check(_:)` once an expected one (such as
// MDB_NOTFOUND) has been handled.
#include <lmdb.h>

// fallocate(2), which glibc declares only under _GNU_SOURCE (Swift's Glibc module does not define
// it). KVStore/LMDB/Environment+SizeCheck.swift extends a data.mdb that LMDB left short of its last
// page: only fallocate grows a file without ever shrinking it or overwriting what another process
// wrote meanwhile (posix_fallocate falls back to a read-then-write of single bytes, which could).
// The same prototype as glibc's on 64-bit Linux (off_t is long there).
extern int fallocate(int fd, int mode, long offset, long len);

#endif
