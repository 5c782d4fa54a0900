/* sysmem.h — what the machine and this process hold, for the memory plan, and how the
 * large buffers are allocated. */
#ifndef K3_SYSMEM_H
#define K3_SYSMEM_H
#include <stddef.h>
#include <stdint.h>

/* Resident bytes of this process now (/proc/self/statm). */
uint64_t k3_rss_now(void);
/* A cgroup (v1 or v2) memory limit less what the group's other processes hold, or 0
 * when there is no limit; desc names the group. */
uint64_t k3_cgroup_available(uint64_t self_rss, char *desc, size_t dn);
/* A buffer (the pinned trunk, its window, the expert cache) aligned to 4 KB, or from 2 MB
 * on to 2 MB with its whole 2 MB pages advised onto huge pages where the kernel allows it:
 * its first fill then faults once a 2 MB page, not once in 4 KB, and its reads miss the
 * TLB less. Only pages inside the buffer are advised, so it never holds more than a budget
 * counted. free() releases it; NULL when out of memory. */
void *k3_alloc_huge(size_t bytes);
/* The kernel's transparent huge page setting `what` ("enabled" or "defrag"): the chosen
 * word of /sys/kernel/mm/transparent_hugepage/<what> into out ("always", "madvise",
 * "never", ...); 0, or -1 when the kernel has none (out is then "none"). */
int k3_thp_mode(const char *what, char *out, size_t n);
#endif
