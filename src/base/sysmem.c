/* sysmem.c — this process's resident bytes, the cgroup memory limit, and large buffers on
 * 2 MB pages (sysmem.h). */
#include "sysmem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint64_t k3_rss_now(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long sz = 0, res = 0;
    if (f) { if (fscanf(f, "%llu %llu", &sz, &res) != 2) res = 0; fclose(f); }
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t read_u64_file(const char *path) {
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    char buf[64];
    if (!f) return 0;
    if (fgets(buf, sizeof buf, f)) v = strncmp(buf, "max", 3) ? strtoull(buf, NULL, 10) : 0;
    fclose(f);
    return v;
}

/* cgroup memory limit minus what the group's other processes hold (0 = no limit). */
uint64_t k3_cgroup_available(uint64_t self_rss, char *desc, size_t dn) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024], path[1400];
    uint64_t lim = 0, used = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *p = strstr(line, ":memory:");
        if (p) {
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", p + 8);
            lim = read_u64_file(path);
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.stat", p + 8);
            FILE *s = fopen(path, "r");
            char k[64]; unsigned long long v;
            while (s && fscanf(s, "%63s %llu", k, &v) == 2) if (!strcmp(k, "total_rss")) used = v;
            if (s) fclose(s);
            snprintf(desc, dn, "cgroup v1 %.200s", p + 8);
        } else if (!strncmp(line, "0::", 3) && !lim) {
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
            lim = read_u64_file(path);
            snprintf(desc, dn, "cgroup v2 %.200s", line + 3);
        }
    }
    fclose(f);
    if (!lim || lim > (1ull << 60)) return 0;
    uint64_t others = used > self_rss ? used - self_rss : 0;
    return lim > others ? lim - others : 1;
}

void *k3_alloc_huge(size_t bytes) {
    const size_t huge = (size_t)2 << 20, whole = bytes & ~(huge - 1);
    void *m = NULL;
    if (posix_memalign(&m, whole ? huge : 4096, bytes ? bytes : 1)) return NULL;
#ifdef MADV_HUGEPAGE
    if (whole) (void)madvise(m, whole, MADV_HUGEPAGE);    /* advice: refused is fine */
#endif
    return m;
}

int k3_thp_mode(const char *what, char *out, size_t n) {
    char path[128], line[256];
    snprintf(path, sizeof path, "/sys/kernel/mm/transparent_hugepage/%s", what);
    snprintf(out, n, "none");
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *a = got ? strchr(line, '[') : NULL, *b = a ? strchr(a, ']') : NULL;
    if (!b) return -1;                        /* the chosen word is the bracketed one */
    snprintf(out, n, "%.*s", (int)(b - a - 1), a + 1);
    return 0;
}
