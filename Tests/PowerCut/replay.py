#!/usr/bin/env python3
"""Rebuilds the files a power cut could leave behind, from the log powercut-shim.c recorded.

    replay.py snapshot ROOT BASE
        Copies the regular files and directories under ROOT into BASE (before the recorded run),
        with BASE.json: each file's inode number and mode, each directory's mode.
    replay.py generate ROOT BASE LOG OUT MAXSTATES SEED [FIRST COUNT]
        Writes up to MAXSTATES crash states OUT/sNNNNN (each a copy of ROOT's tree as the disk could
        hold it after a power cut) and OUT/states.json describing them; prints one summary line.
        With FIRST and COUNT, only states FIRST..<FIRST+COUNT of the same (seeded) list: the long
        runs build and check them a chunk at a time.

The model (README.md says more): a write is durable once an fsync/fdatasync of its file completed
after it, or at once when its descriptor is O_DSYNC/O_SYNC; directory operations (create, rename,
link, unlink, mkdir, rmdir) are durable once an fsync of their directory completed after them, and
reach the disk in the order they ran (a journal commits them in order). At a crash point p (the
operations before p completed, operation p was in flight) every durable operation is on the disk;
each pending write may or may not be, and may be torn at a sector (512) or page (4096) boundary;
the pending directory operations reach the disk as some prefix of them.
"""
import json
import os
import random
import shutil
import struct
import sys

OP_OPEN, OP_CREATE, OP_WRITE, OP_TRUNC, OP_FSYNC, OP_DIRSYNC = 1, 2, 3, 4, 5, 6
OP_RENAME, OP_LINK, OP_UNLINK, OP_MKDIR, OP_MARK, OP_MSYNC, OP_SYNC_RANGE, OP_RMDIR = 7, 8, 9, 10, 11, 12, 13, 14
FLAG_DSYNC = 1
DIR_OPS = {OP_CREATE, OP_RENAME, OP_LINK, OP_UNLINK, OP_MKDIR, OP_RMDIR}
STATE_OPS = {OP_WRITE, OP_TRUNC} | DIR_OPS
HEADER = struct.Struct("<IIQqQQII")
SKIPPED = {"lock.mdb"}  # LMDB rebuilds its lock file when the first process opens after a reboot


class Op:
    __slots__ = ("index", "op", "flags", "ino", "offset", "length", "path", "path2", "data")

    def __init__(self, index, op, flags, ino, offset, length, path, path2, data):
        self.index, self.op, self.flags, self.ino = index, op, flags, ino
        self.offset, self.length, self.path, self.path2, self.data = offset, length, path, path2, data

    @property
    def is_sync_point(self):
        return self.op in (OP_FSYNC, OP_DIRSYNC) or (self.op == OP_WRITE and self.flags & FLAG_DSYNC)


def read_log(path):
    ops = []
    with open(path, "rb") as f:
        blob = f.read()
    pos = 0
    while pos + HEADER.size <= len(blob):
        op, flags, ino, offset, length, datalen, plen, p2len = HEADER.unpack_from(blob, pos)
        pos += HEADER.size
        p = blob[pos:pos + plen].decode(errors="surrogateescape"); pos += plen
        p2 = blob[pos:pos + p2len].decode(errors="surrogateescape"); pos += p2len
        data = blob[pos:pos + datalen]; pos += datalen
        ops.append(Op(len(ops), op, flags, ino, offset, length, p, p2, data))
    if pos != len(blob):
        raise SystemExit(f"replay.py: the log ends in a torn record at byte {pos} of {len(blob)}")
    return ops


def snapshot(root, base):
    info = {"files": {}, "dirs": {}}
    for directory, dirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        os.makedirs(os.path.join(base, rel), exist_ok=True)
        info["dirs"][rel] = os.stat(directory).st_mode & 0o7777
        for name in files:
            full = os.path.join(directory, name)
            st = os.lstat(full)
            if not os.path.isfile(full) or os.path.islink(full) or name in SKIPPED:
                continue
            shutil.copyfile(full, os.path.join(base, rel, name))
            info["files"][os.path.normpath(os.path.join(rel, name))] = [st.st_ino, st.st_mode & 0o7777]
    with open(base + ".json", "w") as f:
        json.dump(info, f)


class Inode:
    __slots__ = ("data", "mode")

    def __init__(self, data=b"", mode=0o600):
        self.data, self.mode = bytearray(data), mode


class Disk:
    """The files as the disk holds them: names → inode objects, directories."""

    def __init__(self, root, base, info):
        self.root = root
        self.names = {}
        self.inodes = {}   # inode number → the newest object with that number
        self.dirs = dict(info["dirs"])
        for rel, (ino, mode) in info["files"].items():
            with open(os.path.join(base, rel), "rb") as f:
                node = Inode(f.read(), mode)
            self.names[rel] = node
            self.inodes[ino] = node

    def rel(self, path):
        return os.path.normpath(os.path.relpath(path, self.root))

    def node(self, ino):
        node = self.inodes.get(ino)
        if node is None:   # opened before the recording began but not in BASE (a lock file)
            node = self.inodes[ino] = Inode()
        return node

    def write(self, op, start=0, end=None):
        node = self.node(op.ino)
        data = op.data if end is None and start == 0 else op.data[start:end]
        at = op.offset + start
        if len(node.data) < at:
            node.data.extend(b"\0" * (at - len(node.data)))
        node.data[at:at + len(data)] = data

    def apply(self, op, created_node=None):
        if op.op == OP_WRITE:
            self.write(op)
        elif op.op == OP_TRUNC:
            node = self.node(op.ino)
            if len(node.data) > op.length:
                del node.data[op.length:]
            else:
                node.data.extend(b"\0" * (op.length - len(node.data)))
        elif op.op == OP_CREATE:
            self.names[self.rel(op.path)] = created_node
        elif op.op == OP_RENAME:
            src, dst = self.rel(op.path), self.rel(op.path2)
            if src in self.names:
                self.names[dst] = self.names.pop(src)
            elif src in self.dirs:
                for key in [k for k in self.dirs if k == src or k.startswith(src + "/")]:
                    self.dirs[dst + key[len(src):]] = self.dirs.pop(key)
                for key in [k for k in self.names if k.startswith(src + "/")]:
                    self.names[dst + key[len(src):]] = self.names.pop(key)
        elif op.op == OP_LINK:
            src = self.rel(op.path)
            if src in self.names:
                self.names[self.rel(op.path2)] = self.names[src]
        elif op.op == OP_UNLINK:
            self.names.pop(self.rel(op.path), None)
        elif op.op == OP_MKDIR:
            self.dirs[self.rel(op.path)] = 0o700
        elif op.op == OP_RMDIR:
            self.dirs.pop(self.rel(op.path), None)

    def materialize(self, out):
        for rel, mode in sorted(self.dirs.items()):
            path = os.path.join(out, rel)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, mode or 0o700)
        for rel, node in self.names.items():
            if os.path.basename(rel) in SKIPPED:
                continue
            path = os.path.join(out, rel)
            if not os.path.isdir(os.path.dirname(path)):
                continue   # its directory did not reach the disk
            with open(path, "wb") as f:
                f.write(node.data)
            os.chmod(path, node.mode)


def durability(ops):
    """For each operation, the index of the operation that made it durable (or None)."""
    durable_at = [None] * len(ops)
    unsynced = {}        # inode → indices of writes/truncations not yet synced
    unsynced_dir = []    # directory operations not yet synced
    for op in ops:
        if op.op in (OP_WRITE, OP_TRUNC):
            if op.op == OP_WRITE and op.flags & FLAG_DSYNC:
                durable_at[op.index] = op.index
            else:
                unsynced.setdefault(op.ino, []).append(op.index)
        elif op.op == OP_FSYNC:
            for i in unsynced.pop(op.ino, []):
                durable_at[i] = op.index
        elif op.op in DIR_OPS:
            unsynced_dir.append(op.index)
        elif op.op == OP_DIRSYNC:
            directory = op.path.rstrip("/")
            touched = [i for i in unsynced_dir
                       if os.path.dirname(ops[i].path) == directory
                       or (ops[i].path2 and os.path.dirname(ops[i].path2) == directory)]
            if touched:
                # In order: syncing one makes every earlier directory operation durable too.
                last = max(touched)
                for i in unsynced_dir:
                    if i <= last:
                        durable_at[i] = op.index
                unsynced_dir = [i for i in unsynced_dir if i > last]
    return durable_at


def marks_before(ops, p):
    """What the writer had acknowledged before crash point p: {kind: value}, and per kind the value
    acknowledged before the last completed sync of any file (fsync/fdatasync/O_DSYNC write)."""
    acked, synced, last_sync_acked = {}, {}, {}
    for op in ops[:p]:
        if op.op == OP_MARK:
            for line in op.data.decode(errors="replace").splitlines():
                words = line.split()
                if len(words) >= 2 and words[0] in ("acked", "synced") and words[-1].lstrip("-").isdigit():
                    kind = " ".join([words[0]] + words[1:-1])
                    acked[kind] = int(words[-1])
        elif op.is_sync_point:
            last_sync_acked = dict(acked)
    synced = last_sync_acked
    return acked, synced


def generate(root, base, log, out, max_states, seed, first=0, count=None):
    with open(base + ".json") as f:
        info = json.load(f)
    ops = read_log(log)
    if any(op.op == OP_MSYNC for op in ops):
        raise SystemExit("replay.py: the writer used msync (mapped writes are not recorded): cannot replay")
    durable_at = durability(ops)
    rng = random.Random(seed)

    # Crash points: before every sync point completes, right after every acknowledgement, the end.
    points = sorted({op.index for op in ops if op.is_sync_point}
                    | {op.index + 1 for op in ops if op.op == OP_MARK} | {len(ops)})
    candidates = []
    for p in points:
        pending = [i for i in range(p + (1 if p < len(ops) else 0))
                   if ops[i].op in STATE_OPS and (durable_at[i] is None or durable_at[i] >= p)
                   and not (i == p and ops[i].op != OP_WRITE)]
        candidates.append((p, "prefix", ()))
        if not pending:
            continue
        candidates.append((p, "none", ()))
        writes = [i for i in pending if ops[i].op == OP_WRITE]
        for i in rng.sample(pending, min(len(pending), 6)):
            candidates.append((p, "omit-one", (i,)))
        for _ in range(4):
            candidates.append((p, "subset", (rng.random(),)))
        for i in rng.sample(writes, min(len(writes), 3)):
            op = ops[i]
            unit = 4096 if len(op.data) > 4096 and rng.random() < 0.5 else 512
            cuts = list(range(unit, len(op.data), unit))
            if cuts:
                candidates.append((p, "torn", (i, rng.choice(cuts), rng.random() < 0.5)))
            elif len(op.data) > 8:
                # Smaller than a sector (LMDB's meta page update): a disk writes a sector whole, so
                # this tear is beyond what a power cut does; counted apart.
                candidates.append((p, "torn-subsector", (i, rng.randrange(1, len(op.data)), rng.random() < 0.5)))
    # Keep every prefix state at a sync point when the budget allows, then sample the rest.
    if len(candidates) > max_states:
        prefixes = [c for c in candidates if c[1] == "prefix"]
        others = [c for c in candidates if c[1] != "prefix"]
        if len(prefixes) > max_states // 3:
            prefixes = rng.sample(prefixes, max_states // 3)
        others = rng.sample(others, max_states - len(prefixes))
        candidates = sorted(prefixes + others, key=lambda c: c[0])

    os.makedirs(out, exist_ok=True)
    states = []
    total = len(candidates)
    first = max(0, first)
    chosen_range = range(first, min(total, first + count) if count is not None else total)
    for number, (p, kind, params) in enumerate(candidates):
        if number not in chosen_range:
            continue
        rng = random.Random(seed * 1_000_003 + number)   # the same state whichever chunk builds it
        in_flight = p if p < len(ops) and ops[p].op == OP_WRITE else None
        pending = [i for i in range(p + (1 if in_flight is not None else 0))
                   if ops[i].op in STATE_OPS and (durable_at[i] is None or durable_at[i] >= p)]
        pending_dir = [i for i in pending if ops[i].op in DIR_OPS]
        chosen = set(pending)
        if in_flight is not None and kind == "prefix":
            chosen.discard(in_flight)   # the prefix state: every operation before p, whole
        tear = None
        if kind == "none":
            chosen = set()
        elif kind == "omit-one":
            chosen.discard(params[0])
        elif kind == "subset":
            chosen = {i for i in pending if rng.random() < params[0]}
        elif kind in ("torn", "torn-subsector"):
            tear = params
        # Directory operations reach the disk in order: keep the prefix up to the first one left out.
        kept_dir = 0
        while kept_dir < len(pending_dir) and pending_dir[kept_dir] in chosen:
            kept_dir += 1
        for i in pending_dir[kept_dir:]:
            chosen.discard(i)
        disk = Disk(root, base, info)
        for op in ops[:p + (1 if in_flight is not None else 0)]:
            created = None
            if op.op == OP_CREATE:
                created = disk.inodes[op.ino] = Inode(b"", 0o600)
            applied = op.index not in pending or op.index in chosen
            if tear is not None and op.index == tear[0]:
                cut, keep_head = tear[1], tear[2]
                if keep_head:
                    disk.write(op, 0, cut)
                else:
                    disk.write(op, cut, None)
            elif applied and op.op in STATE_OPS:
                disk.apply(op, created)
        name = "s%05d" % number
        disk.materialize(os.path.join(out, name))
        acked, synced = marks_before(ops, p)
        states.append({"name": name, "point": p, "kind": kind, "pending": len(pending),
                       "applied": len(chosen), "acked": acked, "syncedAcked": synced})
    with open(os.path.join(out, "states.json"), "w") as f:
        json.dump({"operations": len(ops), "points": len(points), "total": total, "states": states}, f)
    counts = {}
    for op in ops:
        counts[op.op] = counts.get(op.op, 0) + 1
    names = {OP_OPEN: "open", OP_CREATE: "create", OP_WRITE: "write", OP_TRUNC: "truncate", OP_FSYNC: "fsync",
             OP_DIRSYNC: "dirsync", OP_RENAME: "rename", OP_LINK: "link", OP_UNLINK: "unlink", OP_MKDIR: "mkdir",
             OP_MARK: "mark", OP_SYNC_RANGE: "sync_file_range", OP_RMDIR: "rmdir"}
    dsync = sum(1 for op in ops if op.op == OP_WRITE and op.flags & FLAG_DSYNC)
    print("generated states=%d total=%d points=%d operations=%d dsyncWrites=%d %s" % (
        len(states), total, len(points), len(ops), dsync,
        " ".join("%s=%d" % (names.get(k, str(k)), v) for k, v in sorted(counts.items()))))


def main(argv):
    if len(argv) >= 3 and argv[0] == "snapshot":
        snapshot(argv[1], argv[2])
    elif len(argv) >= 7 and argv[0] == "generate":
        first, count = (int(argv[7]), int(argv[8])) if len(argv) >= 9 else (0, None)
        generate(argv[1], argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]), first, count)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
