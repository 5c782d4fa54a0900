/* fault.c — the test knobs of fault.h, read once. */
#include "fault.h"
#include <pthread.h>
#include <stdlib.h>

static K3Faults faults;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static long env_long(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atol(v) : 0;
}

static void read_env(void) {
    faults.trunk_read = env_long("K3_FAULT_TRUNK_READ");
    faults.expert_read = env_long("K3_FAULT_EXPERT_READ");
    faults.expert_read_once = env_long("K3_FAULT_EXPERT_READ_ONCE");
    faults.lmhead_rows = env_long("K3_LMHEAD_ROWS");
    faults.mla_tokens = env_long("K3_MLA_TOKENS");
    faults.pack_write = env_long("K3_FAULT_PACK_WRITE");
    faults.short_reads = env_long("K3_FAULT_SHORT_READS");
    faults.shrink_at = env_long("K3_FAULT_SHRINK_AT");
    faults.shrink_shard = env_long("K3_FAULT_SHRINK_SHARD");
    faults.shrink_unlink = env_long("K3_FAULT_SHRINK_UNLINK");
    faults.state_read = env_long("K3_FAULT_STATE_READ");
    faults.state_write = env_long("K3_FAULT_STATE_WRITE");
    const char *m = getenv("K3_MEM_AVAILABLE");
    if (m && *m) { faults.mem_available = strtoull(m, NULL, 10); faults.mem_available_set = 1; }
}

const K3Faults *k3_faults(void) {
    pthread_once(&once, read_env);
    return &faults;
}
