/* roofline.h — the engine's distance from the machine (docs/PERFORMANCE.md, "The machine
 * line"): a FLOP model of the forward from the config, the bytes a decoded token reads,
 * the machine's FMA peak and memory read bandwidth (a short probe, cached per machine),
 * and the report that puts the run's prefill and decode against them. */
#ifndef K3_ROOFLINE_H
#define K3_ROOFLINE_H
#include "k3.h"
#include <stdio.h>

/* The forward's FLOPs (2 per multiply-add) by part, from the config. Per token: the
 * trunk's matmuls (attention projections, KDA's and MLA's, the dense MLP, the router, the
 * shared experts, the latent projections), the routed experts (top-k), KDA's conv and
 * recurrence, MLA's fixed per-head work; per key attended: mla_key; per logits row: head.
 * Norms, activations, softmax and the residual mixing are left out (well under 1%). */
typedef struct {
    double trunk, routed, kda, mla_fixed;   /* per token */
    double mla_key;                         /* per token per position of context attended */
    double head;                            /* per lm_head row */
} K3Flops;
void k3_flops_model(const K3Config *c, K3Flops *f);
/* n tokens at positions pos0 .. pos0+n-1 (token p attends to p+1 keys), head_rows rows
 * of lm_head: a prefill of n has 1, a decoded token 1. */
double k3_flops(const K3Config *c, long pos0, long n, long head_rows);

/* The bytes one decoded token at position pos reads: the trunk's tensors (embedding row
 * and MTP layers aside) and lm_head, top-k routed experts a MoE layer, MLA's latent cache
 * (pos + 1 positions) and KDA's state (read and written), f32. */
double k3_decode_bytes(const K3Model *m, double pos);

/* The machine at the run's kernels and thread count. */
typedef struct { double fma_gflops, read_gbps; int cached; } K3Machine;
/* From the cache file (K3_MACHINE_CACHE: a path, or "off": none; default
 * ${XDG_CACHE_HOME:-$HOME/.cache}/k3/machine.txt), keyed by CPU model, flags hash, kernels
 * and threads; else (or reprobe) a probe of about 0.2 s, then written back. */
int k3_machine_get(K3Machine *mc, int reprobe);
/* The figures of a longer measurement (k3 bench-kernels) cached for the current kernels
 * and thread count. */
void k3_machine_save(double fma_gflops, double read_gbps);
/* bench/bench.c: the register-only FMA loop of the selected kernels' width, GFLOP/s with
 * `threads` threads, the best of `runs` loops of `iters` (a probe: anything else running
 * only slows a loop down); the stream read, GB/s, the median of `runs`. */
double k3_fma_peak(int threads, int runs, long iters);
double k3_mem_read_bw(size_t bytes, int threads, int runs);
/* One stream read of p[0..n) with the current thread count, GB/s: the reference paired
 * right after a kernel run (k3 bench-kernels, tools/bench_matvec_ab.c). */
double k3_mem_read_once(const uint64_t *p, size_t n);
/* bench/bench_machine.c: the CPU's model name */
void k3_cpu_model(char *out, size_t n);

/* A run against the machine: n_dec decoded tokens after a prefill of n_prompt. */
typedef struct {
    double prefill_flops, prefill_gflops, prefill_share;
    double decode_bytes, decode_gbps, decode_share;   /* decode_bytes: a token */
    double decode_s, decode_floor_s;   /* s a decoded token: measured, the machine's floor */
    K3Machine mc;
} K3Roofline;
/* head_rows: the prompt rows the prefill put through the output head (1; all of them
 * with --dump-logits, whose head is part of the prefill's time) */
void k3_roofline(const K3Model *m, long n_prompt, long head_rows, double t_prefill, long n_dec,
                 double t_decode, const K3Machine *mc, K3Roofline *r);
/* Whether the run's decode beat a cached read bandwidth it cannot beat: one stream that
 * kept one token per forward (lone: no draft accepted, one rank) reading far more a
 * token than the last-level cache holds (llc bytes; 8x), yet faster than `read_gbps`. Such
 * a figure came from a disturbed probe (the caller measures again); accepted drafts and
 * models that fit in the caches beat the DRAM read honestly and are left alone. */
int k3_decode_beat_probe(const K3Roofline *r, int lone, double llc);
/* The last-level cache's bytes (L3, else L2, at least 8 MiB; 32 MiB where the CPU does
 * not say) */
double k3_llc_bytes(void);
void k3_roofline_print(const K3Roofline *r, FILE *f);     /* "k3: machine: ..." */
void k3_roofline_json(const K3Roofline *r, FILE *f);      /* fields, each line "...,\n" */
#endif
