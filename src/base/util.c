/* util.c — clocks, memory figures, id lists, whole-file reads. */
#include "util.h"
#include "fault.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double k3_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double k3_progress_every(void) {
    const char *v = getenv("K3_PROGRESS_SECONDS");
    const double s = v && *v ? atof(v) : 5.0;
    return s > 0 ? s : 5.0;
}

void k3_secs_text(char *b, size_t n, double s) {
    if (s < 60) snprintf(b, n, "%.0f s", s);
    else if (s < 3600) snprintf(b, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(b, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

uint64_t k3_draw_seed(void) {
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) { if (read(fd, &s, sizeof s) != (ssize_t)sizeof s) s = 0; close(fd); }
    if (!s) s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(k3_now() * 1e9);
    return s % 10000000000ULL;
}

uint64_t k3_hash(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

/* VmHWM, which `echo 5 > /proc/self/clear_refs` resets (k3 bench over N ranks runs each
 * rep in the process); getrusage's ru_maxrss keeps what exited threads saw, so it is only
 * the fallback. */
uint64_t k3_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    int got = 0;
    while (f && !got && fgets(line, sizeof line, f)) got = sscanf(line, "VmHWM: %llu kB", &kb);
    if (f) fclose(f);
    if (got == 1) return (uint64_t)kb * 1024u;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;          /* Linux reports KiB */
}

uint64_t k3_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024u;
}

int k3_parse_ids(const char *s, int **ids, int *n, char *err, size_t errlen) {
    size_t cap = 16, k = 0;
    int *v = malloc(cap * sizeof(int));
    const char *p = s;
    if (!v) { snprintf(err, errlen, "out of memory"); return -1; }
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT_MAX) {
            snprintf(err, errlen, "--ids: '%.20s' is not a non-negative integer "
                     "(expected a list like 1,2,3)", p);
            free(v); return -1;
        }
        if (k == cap) {
            int *w = realloc(v, (cap *= 2) * sizeof(int));
            if (!w) { free(v); snprintf(err, errlen, "out of memory"); return -1; }
            v = w;
        }
        v[k++] = (int)x;
        p = end;
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (*p == ',') p++;
        else if (*p) {
            snprintf(err, errlen, "--ids: unexpected '%c' (expected a list like 1,2,3)", *p);
            free(v);
            return -1;
        }
    }
    *ids = v; *n = (int)k;
    return 0;
}

char *k3_slurp(const char *path, size_t max, size_t *len, char *err, size_t errlen) {
    int std = !strcmp(path, "-");
    FILE *f = std ? stdin : fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    size_t cap = 1 << 16, n = 0;
    if (!fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory, expected a file", path);
        if (!std) fclose(f);
        errno = EISDIR;
        return NULL;
    }
    if (!fstat(fileno(f), &st) && S_ISREG(st.st_mode)) {      /* size it once */
        if ((uint64_t)st.st_size > max) {
            snprintf(err, errlen, "%s: %llu bytes is more than the %zu this file may have", path,
                     (unsigned long long)st.st_size, max);
            if (!std) fclose(f);
            errno = EFBIG;
            return NULL;
        }
        cap = (size_t)st.st_size + 1;
    }
    char *b = malloc(cap + 1);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        if (n > max) { free(b); b = NULL; errno = EFBIG; break; }
        char *nb = realloc(b, (cap *= 2) + 1);
        if (!nb) { free(b); b = NULL; errno = ENOMEM; break; }
        b = nb;
    }
    int bad = ferror(f), e = errno;
    if (!std) fclose(f);
    if (!b || bad || n > max) {
        if (n > max)
            snprintf(err, errlen, "%s: more than the %zu bytes this file may have", path, max);
        else snprintf(err, errlen, "%s: %s", path, bad ? "read error" : strerror(e));
        free(b);
        errno = bad ? EIO : e;
        return NULL;
    }
    b[n] = 0;
    if (len) *len = n;
    return b;
}

char *k3_read_file(const char *path, size_t *len) {
    char err[64];
    return k3_slurp(path, SIZE_MAX, len, err, sizeof err);
}


/* Weak: the fuzz builds link util.c without fault.c (and then have no knob). */
#pragma weak k3_faults

int64_t k3_pread_full(int fd, void *dst, uint64_t n, uint64_t off) {
    uint64_t got = 0, cap = k3_faults ? (uint64_t)k3_faults()->short_reads : 0;
    int tick = 0;
    if (cap && (fcntl(fd, F_GETFL) & O_DIRECT)) cap = (cap + 4095) & ~(uint64_t)4095;
    while (got < n) {
        uint64_t want = n - got;
        if (want > ((uint64_t)1 << 30)) want = (uint64_t)1 << 30;
        if (cap && want > cap) want = cap;                /* K3_FAULT_SHORT_READS */
        ssize_t r;
        if (cap && !(tick++ & 1)) { r = -1; errno = EINTR; }
        else r = pread(fd, (char *)dst + got, (size_t)want, (off_t)(off + got));
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) break;
        got += (uint64_t)r;
    }
    return (int64_t)got;
}

int k3_parse_int(const char *flag, const char *v, int lo, int *out) {
    char err[300];
    if (k3_parse_int_msg(flag, v, lo, out, err, sizeof err)) {
        fprintf(stderr, "k3: %s\n", err);
        return -1;
    }
    return 0;
}

int k3_parse_int_msg(const char *flag, const char *v, int lo, int *out, char *err, size_t errlen) {
    char *end = NULL;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > (1L << 30)) {
        snprintf(err, errlen, "%s: '%.100s' is not an integer >= %d", flag, v ? v : "", lo);
        return -1;
    }
    *out = (int)x;
    return 0;
}

void k3_sigint_once(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}
