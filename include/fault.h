/* fault.h — test-only knobs, read from the environment once, here and nowhere else:
 *   K3_FAULT_TRUNK_READ=N        the Nth trunk read fails
 *   K3_FAULT_EXPERT_READ=N       the Nth expert read fails (both attempts)
 *   K3_FAULT_EXPERT_READ_ONCE=N  the Nth expert read fails once (the retry succeeds)
 *   K3_LMHEAD_ROWS=N             a streamed lm_head reads N rows a block
 *   K3_MEM_AVAILABLE=BYTES       the memory plan's available figure */
#ifndef K3_FAULT_H
#define K3_FAULT_H
#include <stdint.h>

typedef struct {
    long trunk_read, expert_read, expert_read_once, lmhead_rows;   /* 0 = off */
    uint64_t mem_available; int mem_available_set;
} K3Faults;

const K3Faults *k3_faults(void);
#endif
