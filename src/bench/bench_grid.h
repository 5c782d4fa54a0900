/* bench_grid.h — `k3 bench`, private to src/bench: bench_grid.c (options, the grid, one
 * child process per rep), bench_machine.c (the machine header and the limits measured
 * in the same run: memory read and disk bandwidth), bench_out.c (md, json, csv, jsonl;
 * schema in docs/BENCH.md). */
#ifndef K3_BENCH_GRID_H
#define K3_BENCH_GRID_H
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "roofline.h"     /* k3_mem_read_bw: the stream read of a fresh buffer, GB/s */

#define KB_SCHEMA 1
#define KB_MAXREP 100
#define KB_MAXBW 16
#define KB_NROOF 10               /* the machine fields of a run's --out (roofline.h) */
extern const char *const kb_roof_keys[KB_NROOF];   /* bench_out.c: their names */

enum { KB_MD, KB_JSON, KB_CSV, KB_JSONL, KB_HTML };

typedef struct {                  /* the whole-run options */
    const char *model, *trunk, *tok, *prompt_file, *compare;
    int fmt, reps, quiet, drop_caches, no_limits, no_spec;   /* no_spec: --no-spec */
    int batched;                  /* a row of the grid has --batch > 1 */
    int cold;                     /* 1 --cold, 0 --warm, -1 the default (cold unless preset max) */
    double disk_gb;               /* bytes the disk limit reads, in GB */
    const char *plot;             /* --plot FILE.svg, NULL: none */
    const char *draft, *draft_block;   /* --draft DIR, --draft-block N: every row drafts */
} KbOpts;

typedef struct {                  /* one configuration of the grid */
    const char *budget, *preset;  /* "TG:CG", or a preset name; both NULL = the default (auto) */
    const char *tg, *cg;          /* the budget's two numbers as given */
    double trunk_gb, cache_gb;    /* what they set; < 0: chosen by the child (auto) */
    int threads;                  /* 0 = the child's default (online cores) */
    const char *kernels;          /* NULL = auto */
    int n_prompt, n_gen, cold;
    int batch;                    /* sequences decoded together (1: the one-prompt run) */
} KbConf;

typedef struct {                  /* one successful rep, from the child's --out and wait4() */
    double spt, ptps, io_share, hit, dhit;
    double wall;                  /* the child's prefill + decode (batch: its run) seconds */
    double b_trunk, b_exp, b_head;    /* bytes per decode token; < 0 when there was no decode */
    uint64_t rss, plan, buffers;
    int n_generated, threads;
    char kernels[16], version[32];
    char stop[16];                /* why the generation ended: length, eos, stop_string,
                                   * interrupted (a batch rep: eos if one sequence did) */
    int ranks;                    /* over N ranks (k3-mpi): N, rss the largest rank's, and */
    double coll_pt, comm_pt, wait_pt;   /* per token: collectives, bytes received, seconds
                                         * waited in them (the largest rank's; decode's
                                         * where the run has one) */
    double roof[KB_NROOF];        /* kb_roof_keys' values; -1 absent */
    double d_blocks, d_proposed, d_accepted;   /* --draft: the run's; -1 absent */
} KbRep;

typedef struct {                  /* one side of a row (A = this binary, B = --compare) */
    KbRep *rep;                   /* [reps] */
    int n, rc;                    /* successful reps; the failing rep's exit code (0: none) */
    char error[800];              /* the failure: how the child ended and its last stderr line */
} KbSide;

typedef struct { KbConf c; KbSide a, b; } KbRow;

typedef struct {                  /* the machine and its limits */
    char cpu[200], os[200], kernels[16], fs[64], cg_desc[300];
    int cores, odirect;           /* odirect: 1 yes, 0 no (buffered fallback), -1 not probed */
    uint64_t mem_total, mem_avail, cg_avail;
    int n_bw, bw_threads[KB_MAXBW];
    double bw_gbps[KB_MAXBW];     /* memory read bandwidth per thread count; 0 = not measured */
    double disk_mbps, disk_s;     /* 0 = not measured */
    uint64_t disk_bytes, disk_window;
    int disk_reads, disk_readers;
    uint64_t touched;             /* weight bytes a decode token touches: trunk, lm_head, top-k */
    int vocab, bos, eos, pad;
    char **files; int n_files;    /* the shard files, evicted before a cold rep */
    uint64_t parent_rss;          /* k3 bench's own RSS when it forks a rep */
    int ranks;                    /* > 1: under mpirun, each rep in the process (bench_ranks.c) */
} KbMachine;

typedef struct { double med, min, max; int n; } KbStat;

/* bench_machine.c */
void kb_machine_describe(KbMachine *m, const char *model);
/* Weight bytes per decode token, the vocabulary and special ids; 0, or 2 with err. */
int kb_model_facts(KbMachine *m, const char *model, char *err, size_t errlen);
void kb_measure_memory(KbMachine *m, const int *threads, int n, int quiet);
void kb_measure_disk(KbMachine *m, const char *model, double gb, int quiet);
/* The runs' machine figures (roofline.h) cached before the reps (threads 0: the cores). */
void kb_machine_cache(const char *const *kern, int nk, const int *threads, int nt);
/* Evicts the model's shard files and the trunk from the page cache (drop_caches too when
 * asked and root); says once on stderr when drop_caches cannot be written. */
void kb_evict(const KbMachine *m, const char *trunk, int drop_caches);
void kb_machine_free(KbMachine *m);
double kb_mem_limit(const KbMachine *m, int threads);

/* bench_grid.c: a rep's --out report into r (-1 with err when missing or not k3's); the
 * last line of a file. */
int kb_read_report(const char *path, KbRep *r, char *err, size_t en);
void kb_last_line(const char *path, char *out, size_t n);
/* bench_ranks.c: one rep over N ranks, in this process on every rank; as a child's rep
 * (0 with r filled on rank 0, or the exit code with err); *stop set on every rank when a
 * signal came to one. */
int kb_run_ranks(char **args, const char *out, const char *errf, volatile sig_atomic_t *stop,
                 KbRep *r, char *err, size_t en);

/* bench_out.c */
KbStat kb_stat(const double *v, int n);
void kb_out_start(FILE *f, const KbOpts *o, const KbMachine *m);   /* jsonl: the header line */
void kb_out_row(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *r, int idx);
void kb_out_end(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n);

/* bench_plot.c: the grid as a figure (SVG); --plot FILE.svg and -o html */
void kb_plot_svg(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n);
/* -o html: a standalone page, the figure, the notes (escaped) and table (HTML already) */
void kb_plot_html(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n,
                  const char *notes, const char *table);
void kb_html_esc(FILE *f, const char *s);     /* < > & " escaped, control bytes dropped */
/* Whether --plot's FILE can be written (it is created): 0, or -1 with err. */
int kb_plot_check(const char *path, char *err, size_t errlen);
/* Writes o->plot: 0, or -1 (said on stderr). */
int kb_plot_file(const KbOpts *o, const KbMachine *m, const KbRow *rows, int n);
#endif
