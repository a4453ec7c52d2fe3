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

#endif
