// powercut-shim: an LD_PRELOAD library that records what a process writes, syncs and renames under
// one directory, so that replay.py (next to it) can rebuild the files as a power cut could leave them.
// See README.md next to this file.
//
//   POWERCUT_DIR=/abs/real/dir   files under it are recorded (by the path /proc/self/fd resolves to)
//   POWERCUT_LOG=/abs/log        the record log (created, appended)
//   POWERCUT_MARK_FD=1           optional: writes to this descriptor are recorded as MARK records
//                                (the writer prints "acked N" there after each commit returns)
//
// Every intercepted call runs under one mutex, so the log's order is the order the calls ran in.
// Records: a 48-byte header (op, flags, ino, offset, length, data length, path length, path2 length,
// little-endian) followed by path, path2 and data.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    OP_OPEN = 1, OP_CREATE = 2, OP_WRITE = 3, OP_TRUNC = 4, OP_FSYNC = 5, OP_DIRSYNC = 6,
    OP_RENAME = 7, OP_LINK = 8, OP_UNLINK = 9, OP_MKDIR = 10, OP_MARK = 11, OP_MSYNC = 12,
    OP_SYNC_RANGE = 13, OP_RMDIR = 14,
};
enum { FLAG_DSYNC = 1, FLAG_DATASYNC = 2 };

struct header {
    uint32_t op, flags;
    uint64_t ino;
    int64_t offset;
    uint64_t length, datalen;
    uint32_t pathlen, path2len;
};

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int log_fd = -2;
static char root[PATH_MAX];
static size_t root_len;
static int mark_fd = -1;

static void setup(void) {
    if (log_fd != -2) return;
    log_fd = -1;
    const char *dir = getenv("POWERCUT_DIR"), *log = getenv("POWERCUT_LOG"), *mark = getenv("POWERCUT_MARK_FD");
    if (!dir || !log) return;
    snprintf(root, sizeof root, "%s", dir);
    root_len = strlen(root);
    while (root_len > 1 && root[root_len - 1] == '/') root[--root_len] = 0;
    if (mark) mark_fd = atoi(mark);
    log_fd = (int)syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

static int under_root(const char *path) {
    return log_fd >= 0 && strncmp(path, root, root_len) == 0 && (path[root_len] == '/' || path[root_len] == 0);
}

static void put(const void *bytes, size_t count) {
    const char *p = bytes;
    while (count > 0) {
        ssize_t n = syscall(SYS_write, log_fd, p, count);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { static const char m[] = "powercut-shim: cannot write the log\n"; syscall(SYS_write, 2, m, sizeof m - 1); abort(); }
        p += n;
        count -= (size_t)n;
    }
}

static void record(uint32_t op, uint32_t flags, uint64_t ino, int64_t offset, uint64_t length,
                   const char *path, const char *path2, const struct iovec *data, int datacount) {
    struct header h = {op, flags, ino, offset, length, 0, path ? (uint32_t)strlen(path) : 0,
                       path2 ? (uint32_t)strlen(path2) : 0};
    for (int i = 0; i < datacount; i++) h.datalen += data[i].iov_len;
    put(&h, sizeof h);
    if (path) put(path, h.pathlen);
    if (path2) put(path2, h.path2len);
    for (int i = 0; i < datacount; i++) put(data[i].iov_base, data[i].iov_len);
}

/// The path `fd` refers to, if it is under the recorded directory.
static int fd_path(int fd, char *out) {
    if (log_fd < 0 || fd < 0) return 0;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, PATH_MAX - 1);
    if (n <= 0) return 0;
    out[n] = 0;
    return under_root(out);
}

/// `name` relative to `dirfd` as an absolute path (not resolving symbolic links in it).
static int at_path(int dirfd, const char *name, char *out) {
    if (log_fd < 0 || !name) return 0;
    if (name[0] == '/') {
        snprintf(out, PATH_MAX, "%s", name);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return 0;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n <= 0) return 0;
            base[n] = 0;
        }
        snprintf(out, PATH_MAX, "%s/%s", base, name);
    }
    return under_root(out);
}

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

// MARK: - Opening

static void after_open(int fd, int flags, int existed) {
    char path[PATH_MAX];
    if (fd < 0 || !fd_path(fd, path)) return;
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    if (!existed && (flags & O_CREAT)) record(OP_CREATE, 0, st.st_ino, 0, 0, path, NULL, NULL, 0);
    record(OP_OPEN, (uint32_t)flags, st.st_ino, 0, 0, path, NULL, NULL, 0);
    if ((flags & O_TRUNC) && S_ISREG(st.st_mode) && (flags & O_ACCMODE) != O_RDONLY)
        record(OP_TRUNC, 0, st.st_ino, 0, 0, path, NULL, NULL, 0);
}

static int exists_at(int dirfd, const char *name) {
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int do_openat(int dirfd, const char *name, int flags, mode_t mode, int (*call)(int, const char *, int, ...)) {
    setup();
    pthread_mutex_lock(&lock);
    int existed = (flags & O_CREAT) ? exists_at(dirfd, name) : 1;
    int fd = call(dirfd, name, flags, mode);
    int saved = errno;
    after_open(fd, flags, existed);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return fd;
}

static int via_open(int dirfd, const char *name, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = va_arg(ap, mode_t); va_end(ap);
    (void)dirfd;
    REAL(open);
    return real_open(name, flags, mode);
}
static int via_open64(int dirfd, const char *name, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = va_arg(ap, mode_t); va_end(ap);
    (void)dirfd;
    REAL(open64);
    return real_open64(name, flags, mode);
}
static int via_openat(int dirfd, const char *name, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = va_arg(ap, mode_t); va_end(ap);
    REAL(openat);
    return real_openat(dirfd, name, flags, mode);
}
static int via_openat64(int dirfd, const char *name, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = va_arg(ap, mode_t); va_end(ap);
    REAL(openat64);
    return real_openat64(dirfd, name, flags, mode);
}

#define MODE_ARG mode_t mode = 0; if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
int open(const char *name, int flags, ...) { MODE_ARG return do_openat(AT_FDCWD, name, flags, mode, via_open); }
int open64(const char *name, int flags, ...) { MODE_ARG return do_openat(AT_FDCWD, name, flags, mode, via_open64); }
int openat(int dirfd, const char *name, int flags, ...) { MODE_ARG return do_openat(dirfd, name, flags, mode, via_openat); }
int openat64(int dirfd, const char *name, int flags, ...) { MODE_ARG return do_openat(dirfd, name, flags, mode, via_openat64); }
int __open_2(const char *name, int flags) { return do_openat(AT_FDCWD, name, flags, 0, via_open); }
int __open64_2(const char *name, int flags) { return do_openat(AT_FDCWD, name, flags, 0, via_open64); }
int __openat_2(int dirfd, const char *name, int flags) { return do_openat(dirfd, name, flags, 0, via_openat); }
int __openat64_2(int dirfd, const char *name, int flags) { return do_openat(dirfd, name, flags, 0, via_openat64); }
int creat(const char *name, mode_t mode) { return do_openat(AT_FDCWD, name, O_CREAT | O_WRONLY | O_TRUNC, mode, via_open); }
int creat64(const char *name, mode_t mode) { return do_openat(AT_FDCWD, name, O_CREAT | O_WRONLY | O_TRUNC, mode, via_open64); }

// MARK: - Writing

/// What a write needs to know before it runs, to record it after.
struct pending { int tracked, marked, dsync; off_t offset; ino_t ino; char path[PATH_MAX]; };

static void write_begin(struct pending *p, int fd, off_t offset) {
    setup();
    pthread_mutex_lock(&lock);
    p->tracked = fd_path(fd, p->path);
    p->marked = !p->tracked && fd == mark_fd && log_fd >= 0;
    p->dsync = 0;
    p->offset = offset;
    if (p->tracked) {
        struct stat st;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { p->tracked = 0; return; }
        p->ino = st.st_ino;
        p->dsync = (fl & (O_DSYNC | O_SYNC)) != 0;
        if (offset < 0) p->offset = (fl & O_APPEND) ? st.st_size : lseek(fd, 0, SEEK_CUR);
    }
}

/// Records the `n` bytes of `iov` a write wrote, and unlocks.
static ssize_t write_end(struct pending *p, ssize_t n, const struct iovec *iov, int count) {
    int saved = errno;
    if (n > 0 && (p->tracked || p->marked)) {
        struct iovec cut[1024];
        int used = 0;
        size_t left = (size_t)n;
        for (int i = 0; i < count && left > 0 && used < 1024; i++) {
            cut[used].iov_base = iov[i].iov_base;
            cut[used].iov_len = iov[i].iov_len < left ? iov[i].iov_len : left;
            left -= cut[used].iov_len;
            used++;
        }
        if (p->marked) record(OP_MARK, 0, 0, 0, (uint64_t)n, NULL, NULL, cut, used);
        else record(OP_WRITE, p->dsync ? FLAG_DSYNC : 0, p->ino, p->offset, (uint64_t)n, p->path, NULL, cut, used);
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    return n;
}

#define ONE(buf, count) struct iovec one = {(void *)(buf), (count)}
ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write); struct pending p; ONE(buf, count);
    write_begin(&p, fd, -1);
    return write_end(&p, real_write(fd, buf, count), &one, 1);
}
ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite); struct pending p; ONE(buf, count);
    write_begin(&p, fd, offset);
    return write_end(&p, real_pwrite(fd, buf, count, offset), &one, 1);
}
ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    REAL(pwrite64); struct pending p; ONE(buf, count);
    write_begin(&p, fd, offset);
    return write_end(&p, real_pwrite64(fd, buf, count, offset), &one, 1);
}
ssize_t writev(int fd, const struct iovec *iov, int count) {
    REAL(writev); struct pending p;
    write_begin(&p, fd, -1);
    return write_end(&p, real_writev(fd, iov, count), iov, count);
}
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    REAL(pwritev); struct pending p;
    write_begin(&p, fd, offset);
    return write_end(&p, real_pwritev(fd, iov, count, offset), iov, count);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int count, off64_t offset) {
    REAL(pwritev64); struct pending p;
    write_begin(&p, fd, offset);
    return write_end(&p, real_pwritev64(fd, iov, count, offset), iov, count);
}
ssize_t pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    REAL(pwritev2); struct pending p;
    write_begin(&p, fd, offset < 0 ? -1 : offset);
    return write_end(&p, real_pwritev2(fd, iov, count, offset, flags), iov, count);
}

/// Records a call on descriptor `fd` that returned `rc` (truncation or sync), and unlocks.
static int fd_op_end(int rc, int fd, uint32_t op, uint32_t flags, uint64_t length) {
    int saved = errno;
    char path[PATH_MAX];
    struct stat st;
    if (rc == 0 && fd_path(fd, path) && fstat(fd, &st) == 0) {
        if (op == OP_TRUNC && S_ISREG(st.st_mode)) record(OP_TRUNC, 0, st.st_ino, 0, length, path, NULL, NULL, 0);
        else if (op != OP_TRUNC && S_ISDIR(st.st_mode)) record(OP_DIRSYNC, 0, st.st_ino, 0, 0, path, NULL, NULL, 0);
        else if (op != OP_TRUNC) record(op, flags, st.st_ino, 0, 0, path, NULL, NULL, 0);
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    return rc;
}
static void locked(void) { setup(); pthread_mutex_lock(&lock); }

int ftruncate(int fd, off_t length) { REAL(ftruncate); locked(); return fd_op_end(real_ftruncate(fd, length), fd, OP_TRUNC, 0, (uint64_t)length); }
int ftruncate64(int fd, off64_t length) { REAL(ftruncate64); locked(); return fd_op_end(real_ftruncate64(fd, length), fd, OP_TRUNC, 0, (uint64_t)length); }

// MARK: - Syncing

int fsync(int fd) { REAL(fsync); locked(); return fd_op_end(real_fsync(fd), fd, OP_FSYNC, 0, 0); }
int fdatasync(int fd) { REAL(fdatasync); locked(); return fd_op_end(real_fdatasync(fd), fd, OP_FSYNC, FLAG_DATASYNC, 0); }
int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags) {
    REAL(sync_file_range); locked();
    return fd_op_end(real_sync_file_range(fd, offset, nbytes, flags), fd, OP_SYNC_RANGE, flags, 0);
}
int msync(void *addr, size_t length, int flags) {
    REAL(msync); locked();
    int rc = real_msync(addr, length, flags);
    int saved = errno;
    // Mapped writes are not recorded: the replayer refuses a log with MSYNC records in it.
    if (rc == 0 && log_fd >= 0) record(OP_MSYNC, (uint32_t)flags, 0, (int64_t)(intptr_t)addr, length, NULL, NULL, NULL, 0);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return rc;
}

// MARK: - Directory operations

struct names { int in; char path1[PATH_MAX], path2[PATH_MAX]; int two; };

static void names_begin(struct names *n, int dirfd1, const char *name1, int dirfd2, const char *name2) {
    locked();
    n->two = name2 != NULL;
    n->in = at_path(dirfd1, name1, n->path1);
    if (name2) n->in |= at_path(dirfd2, name2, n->path2);
}
static int names_end(struct names *n, int rc, uint32_t op) {
    int saved = errno;
    if (rc == 0 && n->in) record(op, 0, 0, 0, 0, n->path1, n->two ? n->path2 : NULL, NULL, 0);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return rc;
}
#define NAMES(op, d1, n1, d2, n2, callexpr) struct names n; names_begin(&n, d1, n1, d2, n2); return names_end(&n, callexpr, op)

int rename(const char *from, const char *to) { REAL(rename); NAMES(OP_RENAME, AT_FDCWD, from, AT_FDCWD, to, real_rename(from, to)); }
int renameat(int fromfd, const char *from, int tofd, const char *to) {
    REAL(renameat); NAMES(OP_RENAME, fromfd, from, tofd, to, real_renameat(fromfd, from, tofd, to));
}
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    REAL(renameat2); NAMES(OP_RENAME, fromfd, from, tofd, to, real_renameat2(fromfd, from, tofd, to, flags));
}
int link(const char *from, const char *to) { REAL(link); NAMES(OP_LINK, AT_FDCWD, from, AT_FDCWD, to, real_link(from, to)); }
int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
    REAL(linkat); NAMES(OP_LINK, fromfd, from, tofd, to, real_linkat(fromfd, from, tofd, to, flags));
}
int unlink(const char *name) { REAL(unlink); NAMES(OP_UNLINK, AT_FDCWD, name, AT_FDCWD, NULL, real_unlink(name)); }
int unlinkat(int dirfd, const char *name, int flags) {
    REAL(unlinkat); NAMES((flags & AT_REMOVEDIR) ? OP_RMDIR : OP_UNLINK, dirfd, name, AT_FDCWD, NULL, real_unlinkat(dirfd, name, flags));
}
int rmdir(const char *name) { REAL(rmdir); NAMES(OP_RMDIR, AT_FDCWD, name, AT_FDCWD, NULL, real_rmdir(name)); }
int mkdir(const char *name, mode_t mode) { REAL(mkdir); NAMES(OP_MKDIR, AT_FDCWD, name, AT_FDCWD, NULL, real_mkdir(name, mode)); }
int mkdirat(int dirfd, const char *name, mode_t mode) {
    REAL(mkdirat); NAMES(OP_MKDIR, dirfd, name, AT_FDCWD, NULL, real_mkdirat(dirfd, name, mode));
}
