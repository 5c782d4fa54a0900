/* sysmem.h — what the machine and this process hold, for the memory plan. */
#ifndef K3_SYSMEM_H
#define K3_SYSMEM_H
#include <stddef.h>
#include <stdint.h>

/* Resident bytes of this process now (/proc/self/statm). */
uint64_t k3_rss_now(void);
/* A cgroup (v1 or v2) memory limit less what the group's other processes hold, or 0
 * when there is no limit; desc names the group. */
uint64_t k3_cgroup_available(uint64_t self_rss, char *desc, size_t dn);
#endif
