/* dio.c — aligned O_DIRECT windows with a page-cache fallback (dio.h). */
#include "dio.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void note_buffered(K3DioFile *f, const char *why) {
    if (__atomic_exchange_n(&f->direct, 0, __ATOMIC_SEQ_CST))
        fprintf(stderr, "k3: note: O_DIRECT is not available for %s (%s); %s use buffered reads "
                "(page cache)\n", f->path, why, f->what);
}

int k3_dio_open(K3DioFile *f, const char *path, const char *what, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->what = what;
    f->dfd = -1;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    f->dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    f->direct = 1;
    if (f->dfd < 0) note_buffered(f, strerror(errno));
    return 0;
}

void k3_dio_close(K3DioFile *f) {
    if (!f->path[0]) return;                   /* never opened */
    if (f->fd >= 0) close(f->fd);
    if (f->dfd >= 0) close(f->dfd);
    f->fd = f->dfd = -1;
    f->path[0] = 0;
}

static void read_error(const K3DioFile *f, uint64_t off, uint64_t n, int64_t got, char *err,
                       size_t errlen) {
    snprintf(err, errlen, "%s: reading %llu bytes at offset %llu: %s", f->path,
             (unsigned long long)n, (unsigned long long)off,
             got < 0 ? strerror(errno) : "short read (the file is truncated)");
}

int k3_dio_pread(K3DioFile *f, void *dst, uint64_t off, uint64_t n, char *err, size_t errlen) {
    int64_t got = k3_pread_full(f->fd, dst, n, off);
    if (got < 0 || (uint64_t)got != n) { read_error(f, off, n, got, err, errlen); return -1; }
    return 0;
}

const unsigned char *k3_dio_read(K3DioFile *f, unsigned char *buf, uint64_t off, uint64_t n,
                                 uint64_t *moved, char *err, size_t errlen) {
    if (__atomic_load_n(&f->direct, __ATOMIC_SEQ_CST) && f->dfd >= 0) {
        const uint64_t a0 = off & ~(uint64_t)(K3_DIO_ALIGN - 1), need = off + n - a0;
        const uint64_t len = k3_up4k(need);
        int64_t got = k3_pread_full(f->dfd, buf, len, a0);
        if (got >= 0 && (uint64_t)got >= need) {
            if (moved) *moved = len;
            return buf + (off - a0);
        }
        if (got >= 0 || errno != EINVAL) { read_error(f, off, n, got, err, errlen); return NULL; }
        note_buffered(f, "pread: EINVAL");
    }
    if (k3_dio_pread(f, buf, off, n, err, errlen)) return NULL;
    if (moved) *moved = n;
    return buf;
}
