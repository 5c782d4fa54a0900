/* statefile.h — sequences' states kept in a file that streams with their layers
 * (src/mem/statefile.c): where a batch's KDA states (and MLA latent caches) do not fit
 * the budget, each paged layer's records of the sequences in a step are read before the
 * layer runs and written back after it, read ahead on an I/O thread while the layers
 * before compute. The records are the states' bytes, never converted: the same bits. */
#ifndef K3_STATEFILE_H
#define K3_STATEFILE_H
#include <stddef.h>
#include <stdint.h>
#include "k3.h"

/* What goes to the file: KDA states and conv windows, and with ALL the MLA caches too. */
enum { K3_STATES_RESIDENT = 0, K3_STATES_KDA = 1, K3_STATES_ALL = 2 };
/* Layer buffers in memory: the one computing, the one read ahead, the one written back. */
#define K3_STATEFILE_NBUF 3

typedef struct {
    uint64_t file;        /* bytes on disk: every paged layer's record of every sequence */
    uint64_t buffers;     /* K3_STATEFILE_NBUF layer buffers of every sequence's record */
    uint64_t kda_step;    /* KDA bytes read + written by a step over every sequence */
    uint64_t mla_step;    /* MLA bytes read + written by a decode step at the full context */
    uint64_t record;      /* one (layer, sequence) buffer region, 4096-aligned */
    int layers;           /* paged layers */
} K3StateFileSize;
/* The sizes for mode, n sequences, ctx positions (what the plan counts). */
void k3_statefile_size(const K3Config *c, int mode, int n, int ctx, K3StateFileSize *z);

typedef struct K3StateFile K3StateFile;
/* A temp file in dir (NULL: $TMPDIR, else /tmp), unlinked at once (so gone at exit
 * whatever happens), its space reserved, for n sequences of ctx positions. NULL with
 * the reason (the directory, the bytes it needs, the fix) in err. */
K3StateFile *k3_statefile_open(const K3Config *c, int mode, int n, int ctx, const char *dir,
                               char *err, size_t errlen);
void k3_statefile_close(K3StateFile *f);
/* The pager the forward pass runs through (K3Engine.pager). */
K3Pager *k3_statefile_pager(K3StateFile *f);
/* Sequence slot (0..n) of the file: s must come from k3_state_new_in with the mode's
 * flags (K3_STATE_*_FILE); its records start zero (k3_state_reset marks them so). */
void k3_statefile_attach(K3StateFile *f, K3State *s, int slot);
/* Between steps, a state moved in or out of the file: put writes resident src's paged
 * layers (its KDA states, with ALL its MLA rows) as in-file dst's records, dst->pos =
 * src->pos; get reads in-file src's records into resident dst's layers (sized for
 * src->pos), dst->pos = src->pos. The layers in memory in both are the caller's to copy.
 * 0, or 1 with the reason in err. */
int k3_statefile_put(K3StateFile *f, K3State *dst, const K3State *src, char *err,
                     size_t errlen);
int k3_statefile_get(K3StateFile *f, const K3State *src, K3State *dst, char *err,
                     size_t errlen);
typedef struct {
    uint64_t read, written; double wait_s, io_s;
    int direct;                               /* O_DIRECT (else the page cache) */
} K3StateFileStats;
const K3StateFileStats *k3_statefile_stats(const K3StateFile *f);
const char *k3_statefile_dir(const K3StateFile *f);
#endif
