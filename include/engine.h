/* engine.h — the one way to open the engine (src/engine): kernels and threads, the
 * model, the memory plan and its storage, and the run state, in that order. Batch mode,
 * chat, and the commands to come (bench, serve) all open it here. */
#ifndef K3_ENGINE_H
#define K3_ENGINE_H
#include "comm.h"
#include "k3.h"
#include "mem.h"
#include <stdio.h>

typedef struct {
    const char *model_dir, *config;           /* config NULL = MODEL_DIR/config.json */
    const char *kernels;                      /* NULL = auto */
    int threads;                              /* <= 0: online cores */
    K3MemOpts mem;                            /* budgets; mem.chunk, mem.ctx size the run state */
} K3EngineOpts;

/* 0, or an exit code (1 runtime, 2 usage/config) with the message in err. On failure
 * the engine is closed (closing it again is harmless). */
int k3_engine_open(K3Engine *e, const K3EngineOpts *o, char *err, size_t errlen);
/* Model, resident weights and a run state, no plan: for tests and tools. */
int k3_engine_open_resident(K3Engine *e, const char *dir, int max_T, int ctx,
                            char *err, size_t errlen);
void k3_engine_close(K3Engine *e);
/* Routed experts that could not be read so far (the run is invalid when > 0). */
long k3_engine_expert_failures(const K3Engine *e);
/* Over N ranks (comm.h; nothing at N = 1): k3_ranks_gather, called by every rank at the
 * same point, gathers each rank's peak RSS, trunk and expert bytes read and collectives
 * (those since decode0 as the decode's): [N][K3_RANK_FIELDS], kept until the next call,
 * *n = N (NULL and 0 at N = 1); rank 0 prints them (one line a rank) and writes them as
 * --out JSON fields.
 * n_tokens: tokens through the model; n_decode: decode forwards. */
#define K3_RANK_FIELDS 9
const double *k3_ranks_gather(const K3Engine *e, K3CommStats decode0, int *n);
void k3_ranks_print(const double *all, int n, int n_tokens, int n_decode, FILE *f);
void k3_ranks_json(const double *all, int n, int n_tokens, int n_decode, FILE *f);
#endif
