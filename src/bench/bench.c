/* bench.c — kernel benchmark (`k3-bench`, or k3_bench_kernels() from the CLI).
 *
 * Matvec (T = 1) effective GB/s of weight bytes consumed for the real shapes, weights
 * in RAM (copies rotated so nothing is cached), next to the memory-read bandwidth of a
 * streaming read measured in the same run; prefill (T = 16, 64, 256) GFLOP/s next to the FMA
 * peak of a register-only loop measured in the same run; and a baseline: the plain
 * scalar kernel that accumulates in double. Medians of several runs. The percentages
 * pair each kernel run with a reference measured right after it (a stream read of the
 * same bytes, >= 64 MiB, or a short FMA-peak loop) and take the median of the ratios,
 * so a burst of load from other tenants of the machine hits both sides.
 * Coded BF16 (K3_W_BF16C, docs/CODEC.md) on weights like trained ones (about normal,
 * std 0.02): GB/s columns are effective BF16 bytes, %bw pairs the coded bytes read with
 * a stream read of as many; a line after it gives the stored GB/s, the ratio to the
 * plain BF16 matvec of the same shape, and the decode throughput of one core with the
 * weights in cache (no memory bound). --disk MODEL adds the disk's read bandwidth with the
 * engine's read pattern on MODEL's files (bench_machine.c), so the decode per core stands
 * beside memory and disk from the same run. */
#include "bench_grid.h"
#include "bench_shapes.h"
#include "roofline.h"
#include "cli.h"
#include "kernels.h"
#include "codec.h"
#include "pool.h"
#include "util.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
/* A probe's figure: another thread or process can only slow a run down */
static double best(double *v, int n) {
    double b = v[0];
    for (int i = 1; i < n; i++) if (v[i] > b) b = v[i];
    return b;
}

static uint64_t brs = 88172645463325252ull;
static uint64_t brnd(void) { brs ^= brs << 13; brs ^= brs >> 7; brs ^= brs << 17; return brs; }
static float bfr(void) { return (float)((brnd() >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f; }

/* ---- memory read bandwidth: sum of 64-bit words over a buffer >> cache */
typedef struct { const uint64_t *p; size_t n; int parts; volatile uint64_t sink; } RdJob;
#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t read_range_avx2(const uint64_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    return (uint64_t)_mm256_extract_epi64(a, 0) + (uint64_t)_mm256_extract_epi64(a, 3);
}
#endif
static uint64_t read_range(const uint64_t *p, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) return read_range_avx2(p, n);
#endif
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        a += p[i] ^ p[i + 4]; b += p[i + 1] ^ p[i + 5];
        c += p[i + 2] ^ p[i + 6]; d += p[i + 3] ^ p[i + 7];
    }
    return a + b + c + d;
}
static void rd_task(void *ctx, int i) {
    RdJob *j = ctx;
    size_t per = j->n / j->parts;
    j->sink += read_range(j->p + per * i, per);
}
static double mem_bw(const uint64_t *buf, size_t n, int threads, int runs) {
    double v[16];
    RdJob j = { buf, n, threads, 0 };
    for (int r = 0; r < runs; r++) {
        double t0 = k3_now();
        k3_pool_run(rd_task, &j, threads);
        v[r] = n * 8.0 / (k3_now() - t0) / 1e9;
    }
    return median(v, runs);
}

/* roofline.h: the same stream read on a fresh buffer of `bytes` (touched, so real pages),
 * the memory limit k3 bench reports beside its rows, and the run's probe. */
double k3_mem_read_bw(size_t bytes, int threads, int runs) {
    size_t n = bytes / 8 & ~(size_t)63;
    uint64_t *buf = n ? malloc(n * 8) : NULL;
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    const int was = k3_threads();
    k3_threads_set(threads);
    double bw = mem_bw(buf, n, k3_threads(), runs < 1 ? 1 : runs > 16 ? 16 : runs);
    k3_threads_set(was);
    free(buf);
    return bw;
}

/* roofline.h */
double k3_mem_read_once(const uint64_t *p, size_t n) {
    RdJob j = { p, n, k3_threads(), 0 };
    double t0 = k3_now();
    k3_pool_run(rd_task, &j, j.parts);
    return n * 8.0 / (k3_now() - t0) / 1e9;
}

/* ---- FMA peak: 12 independent register accumulators, no memory traffic. They start at
 * 12 different values: equal ones let the compiler merge the 12 chains into one (it did:
 * one vfmadd a loop, so the "peak" was 12 FMAs per FMA latency, 1.5x the two FMA ports
 * of the machine, and every % of peak was 2/3 of the truth). */
#define PEAK_BODY(T, FMA, SET)                                                            \
    T a0 = SET(1.0f), a1 = SET(1.01f), a2 = SET(1.02f), a3 = SET(1.03f), a4 = SET(1.04f),   \
      a5 = SET(1.05f), a6 = SET(1.06f), a7 = SET(1.07f), a8 = SET(1.08f), a9 = SET(1.09f),  \
      a10 = SET(1.1f), a11 = SET(1.11f), m = SET(0.9999999f), c = SET(1e-7f);             \
    for (long i = 0; i < iters; i++) {                                                    \
        a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c);    \
        a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c);    \
        a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c); \
    }                                                                                     \
    T s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;                     \
    memcpy(&sink, &s, sizeof sink);
static volatile float vsink;
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void peak512(long iters) {
    float sink; PEAK_BODY(__m512, _mm512_fmadd_ps, _mm512_set1_ps) vsink = sink;
}
__attribute__((target("avx2,fma"))) static void peak256(long iters) {
    float sink; PEAK_BODY(__m256, _mm256_fmadd_ps, _mm256_set1_ps) vsink = sink;
}
#elif defined(__aarch64__)
static float32x4_t nfma(float32x4_t a, float32x4_t m, float32x4_t c) { return vfmaq_f32(c, a, m); }
static void peakneon(long iters) {
    float sink; PEAK_BODY(float32x4_t, nfma, vdupq_n_f32) vsink = sink;
}
#endif
static float sfma(float a, float m, float c) { return __builtin_fmaf(a, m, c); }
static float sset(float x) { return x; }
static void peakscalar(long iters) { float sink; PEAK_BODY(float, sfma, sset) vsink = sink; }

typedef struct { int lanes; long iters; int probe; } PkJob;
static void pk_loop(const PkJob *j) {
#if defined(__x86_64__)
    if (j->lanes == 16) { peak512(j->iters); return; }
    if (j->lanes == 8) { peak256(j->iters); return; }
#elif defined(__aarch64__)
    if (j->lanes == 4) { peakneon(j->iters); return; }
#endif
    peakscalar(j->iters);
}
/* probe: task i on the i-th core it may use, for the loop only (at a run's end a pool
 * worker woken onto the caller's core stayed there for tens of ms) */
static void pk_task(void *ctx, int i) {
    const PkJob *j = ctx;
    cpu_set_t was, one;
    int pinned = 0;
    if (j->probe && !sched_getaffinity(0, sizeof was, &was))
        for (int c = 0, n = 0; c < CPU_SETSIZE && !pinned; c++)
            if (CPU_ISSET(c, &was) && n++ == i) {
                CPU_ZERO(&one);
                CPU_SET(c, &one);
                pinned = !sched_setaffinity(0, sizeof one, &one);
                if (!pinned) break;
            }
    pk_loop(j);
    if (pinned) sched_setaffinity(0, sizeof was, &was);
}
/* probe: each thread pinned to a core (pk_task), the best run; else the median */
static double fma_peak_it(int lanes, int threads, int runs, long iters, int probe) {
    double v[16];
    PkJob j = { lanes, iters, probe };
    for (int r = 0; r < runs; r++) {
        double t0 = k3_now();
        k3_pool_run(pk_task, &j, threads);
        v[r] = 2.0 * lanes * 12 * j.iters * threads / (k3_now() - t0) / 1e9;
    }
    return probe ? best(v, runs) : median(v, runs);
}
static double fma_peak(int lanes, int threads, int runs) {
    return fma_peak_it(lanes, threads, runs, 20000000, 0);
}
static int kernel_lanes(const char *kn) {
    return !strcmp(kn, "avx512") ? 16 : !strcmp(kn, "avx2") ? 8 : !strcmp(kn, "neon") ? 4 : 1;
}

/* roofline.h: the selected kernels' peak, shorter loops, each thread on a core of its own,
 * the best run (the run's probe) */
double k3_fma_peak(int threads, int runs, long iters) {
    const int was = k3_threads();
    k3_threads_set(threads);
    double pk = fma_peak_it(kernel_lanes(k3_kernels_name()), k3_threads(),
                            runs < 1 ? 1 : runs > 16 ? 16 : runs, iters, 1);
    k3_threads_set(was);
    return pk;
}

/* ---- baseline: straightforward scalar kernels accumulating in double */
static void base_matvec(float *y, const K3Mat *W, const float *x) {
    for (int r = 0; r < W->rows; r++) {
        double acc = 0;
        size_t ro = (size_t)r * W->cols;
        if (W->type == K3_W_BF16) {
            const uint16_t *w = (const uint16_t *)W->w + ro;
            for (int c = 0; c < W->cols; c++) acc += (double)k3_bf16_to_f32(w[c]) * x[c];
        } else {
            const uint8_t *p = (const uint8_t *)W->w + ro / 2;
            for (int c = 0; c < W->cols; c++) {
                int nib = (p[c >> 1] >> ((c & 1) * 4)) & 15;
                union { uint32_t u; float f; } s; s.u = k3_e8m0_bits[W->scale[(ro + c) / 32]];
                acc += (double)k3_e2m1[nib] * s.f * x[c];
            }
        }
        y[r] = (float)acc;
    }
}

static size_t wbytes(const KbShape *s) {
    size_t n = (size_t)s->rows * s->cols;
    return s->type == K3_W_BF16 || s->type == K3_W_BF16C ? n * 2
         : s->type == K3_W_F32 ? n * 4 : n / 2 + n / 32;
}

/* copies: enough that the rotation covers >= min_bytes (so the weights come from RAM) */
static K3Mat *make_copies(const KbShape *s, size_t min_bytes, int *ncopy) {
    size_t b = wbytes(s);
    int n = (int)((min_bytes + b - 1) / b);
    if (n < 1) n = 1;
    K3Mat *m = calloc((size_t)n, sizeof *m);
    size_t elems = (size_t)s->rows * s->cols;
    for (int k = 0; k < n; k++) {
        uint8_t *buf = malloc(b);
        if (s->type == K3_W_BF16C) {          /* about normal, std 0.02, BF16-rounded */
            uint16_t *w = (uint16_t *)buf;
            for (size_t i = 0; i < elems; i++) {
                float f = 0.02f * (bfr() + bfr() + bfr() + bfr()) * 0.866f;
                uint32_t u; memcpy(&u, &f, 4);
                w[i] = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
            }
            uint8_t *c = malloc(k3_codec_bound(s->rows, s->cols));
            size_t cb = k3_codec_encode(c, w, s->rows, s->cols, NULL);
            free(buf);
            m[k] = (K3Mat){ 0, s->rows, s->cols, NULL, NULL, NULL };
            k3_codec_bind(&m[k], c);
            (void)cb;                                  /* > 0: far below 4 GiB */
            continue;
        }
        if (s->type == K3_W_BF16) {
            uint16_t *w = (uint16_t *)buf;
            for (size_t i = 0; i < elems; i++) {
                float f = bfr(); uint32_t u; memcpy(&u, &f, 4); w[i] = (uint16_t)(u >> 16);
            }
        } else {
            for (size_t i = 0; i < elems / 2; i++) buf[i] = (uint8_t)brnd();
            for (size_t i = 0; i < elems / 32; i++)
                buf[elems / 2 + i] = (uint8_t)(118 + brnd() % 10);
        }
        m[k] = (K3Mat){ s->type, s->rows, s->cols, buf,
                        s->type == K3_W_MXFP4 ? buf + elems / 2 : NULL, NULL };
    }
    *ncopy = n;
    return m;
}

static size_t stored_bytes(const K3Mat *m) {
    if (m->type != K3_W_BF16C) return 0;
    return k3_codec_table_bytes(m->rows) + k3_codec_rowoff(m)[m->rows];
}

/* One core decoding with the weights in cache: rows of W whose coded bytes are ~512 KB,
 * many times over; G weights/s. */
static double decode_in_cache(const K3Mat *W, const float *x, float *y, int runs) {
    K3Mat V = *W;
    V.rows = (int)((512u << 10) / (k3_codec_rowoff(W)[1] + 4));
    if (V.rows < 1) V.rows = 1;
    if (V.rows > W->rows) V.rows = W->rows;
    double v[16];
    k3_threads_set(1);
    for (int r = 0; r < runs; r++) {
        k3_matmul(y, &V, x, 1);
        double t0 = k3_now();
        for (int i = 0; i < 20; i++) k3_matmul(y, &V, x, 1);
        v[r] = 20.0 * V.rows * V.cols / (k3_now() - t0) / 1e9;
    }
    return median(v, runs);
}

/* An --only that matches no shape would print an empty table and exit 0: refused. */
static int only_matches(const char *only) {
    for (int i = 0; i < KB_NSHAPES; i++)
        if (strstr(kb_shapes[i].name, only)) return 1;
    fprintf(stderr, "k3 bench-kernels: --only '%s' matches no shape; the shapes are:", only);
    for (int i = 0; i < KB_NSHAPES; i++)
        fprintf(stderr, "%s '%s'", i ? "," : "", kb_shapes[i].name);
    fprintf(stderr, " (any part of a name, e.g. --only mxfp4)\n");
    return 0;
}

static const char *USAGE =
    "Usage: k3 bench-kernels [options]        (bin/k3-bench [options] after make bench)\n"
    "Matvec GB/s and prefill GFLOP/s of the kernels on the real shapes, weights in RAM,\n"
    "next to this machine's stream-read bandwidth and FMA peak (docs/KERNELS.md).\n"
    "  --kernels K        auto (default), scalar, avx2, avx512 or neon\n"
    "  --threads N        threads of the \"all thr\" columns, N >= 1 (default: online cores)\n"
    "  --runs N           runs per measurement, 1 to 15 (default 7); medians are shown\n"
    "  --only SUBSTRING   only the shapes whose name contains SUBSTRING (e.g. mxfp4)\n"
    "  --no-prefill       matvec rows only (no prefill T=16, 64, 256)\n"
    "  --disk MODEL       also the disk's read bandwidth on MODEL's files (1 GB, O_DIRECT)\n"
    "  -h, --help         this text\n";

static int usage_error(const char *what, const char *arg) {
    fprintf(stderr, "k3 bench-kernels: %s '%s'\n%s", what, arg, USAGE);
    return 2;
}

int k3_bench_kernels(int argc, char **argv) {
    int runs = 7, all = k3_threads();
    const char *kern = "auto", *only = NULL, *disk = NULL;
    int prefill = 1;
    for (int i = 1; i < argc; i++)        /* anywhere, even where a value was due */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout); return 0; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int val = !strcmp(a, "--runs") || !strcmp(a, "--threads") || !strcmp(a, "--kernels") ||
                  !strcmp(a, "--only") || !strcmp(a, "--disk");
        if (val && i + 1 >= argc) return usage_error("missing value for", a);
        const char *v = val ? argv[++i] : NULL;
        if (!strcmp(a, "--runs")) {
            if (k3_parse_int(a, v, 1, &runs)) return 2;
            if (runs > 15) {
                fprintf(stderr, "k3: --runs: %d is over the limit of 15\n", runs); return 2;
            }
        } else if (!strcmp(a, "--threads")) {
            if (k3_parse_int(a, v, 1, &all)) return 2;
        } else if (!strcmp(a, "--kernels")) kern = v;
        else if (!strcmp(a, "--only")) only = v;
        else if (!strcmp(a, "--disk")) disk = v;
        else if (!strcmp(a, "--no-prefill")) prefill = 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return 0; }
        else if (strcmp(a, "bench-kernels"))
            return usage_error(a[0] == '-' ? "unknown option" : "unexpected argument", a);
    }
    if (only && !only_matches(only)) return 2;
    char err[200];
    if (k3_kernels_select(kern, err, sizeof err)) {
        fprintf(stderr, "k3 bench-kernels: %s\n", err); return 2;
    }
    if (all < 1) all = 1;
    const char *kn = k3_kernels_name();
    int lanes = kernel_lanes(kn);
    printf("kernels %s, threads 1 and %d, medians of %d runs\n", kn, all, runs);
    if (lanes == 16)                       /* docs/KERNELS_LOG.md, "Which AVX-512 prefill" */
        printf("prefill from 32 tokens: %s (L2 %ld KB a core; K3_AVX512_GEMM=0/1 chooses)\n",
               k3_avx512_prefill_gemm(-1) ? "the blocked GEMM" : "the register tiles",
               sysconf(_SC_LEVEL2_CACHE_SIZE) / 1024);
    printf("\n");

    size_t big = (size_t)512 << 20;                 /* 512 MiB >> any cache */
    uint64_t *buf = malloc(big);
    for (size_t i = 0; i < big / 8; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    k3_threads_set(1);
    double bw1 = mem_bw(buf, big / 8, 1, runs), pk1 = fma_peak(lanes, 1, runs);
    k3_machine_save(pk1, bw1);                 /* the runs' machine line uses these */
    k3_threads_set(all);
    double bwn = mem_bw(buf, big / 8, all, runs), pkn = fma_peak(lanes, all, runs);
    k3_machine_save(pkn, bwn);
    printf("memory read bandwidth (512 MiB stream): 1 thread %.1f GB/s, %d threads %.1f GB/s\n",
           bw1, all, bwn);
    printf("FMA peak (register-only, %d-lane fp32): 1 thread %.1f GFLOP/s, "
           "%d threads %.1f GFLOP/s\n", lanes, pk1, all, pkn);
    double disk_gbps = 0;
    if (disk) {
        KbMachine km;
        memset(&km, 0, sizeof km);
        kb_measure_disk(&km, disk, 1.0, 1);
        if (km.disk_mbps <= 0) {
            fprintf(stderr, "k3: bench-kernels --disk: no disk bandwidth measured on '%s' (it "
                    "must be a model folder with expert tensors)\n", disk);
            free(buf);
            return 1;
        }
        disk_gbps = km.disk_mbps / 1e3;
        printf("disk read bandwidth (%s, %.2f GB in expert windows, %d readers, %s): "
               "%.2f GB/s\n", disk, km.disk_bytes / 1e9, km.disk_readers,
               km.odirect ? "O_DIRECT" : "buffered", disk_gbps);
    }
    printf("\n");

    double plain[2] = { 0, 0 };                   /* the last bf16 shape: 1 thr, all thr */
    printf("Each kernel run is paired with, right after it, a stream read of the same byte\n"
           "count (at least 64 MiB; matvec) or a short FMA-peak loop (prefill); %%bw, %%peak =\n"
           "medians of the paired ratios (robust to a noisy machine); GB/s, GFLOP/s = medians;\n"
           "best = fastest kernel run / fastest paired reference (1 thread).\n\n");
    printf("%-17s %-9s %9s %7s %6s %9s %7s %9s %7s %s\n", "matvec T=1", "", "1 thr", "%bw", "best",
           "all thr", "%bw", "dbl base", "", "(effective GB/s of weight bytes)");
    size_t roff = 0;
    for (int si = 0; si < KB_NSHAPES; si++) {
        const KbShape *s = &kb_shapes[si];
        if (only && !strstr(s->name, only)) continue;
        int nc;
        K3Mat *m = make_copies(s, (size_t)384 << 20, &nc);
        float *x = malloc(sizeof(float) * 256 * s->cols);
        float *y = malloc(sizeof(float) * 256 * s->rows);
        for (int i = 0; i < 256 * s->cols; i++) x[i] = bfr();
        double v[16], q[16], g1 = 0, gn = 0, gb, p1 = 0, pn = 0, kmax, rmax;
        int k = 0;
        size_t sb = s->type == K3_W_BF16C ? stored_bytes(&m[0]) : wbytes(s);   /* bytes read */
        double ratio = (double)sb / wbytes(s);
        size_t nw = sb / 8 & ~(size_t)63;             /* at least 64 MiB: a steady-state stream */
        if (nw < ((size_t)8 << 20)) nw = (size_t)8 << 20;
        kmax = rmax = 0;
        for (int th = 0; th < 2; th++) {
            k3_threads_set(th ? all : 1);
            for (int r = 0; r < runs; r++) {
                double t0 = k3_now();
                k3_matmul(y, &m[k++ % nc], x, 1);
                v[r] = wbytes(s) / (k3_now() - t0) / 1e9;
                if (roff + nw > big / 8) roff = 0;
                double rd = k3_mem_read_once(buf + roff, nw);
                q[r] = v[r] * ratio / rd; roff += nw;
                if (!th && v[r] > kmax) kmax = v[r];
                if (!th && rd > rmax) rmax = rd;
            }
            if (th) { gn = median(v, runs); pn = median(q, runs); }
            else { g1 = median(v, runs); p1 = median(q, runs); }
        }
        int br = runs < 5 ? runs : 5;
        for (int r = 0; r < br && s->type != K3_W_BF16C; r++) {
            double t0 = k3_now();
            base_matvec(y, &m[k++ % nc], x);
            v[r] = wbytes(s) / (k3_now() - t0) / 1e9;
        }
        gb = s->type == K3_W_BF16C ? 0 : median(v, br);
        if (s->type == K3_W_BF16C)
            printf("%-17s %-9s %9.2f %6.0f%% %5.0f%% %9.2f %6.0f%% %9s\n", s->name, "", g1,
                   100 * p1, 100 * kmax * ratio / rmax, gn, 100 * pn, "-");
        else
            printf("%-17s %-9s %9.2f %6.0f%% %5.0f%% %9.2f %6.0f%% %9.2f   x%.1f vs baseline "
                   "(1 thr)\n", s->name, "", g1, 100 * p1, 100 * kmax / rmax, gn, 100 * pn, gb,
                   g1 / gb);
        if (s->type == K3_W_BF16) { plain[0] = g1; plain[1] = gn; }
        if (s->type == K3_W_BF16C) {
            double dc = decode_in_cache(&m[0], x, y, runs);
            printf("  coded %.4f of bf16: stored GB/s 1 thr %.2f, %d thr %.2f; effective bf16 "
                   "GB/s / plain bf16 matvec: 1 thr x%.2f, %d thr x%.2f\n"
                   "  decode in cache (1 core): %.2f G weights/s = %.1f GB/s of bf16, %.1f GB/s "
                   "of coded bytes (memory: %.1f GB/s 1 thr)\n", ratio, g1 * ratio, all,
                   gn * ratio, plain[0] > 0 ? g1 / plain[0] : 0, all,
                   plain[1] > 0 ? gn / plain[1] : 0, dc, 2 * dc, 2 * dc * ratio, bw1);
            /* the same ratio from runs that alternate coded and plain (a BF16 copy of the
             * shape): a burst of load from other tenants then hits both sides */
            KbShape ps = *s;
            ps.type = K3_W_BF16;
            int npc;
            K3Mat *mp = make_copies(&ps, (size_t)384 << 20, &npc);
            double pr[2];
            for (int th = 0; th < 2; th++) {
                k3_threads_set(th ? all : 1);
                for (int r = 0; r < runs; r++) {
                    double t0 = k3_now();
                    k3_matmul(y, &m[k++ % nc], x, 1);
                    double t1 = k3_now();
                    k3_matmul(y, &mp[r % npc], x, 1);
                    v[r] = (k3_now() - t1) / (t1 - t0);
                }
                pr[th] = median(v, runs);
            }
            printf("  alternating coded and plain runs (median of the paired ratios): 1 thr "
                   "x%.2f, %d thr x%.2f\n", pr[0], all, pr[1]);
            for (int i = 0; i < npc; i++) free((void *)mp[i].w);
            free(mp);
            if (disk_gbps > 0)
                printf("  decode per core / disk: x%.1f in coded bytes (disk %.2f GB/s)\n",
                       2 * dc * ratio / disk_gbps, disk_gbps);
        }
        /* prefill: weights once per call, T tokens */
        for (int T = 16; prefill && T <= 256; T *= 4) {
            double flop = 2.0 * s->rows * s->cols * T;
            int pr = runs < 5 ? runs : 5;
            kmax = rmax = 0;
            for (int th = 0; th < 2; th++) {
                int n = th ? all : 1;
                k3_threads_set(n);
                for (int r = 0; r < pr; r++) {
                    double t0 = k3_now();
                    k3_matmul(y, &m[k++ % nc], x, T);
                    v[r] = flop / (k3_now() - t0) / 1e9;
                    double pk = fma_peak_it(lanes, n, 1, 2000000, 0);
                    q[r] = v[r] / pk;
                    if (!th && v[r] > kmax) kmax = v[r];
                    if (!th && pk > rmax) rmax = pk;
                }
                if (th) { gn = median(v, pr); pn = median(q, pr); }
                else { g1 = median(v, pr); p1 = median(q, pr); }
            }
            printf("  prefill T=%-3d %-9s %9.1f %6.0f%% %5.0f%% %9.1f %6.0f%%"
                   "   (GFLOP/s, %% of FMA peak)\n",
                   T, "", g1, 100 * p1, 100 * kmax / rmax, gn, 100 * pn);
        }
        for (int i = 0; i < nc; i++)
            free(m[i].type == K3_W_BF16C ? (void *)m[i].scale : (void *)m[i].w);
        free(m); free(x); free(y);
    }
    free(buf);
    return 0;
}
