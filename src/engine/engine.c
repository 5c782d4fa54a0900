/* engine.c — opens and closes the engine (engine.h). */
#include "engine.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* README "Exit codes": a path given on the command line that is missing, or a folder where
 * a file belongs, is a usage error (2), found before the model is opened; a trunk file
 * that is there but truncated, corrupt or packed from another checkpoint is data (1). */
static int trunk_given(const char *dir, char *err, size_t errlen) {
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/trunk.k3", dir);
    const int se = stat(p, &sb) ? errno : 0;
    if (!se && S_ISREG(sb.st_mode)) return 0;
    if (se && se != ENOENT && se != ENOTDIR) return 0;     /* EACCES etc.: the reader says */
    snprintf(err, errlen, "--trunk %s: %s %s (create it with: k3 pack MODEL_DIR %s)", dir, p,
             se ? "does not exist" : S_ISDIR(sb.st_mode) ? "is a directory" : "is not a file",
             dir);
    return K3_ERR_USAGE;
}

/* Over N ranks (comm.h) every rank must hold the same checkpoint: its identity (config and
 * shards, k3_checkpoint_identity) is gathered and a rank whose differs is refused, named,
 * on every rank (so every rank ends, none waits). */
static int same_checkpoint(const K3Model *m, char *err, size_t errlen) {
    const int k = k3_comm_differs(m->identity);
    if (!k) return 0;
    snprintf(err, errlen, "rank %d's checkpoint %s is not rank 0's (its identity differs): "
             "every host needs the same checkpoint at the same path", k, m->dir);
    return K3_ERR_RUNTIME;
}

int k3_engine_open(K3Engine *e, const K3EngineOpts *o, char *err, size_t errlen) {
    memset(e, 0, sizeof *e);
    if (k3_kernels_select(o->kernels ? o->kernels : "auto", err, errlen)) return K3_ERR_USAGE;
    if (o->mem.trunk_dir && trunk_given(o->mem.trunk_dir, err, errlen)) return K3_ERR_USAGE;
    k3_threads_set(o->threads);
    int rc = k3_model_open(&e->m, o->model_dir, o->config, err, errlen);
    if (!rc) rc = same_checkpoint(&e->m, err, errlen);
    if (!rc && o->mem.expert_use)                     /* the owners follow measured use */
        rc = k3_expert_owners_use(&e->m.cfg, o->mem.expert_use, err, errlen);
    if (!rc) rc = k3_mem_open(&e->m, &o->mem, &e->mem, err, errlen);
    if (!rc) {
        e->w = k3_mem_weights(e->mem);
        e->read_ahead = o->mem.read_ahead;
        /* the buffers hold the chunk the plan chose (it may lower an automatic one) */
        if (k3_runstate_open(&e->rs, &e->m.cfg, k3_mem_chunk(e->mem), o->mem.ctx,
                             o->mem.logits_rows, k3_mem_act_dir(e->mem), err, errlen))
            rc = K3_ERR_RUNTIME;
    }
    if (rc) k3_engine_close(e);
    return rc;
}

int k3_engine_open_resident(K3Engine *e, const char *dir, int max_T, int ctx,
                            char *err, size_t errlen) {
    memset(e, 0, sizeof *e);
    if (errlen) err[0] = 0;
    int rc = k3_model_open(&e->m, dir, NULL, err, errlen);
    if (!rc && !(e->w = k3_weights_resident(&e->m))) rc = K3_ERR_RUNTIME;
    if (!rc && k3_runstate_init(&e->rs, &e->m.cfg, max_T, ctx, 1)) rc = K3_ERR_RUNTIME;
    if (rc == K3_ERR_RUNTIME && !err[0]) snprintf(err, errlen, "out of memory");
    if (rc) k3_engine_close(e);
    return rc;
}

void k3_engine_close(K3Engine *e) {
    k3_halt_forget(e);
    k3_expert_owners_clear();
    if (e->w) e->w->ops->close(e->w);          /* the memory system, or the resident view */
    k3_runstate_free(&e->rs);
    k3_model_close(&e->m);
    memset(e, 0, sizeof *e);
}

long k3_engine_expert_failures(const K3Engine *e) {
    return e->w ? e->w->expert_failures : 0;
}
