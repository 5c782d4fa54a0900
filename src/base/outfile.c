/* outfile.c — writing an output file without destroying what was there (outfile.h). */
#include "outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A descriptor the path names directly: "-" (with dash), /dev/stdout, /dev/stderr, /dev/fd/N,
 * /proc/self/fd/N. Reopening those by name would start a regular file over at offset 0 (or
 * fail for a pipe's /dev/fd link), so the descriptor itself is duplicated. -1 if none. */
static int named_fd(const char *p, int dash) {
    if (dash && !strcmp(p, "-")) return 1;
    if (!strcmp(p, "/dev/stdout")) return 1;
    if (!strcmp(p, "/dev/stderr")) return 2;
    const char *n = !strncmp(p, "/dev/fd/", 8) ? p + 8
                  : !strncmp(p, "/proc/self/fd/", 14) ? p + 14 : NULL;
    if (!n || *n < '0' || *n > '9') return -1;
    char *end;
    long v = strtol(n, &end, 10);
    return *end || v > 1 << 20 ? -1 : (int)v;
}

/* The file a chain of symlinks ends at (malloc'd): the path itself if it is no link.
 * A relative link is read against the folder of the link. NULL with errno on a loop. */
static char *follow_links(const char *path) {
    char *p = strdup(path);
    for (int hop = 0; p && hop < 40; hop++) {
        struct stat sb;
        if (lstat(p, &sb) || !S_ISLNK(sb.st_mode)) return p;
        char ln[4096];
        ssize_t k = readlink(p, ln, sizeof ln - 1);
        if (k < 0) { free(p); return NULL; }
        ln[k] = 0;
        const char *sl = strrchr(p, '/');
        size_t dl = ln[0] == '/' || !sl ? 0 : (size_t)(sl - p) + 1;
        char *q = malloc(dl + (size_t)k + 1);
        if (q) { memcpy(q, p, dl); memcpy(q + dl, ln, (size_t)k + 1); }
        free(p);
        p = q;
    }
    if (p) { free(p); errno = ELOOP; }
    return NULL;
}

/* The folder of a file path (malloc'd): "." for a bare name, "/" at the root. */
static char *folder_of(const char *p) {
    const char *sl = strrchr(p, '/');
    if (!sl) return strdup(".");
    if (sl == p) return strdup("/");
    return strndup(p, (size_t)(sl - p));
}

int k3_out_in_place(const char *path) {
    struct stat sb;
    return named_fd(path, 0) >= 0 || (!stat(path, &sb) && !S_ISREG(sb.st_mode) &&
                                      !S_ISDIR(sb.st_mode));
}

int k3_out_check(const char *path, int dash, char *err, size_t errlen) {
    struct stat sb;
    size_t n = strlen(path);
    if (!n || n > 4000) { snprintf(err, errlen, "'%.200s': not a usable path", path); return -1; }
    int fd = named_fd(path, dash);
    if (fd >= 0) {
        if (fcntl(fd, F_GETFD) < 0) {
            snprintf(err, errlen, "%s: descriptor %d is not open in this process", path, fd);
            return -1;
        }
        return 0;
    }
    if (path[n - 1] == '/' || (!stat(path, &sb) && S_ISDIR(sb.st_mode))) {
        snprintf(err, errlen, "%s: is a directory; give a file name (e.g. %s%sNAME)", path, path,
                 path[n - 1] == '/' ? "" : "/");
        return -1;
    }
    if (!stat(path, &sb) && !S_ISREG(sb.st_mode)) {      /* a device, FIFO: written in place */
        if (!access(path, W_OK)) return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *t = follow_links(path), *dir = t ? folder_of(t) : NULL;
    int rc = -1;
    if (!t || !dir) { snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : ENOMEM)); }
    else if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        const int e = errno, st = stat(dir, &sb);
        const char *why = st ? (e == ENOENT ? "does not exist" : strerror(e)) : "is not a folder";
        snprintf(err, errlen, "%s: the folder %s %s; create it or pass another path", path, dir,
                 why);
    } else if (!stat(t, &sb) && access(t, W_OK)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    } else {                     /* the folder must take the temporary file renamed over it */
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/.k3-probe.%ld", dir, (long)getpid());
        int pf = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (pf < 0)
            snprintf(err, errlen, "%s: cannot create files in %s: %s", path, dir, strerror(errno));
        else { close(pf); unlink(probe); rc = 0; }
    }
    free(t); free(dir);
    return rc;
}

int k3_out_open(K3Out *o, const char *path, int dash, mode_t mode, char *err, size_t errlen) {
    static atomic_uint seq;                  /* temporaries of one process's threads differ */
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->name = strdup(path);
    if (!o->name) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    struct stat sb;
    int nfd = named_fd(path, dash);
    if (nfd >= 0) {
        o->fd = fcntl(nfd, F_DUPFD_CLOEXEC, 3);
        if (o->fd < 0) {
            snprintf(err, errlen, "%s: descriptor %d: %s", path, nfd, strerror(errno));
            goto fail;
        }
        o->in_place = o->keep_fd = 1;
        return 0;
    }
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: is a directory; give a file name", path);
        goto fail;
    }
    if (!stat(path, &sb) && !S_ISREG(sb.st_mode)) {      /* /dev/null, a FIFO, a socket ... */
        o->fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (o->fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); goto fail; }
        o->in_place = 1;
        return 0;
    }
    o->target = follow_links(path);
    if (!o->target) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); goto fail; }
    int keep = !stat(o->target, &sb);
    size_t tl = strlen(o->target) + 48;
    o->tmp = malloc(tl);
    if (!o->tmp) { snprintf(err, errlen, "%s: out of memory", path); goto fail; }
    snprintf(o->tmp, tl, "%s.tmp.%ld.%u", o->target, (long)getpid(), atomic_fetch_add(&seq, 1));
    /* read and write: pack reads its trunk back (--verify) */
    o->fd = open(o->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, keep ? 0600 : mode);
    if (o->fd < 0) {
        snprintf(err, errlen, "%s: cannot create %s: %s", path, o->tmp, strerror(errno));
        free(o->tmp); o->tmp = NULL;
        goto fail;
    }
    if (keep) (void)fchmod(o->fd, sb.st_mode & 07777);  /* the old file's mode, past umask */
    return 0;
fail:
    free(o->target); free(o->name);
    memset(o, 0, sizeof *o);
    o->fd = -1;
    return -1;
}

FILE *k3_out_stdio(K3Out *o) {
    if (!o->f && o->fd >= 0) o->f = fdopen(o->fd, "w");
    return o->f;
}

int k3_out_write(K3Out *o, const void *p, size_t n) {
    if (o->f) return fwrite(p, 1, n, o->f) == n ? 0 : -1;
    const char *b = p;
    while (n) {
        ssize_t r = write(o->fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { if (!r) errno = EIO; return -1; }
        b += r; n -= (size_t)r;
    }
    return 0;
}

static void release(K3Out *o) {
    free(o->target); free(o->tmp); free(o->name);
    memset(o, 0, sizeof *o);
    o->fd = -1;
}

int k3_out_commit(K3Out *o, char *err, size_t errlen) {
    if (!o->name) { snprintf(err, errlen, "output not open"); return -1; }
    int e = 0;
    if (o->f && fflush(o->f)) e = errno;
    if (!e && !o->in_place && fsync(o->fd)) e = errno;
    if (o->f) { if (fclose(o->f) && !e) e = errno; }
    else if (close(o->fd) && !e) e = errno;
    o->f = NULL; o->fd = -1;
    if (!e && o->tmp && rename(o->tmp, o->target)) e = errno;
    if (e) {
        snprintf(err, errlen, "%s: writing it: %s", o->name, strerror(e));
        if (o->tmp) unlink(o->tmp);
    }
    release(o);
    return e ? -1 : 0;
}

void k3_out_abort(K3Out *o) {
    if (!o->name) return;
    if (o->f) fclose(o->f);
    else if (o->fd >= 0) close(o->fd);
    if (o->tmp) unlink(o->tmp);
    release(o);
}

int k3_out_save(const char *path, const void *b, size_t n, mode_t mode, char *err,
                size_t errlen) {
    K3Out o;
    if (k3_out_open(&o, path, 0, mode, err, errlen)) return -1;
    if (k3_out_write(&o, b, n)) {
        snprintf(err, errlen, "%s: writing it: %s", path, strerror(errno));
        k3_out_abort(&o);
        return -1;
    }
    return k3_out_commit(&o, err, errlen);
}
