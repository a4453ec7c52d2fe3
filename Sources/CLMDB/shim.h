#ifndef CLMDB_SHIM_H
#define CLMDB_SHIM_H

// The whole C surface KVStore uses is Debian's liblmdb-dev (LMDB 0.9.x).
// Every flag and error code in lmdb.h is a plain integer literal, so Swift
// imports them directly and no wrapper functions are needed here. KVStore
// calls LMDB only from Sources/KVStore/LMDB/, where every return code is
// checked by `LMDBError.check(_:)`.
#include <lmdb.h>

#endif
