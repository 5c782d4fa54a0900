/* fault.h — test-only knobs, read from the environment once, here and nowhere else:
 *   K3_FAULT_TRUNK_READ=N        the Nth trunk read fails
 *   K3_FAULT_EXPERT_READ=N       the Nth expert read fails (both attempts)
 *   K3_FAULT_EXPERT_READ_ONCE=N  the Nth expert read fails once (the retry succeeds)
 *   K3_LMHEAD_ROWS=N             a streamed lm_head reads N rows a block
 *   K3_MLA_TOKENS=N              the MLA takes at most N of a head's tokens at a time
 *                                (1: the planned row, no scratch; mla.c)
 *   K3_MEM_AVAILABLE=BYTES       the memory plan's available figure
 *   K3_FAULT_PACK_WRITE=N        the Nth write of `k3 pack` fails with ENOSPC (disk full)
 *   K3_FAULT_SHORT_READS=N       every read of k3_pread_full asks for at most N bytes
 *                                (rounded up to 4096 on an O_DIRECT file) and every other
 *                                one first fails with EINTR: the loop must still deliver
 *                                every byte
 *   K3_FAULT_STATE_READ=N        the Nth read of a batch's state file fails (EIO)
 *   K3_FAULT_STATE_WRITE=N       the Nth write of it fails with ENOSPC (disk full)
 *   K3_FAULT_SHRINK_AT=N         at the Nth expert prefetch (one per MoE layer and forward)
 *                                shard K3_FAULT_SHRINK_SHARD (1-based in file-name order,
 *                                default 1) is truncated to its header, or removed when
 *                                K3_FAULT_SHRINK_UNLINK=1: a shard that changes under a
 *                                run (use a copy of the checkpoint) */
#ifndef K3_FAULT_H
#define K3_FAULT_H
#include <stdint.h>

typedef struct {
    long trunk_read, expert_read, expert_read_once, lmhead_rows;   /* 0 = off */
    uint64_t mem_available; int mem_available_set;
    long pack_write, short_reads, shrink_at, shrink_shard, shrink_unlink;
    long state_read, state_write;
    long mla_tokens;
} K3Faults;

const K3Faults *k3_faults(void);
#endif
