/* bench_out.c — `k3 bench` output: an aligned markdown table, one JSON object, CSV, or
 * JSON lines as the rows finish. Schema (versioned, KB_SCHEMA): docs/BENCH.md. */
#include "bench_grid.h"
#include "json.h"
#include "k3.h"
#include "mem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const kb_roof_keys[KB_NROOF] = {
    "prefill_flops", "prefill_gflops", "prefill_peak_share", "decode_bytes_per_token",
    "decode_gbps", "decode_bandwidth_share", "machine_fma_gflops", "machine_read_gbps",
    "decode_floor_s", "decode_floor_ratio" };

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

KbStat kb_stat(const double *v, int n) {
    KbStat s = { NAN, NAN, NAN, 0 };
    double t[KB_MAXREP];
    for (int i = 0; i < n; i++) if (v[i] >= 0 && s.n < KB_MAXREP) t[s.n++] = v[i];
    if (!s.n) return s;
    qsort(t, (size_t)s.n, sizeof *t, cmpd);
    s.min = t[0]; s.max = t[s.n - 1];
    s.med = s.n % 2 ? t[s.n / 2] : 0.5 * (t[s.n / 2 - 1] + t[s.n / 2]);
    return s;
}

/* One side's figures over its reps (NAN = none). */
typedef struct {
    KbStat spt, ptps, bt, be, bh, io, hit, dhit, coll, comm, wait;
    KbStat roof[KB_NROOF];                     /* the machine fields, medians over reps */
    KbStat dblk, dpro, dacc, dapb;             /* --draft: blocks, proposed, accepted, and
                                                * accepted per block */
    double tps, btot, rss, plan, buffers;
    int threads; const char *kernels, *version;
} Sum;

static Sum sum_side(const KbSide *s) {
    Sum u;
    double v[11][KB_MAXREP];
    memset(&u, 0, sizeof u);
    u.rss = u.plan = u.buffers = NAN;
    u.kernels = u.version = "";
    for (int i = 0; i < s->n; i++) {
        const KbRep *r = &s->rep[i];
        v[0][i] = r->n_generated > 1 ? r->spt : -1; v[1][i] = r->ptps;
        v[2][i] = r->b_trunk; v[3][i] = r->b_exp; v[4][i] = r->b_head;
        v[5][i] = r->io_share; v[6][i] = r->hit; v[7][i] = r->dhit;
        v[8][i] = r->ranks > 1 ? r->coll_pt : -1; v[9][i] = r->ranks > 1 ? r->comm_pt : -1;
        v[10][i] = r->ranks > 1 ? r->wait_pt : -1;
        if (!i || r->rss > u.rss) u.rss = (double)r->rss;
        if (r->plan && (!i || r->plan > u.plan)) u.plan = (double)r->plan;
        if (r->buffers) u.buffers = (double)r->buffers;
        u.threads = r->threads; u.kernels = r->kernels; u.version = r->version;
    }
    KbStat *st[11] = { &u.spt, &u.ptps, &u.bt, &u.be, &u.bh, &u.io, &u.hit, &u.dhit,
                       &u.coll, &u.comm, &u.wait };
    for (int k = 0; k < 11; k++) *st[k] = kb_stat(v[k], s->n);
    for (int k = 0; k < KB_NROOF; k++) {
        double w[KB_MAXREP];
        for (int i = 0; i < s->n && i < KB_MAXREP; i++) w[i] = s->rep[i].roof[k];
        u.roof[k] = kb_stat(w, s->n);
    }
    double d[4][KB_MAXREP];
    for (int i = 0; i < s->n && i < KB_MAXREP; i++) {
        const KbRep *r = &s->rep[i];
        d[0][i] = r->d_blocks; d[1][i] = r->d_proposed; d[2][i] = r->d_accepted;
        d[3][i] = r->d_blocks > 0 ? r->d_accepted / r->d_blocks : r->d_blocks == 0 ? 0 : -1;
    }
    u.dblk = kb_stat(d[0], s->n); u.dpro = kb_stat(d[1], s->n);
    u.dacc = kb_stat(d[2], s->n); u.dapb = kb_stat(d[3], s->n);
    u.tps = u.spt.med > 0 ? 1 / u.spt.med : NAN;
    u.btot = u.bt.med + u.be.med + u.bh.med;   /* NAN when there was no decode */
    if (!s->n) u.plan = NAN;
    return u;
}

typedef struct { double mem_lim, disk_lim, mem, disk; } Lim;

static Lim limits(const KbMachine *m, const KbConf *c, const Sum *u) {
    Lim l = { NAN, NAN, NAN, NAN };
    double ml = kb_mem_limit(m, u->threads ? u->threads : c->threads);
    if (ml > 0) l.mem_lim = ml;
    if (m->disk_mbps > 0) l.disk_lim = m->disk_mbps;
    if (u->spt.med > 0 && c->batch <= 1) {    /* a batched step serves B tokens: no share */
        l.mem = m->touched / u->spt.med / (l.mem_lim * 1e9);
        l.disk = u->btot / u->spt.med / (l.disk_lim * 1e6);
    }
    return l;
}

/* ---- JSON ---- */

typedef struct { FILE *f; int n; } J;

static void key(J *j, const char *k) { fprintf(j->f, "%s\"%s\": ", j->n++ ? ", " : "", k); }
static void num(J *j, const char *k, double v) {
    key(j, k);
    if (!isfinite(v)) fputs("null", j->f);
    else if (v == floor(v) && fabs(v) < 1e15) fprintf(j->f, "%.0f", v);
    else fprintf(j->f, "%.6g", v);
}
static void str(J *j, const char *k, const char *s) {
    key(j, k);
    char *q = s ? json_quote(s, strlen(s)) : NULL;
    fputs(q ? q : "null", j->f);
    free(q);
}
static void open_obj(J *j, const char *k, J *in) {
    key(j, k);
    fputc('{', j->f);
    *in = (J){ j->f, 0 };
}
static void close_obj(J *in) { fputc('}', in->f); }
static void stat_obj(J *j, const char *k, KbStat s) {
    J o;
    open_obj(j, k, &o);
    num(&o, "median", s.med); num(&o, "min", s.min); num(&o, "max", s.max);
    close_obj(&o);
}
static double gb_or_nan(double g) { return g >= 0 ? g : NAN; }
static double ratio(double b, double a) { return a > 0 && b >= 0 ? b / a : NAN; }

static void row_json(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *r, int idx) {
    const Sum a = sum_side(&r->a);
    const Lim l = limits(m, &r->c, &a);
    J j = { f, 0 }, x;
    fputc('{', f);
    num(&j, "row", idx + 1);
    str(&j, "budget", r->c.budget);
    str(&j, "preset", r->c.preset);
    num(&j, "trunk_gb", gb_or_nan(r->c.trunk_gb)); num(&j, "cache_gb", gb_or_nan(r->c.cache_gb));
    num(&j, "threads", a.threads ? a.threads : r->c.threads ? r->c.threads : NAN);
    str(&j, "kernels", a.kernels[0] ? a.kernels : r->c.kernels ? r->c.kernels : "auto");
    num(&j, "n_prompt", r->c.n_prompt); num(&j, "n_gen", r->c.n_gen);
    num(&j, "batch", r->c.batch);
    num(&j, "n_generated", r->a.n ? r->a.rep[0].n_generated : NAN);   /* all B sequences' */
    str(&j, "stop", r->a.n ? r->a.rep[0].stop : NULL);        /* the first rep's (greedy) */
    double wall[KB_MAXREP];
    for (int i = 0; i < r->a.n; i++) wall[i] = r->a.rep[i].wall;
    stat_obj(&j, "seconds", kb_stat(wall, r->a.n));            /* each rep's run */
    num(&j, "reps", r->a.n); num(&j, "reps_asked", o->reps);
    key(&j, "cold"); fputs(r->c.cold ? "true" : "false", f);
    stat_obj(&j, "seconds_per_token", a.spt);
    stat_obj(&j, "prefill_tokens_per_second", a.ptps);
    num(&j, "tokens_per_second", a.tps);
    num(&j, "peak_rss_bytes", a.rss); num(&j, "plan_bytes", a.plan);
    num(&j, "buffer_bytes", a.buffers); num(&j, "peak_rss_over_plan", ratio(a.rss, a.plan));
    open_obj(&j, "bytes_per_token", &x);
    num(&x, "trunk", a.bt.med); num(&x, "experts", a.be.med); num(&x, "lm_head", a.bh.med);
    num(&x, "total", a.btot);
    close_obj(&x);
    num(&j, "io_share", a.io.med); num(&j, "expert_hit_rate", a.hit.med);
    num(&j, "decode_hit_rate", a.dhit.med);
    for (int k = 0; k < KB_NROOF; k++) num(&j, kb_roof_keys[k], a.roof[k].med);
    if (m->ranks > 1) {                       /* over N ranks: per token, the largest rank's */
        num(&j, "ranks", m->ranks);
        open_obj(&j, "comm_per_token", &x);
        num(&x, "collectives", a.coll.med); num(&x, "bytes", a.comm.med);
        num(&x, "wait_seconds", a.wait.med);
        close_obj(&x);
    }
    if (o->draft) {                           /* medians over the reps */
        open_obj(&j, "draft", &x);
        num(&x, "blocks", a.dblk.med); num(&x, "proposed", a.dpro.med);
        num(&x, "accepted", a.dacc.med); num(&x, "accepted_per_block", a.dapb.med);
        close_obj(&x);
    }
    num(&j, "touched_bytes_per_token", (double)m->touched);
    open_obj(&j, "limits", &x);
    num(&x, "memory_read_gb_per_s", l.mem_lim); num(&x, "disk_mb_per_s", l.disk_lim);
    close_obj(&x);
    open_obj(&j, "ratios", &x);
    num(&x, "memory", l.mem); num(&x, "disk", l.disk);
    close_obj(&x);
    num(&j, "exit_code", r->a.rc);
    str(&j, "error", r->a.rc ? r->a.error : NULL);
    if (o->compare) {
        const Sum b = sum_side(&r->b);
        J c, q;
        open_obj(&j, "compare", &c);
        str(&c, "binary", o->compare); str(&c, "version", b.version[0] ? b.version : NULL);
        num(&c, "reps", r->b.n);
        str(&c, "stop", r->b.n ? r->b.rep[0].stop : NULL);
        stat_obj(&c, "seconds_per_token", b.spt);
        stat_obj(&c, "prefill_tokens_per_second", b.ptps);
        num(&c, "tokens_per_second", b.tps); num(&c, "peak_rss_bytes", b.rss);
        num(&c, "plan_bytes", b.plan);
        open_obj(&c, "ratio", &q);              /* B / A */
        num(&q, "seconds_per_token", ratio(b.spt.med, a.spt.med));
        num(&q, "prefill_tokens_per_second", ratio(b.ptps.med, a.ptps.med));
        num(&q, "tokens_per_second", ratio(b.tps, a.tps));
        num(&q, "peak_rss_bytes", ratio(b.rss, a.rss));
        close_obj(&q);
        num(&c, "exit_code", r->b.rc);
        str(&c, "error", r->b.rc ? r->b.error : NULL);
        close_obj(&c);
    }
    fputc('}', f);
}

static void machine_json(FILE *f, const KbOpts *o, const KbMachine *m) {
    J j = { f, 0 }, x;
    num(&j, "schema", KB_SCHEMA);
    str(&j, "k3_version", K3_VERSION);
    str(&j, "model", o->model); str(&j, "trunk", o->trunk);
    open_obj(&j, "machine", &x);
    str(&x, "cpu", m->cpu); num(&x, "cores", m->cores); str(&x, "kernels", m->kernels);
    str(&x, "os", m->os);
    num(&x, "mem_total_bytes", (double)m->mem_total);
    num(&x, "mem_available_bytes", (double)m->mem_avail);
    num(&x, "cgroup_available_bytes", m->cg_avail ? (double)m->cg_avail : NAN);
    str(&x, "cgroup", m->cg_avail ? m->cg_desc : NULL);
    str(&x, "filesystem", m->fs);
    num(&x, "bench_rss_bytes", (double)m->parent_rss);
    key(&x, "o_direct");
    fputs(m->odirect < 0 ? "null" : m->odirect ? "true" : "false", f);
    J l, d, b;
    open_obj(&x, "limits", &l);
    open_obj(&l, "memory_read_gb_per_s", &b);
    for (int i = 0; i < m->n_bw; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", m->bw_threads[i]);
        num(&b, k, m->bw_gbps[i]);
    }
    close_obj(&b);
    open_obj(&l, "disk", &d);
    num(&d, "mb_per_s", m->disk_mbps > 0 ? m->disk_mbps : NAN);
    num(&d, "bytes", (double)m->disk_bytes); num(&d, "seconds", m->disk_s);
    num(&d, "reads", m->disk_reads); num(&d, "window_bytes", (double)m->disk_window);
    num(&d, "readers", m->disk_readers);
    close_obj(&d);
    close_obj(&l);
    close_obj(&x);
}

/* ---- markdown and CSV ---- */

#define NCOL 28
typedef struct { char s[NCOL][160]; } Line;

static void fmtv(char *b, size_t n, double v) {
    if (!isfinite(v)) snprintf(b, n, "-");
    else if (fabs(v) >= 100) snprintf(b, n, "%.0f", v);
    else if (fabs(v) >= 10) snprintf(b, n, "%.1f", v);
    else if (fabs(v) >= 1) snprintf(b, n, "%.2f", v);
    else snprintf(b, n, "%.3g", v);
}
static void fmt_stat(char *b, size_t n, KbStat s) {
    char m[32], lo[32], hi[32];
    fmtv(m, sizeof m, s.med); fmtv(lo, sizeof lo, s.min); fmtv(hi, sizeof hi, s.max);
    if (!s.n) snprintf(b, n, "-");
    else if (s.n == 1) snprintf(b, n, "%s", m);
    else snprintf(b, n, "%s (%s-%s)", m, lo, hi);
}
static void fmt_pct(char *b, size_t n, double v) {
    if (isfinite(v)) snprintf(b, n, "%.0f%%", 100 * v); else snprintf(b, n, "-");
}

static int md_line(Line *L, const KbOpts *o, const KbMachine *m, const KbRow *r, int idx) {
    const Sum a = sum_side(&r->a);
    const Lim l = limits(m, &r->c, &a);
    int k = 0;
    char t[64];
    snprintf(L->s[k++], 160, "%d", idx + 1);
    snprintf(L->s[k++], 160, "%s%s", r->c.budget ? r->c.budget : r->c.preset ? r->c.preset : "auto",
             r->c.cold ? "" : " warm");
    if (a.threads) snprintf(L->s[k++], 160, "%d", a.threads);
    else if (r->c.threads) snprintf(L->s[k++], 160, "%d", r->c.threads);
    else snprintf(L->s[k++], 160, "auto");
    snprintf(L->s[k++], 160, "%s", a.kernels[0] ? a.kernels : r->c.kernels ? r->c.kernels : "auto");
    snprintf(L->s[k++], 160, "%d", r->c.n_prompt);
    snprintf(L->s[k++], 160, "%d", r->c.n_gen);
    if (o->batched) snprintf(L->s[k++], 160, "%d", r->c.batch);
    fmt_stat(L->s[k++], 160, a.ptps);
    fmt_stat(L->s[k++], 160, a.spt);
    fmtv(L->s[k++], 160, a.tps);
    fmtv(t, sizeof t, a.rss / K3_GB); snprintf(L->s[k++], 160, "%s", t);
    fmtv(t, sizeof t, a.plan / K3_GB); snprintf(L->s[k++], 160, "%s", t);
    fmtv(L->s[k++], 160, a.bt.med / 1e6);
    fmtv(L->s[k++], 160, a.be.med / 1e6);
    fmtv(L->s[k++], 160, a.bh.med / 1e6);
    fmt_pct(L->s[k++], 160, a.io.med);
    fmt_pct(L->s[k++], 160, a.dhit.med);
    fmt_pct(L->s[k++], 160, l.disk);
    fmt_pct(L->s[k++], 160, l.mem);
    if (o->draft) fmt_stat(L->s[k++], 160, a.dapb);
    if (m->ranks > 1) {
        fmtv(L->s[k++], 160, a.coll.med);
        fmtv(L->s[k++], 160, a.comm.med / 1e3);
        fmtv(L->s[k++], 160, a.wait.med * 1e3);
    }
    if (o->compare) {
        const Sum b = sum_side(&r->b);
        fmt_stat(L->s[k++], 160, b.spt);
        fmtv(L->s[k++], 160, ratio(b.spt.med, a.spt.med));
        fmtv(L->s[k++], 160, ratio(b.ptps.med, a.ptps.med));
        fmtv(L->s[k++], 160, ratio(b.rss, a.rss));
    }
    const char *e = r->a.rc ? r->a.error : r->b.rc ? r->b.error : "";
    snprintf(L->s[k++], 160, "%s%.150s", r->b.rc && !r->a.rc ? "B: " : "", e);
    for (int i = 0; i < k; i++)                /* a '|' would split the cell */
        for (char *p = L->s[i]; *p; p++) if (*p == '|') *p = '/';
    return k;
}

static const char *const MD_HEAD[] = { "row", "budget", "threads", "kernels", "p", "n",
    "prefill tok/s", "s/token", "tok/s", "peak RSS GB", "plan GB", "trunk MB/tok",
    "experts MB/tok", "lm_head MB/tok", "I/O share", "hit rate", "disk", "mem bw" };
static const char *const MD_RANKS[] = { "coll/tok", "comm KB/tok", "comm ms/tok" };
static const char *const MD_CMP[] = { "B s/token", "B/A s/token", "B/A prefill", "B/A RSS" };

static void md_header(FILE *f, const KbOpts *o, const KbMachine *m) {
    fprintf(f, "k3 bench (schema %d): k3 %s, %s%s%s; %d reps a row\n\n", KB_SCHEMA, K3_VERSION,
            o->model, o->trunk ? ", trunk " : "", o->trunk ? o->trunk : "", o->reps);
    fprintf(f, "- CPU: %s, %d cores, kernels %s; %s\n", m->cpu, m->cores, m->kernels, m->os);
    fprintf(f, "- memory: MemTotal %.1f GB, MemAvailable %.1f GB; cgroup: ", m->mem_total / K3_GB,
            m->mem_avail / K3_GB);
    if (m->cg_avail) fprintf(f, "%s, %.1f GB available\n", m->cg_desc, m->cg_avail / K3_GB);
    else fprintf(f, "no limit\n");
    fprintf(f, "- files: %s, O_DIRECT %s\n", m->fs,
            m->odirect < 0 ? "not probed" : m->odirect ? "yes" : "no (buffered reads)");
    fprintf(f, "- limits measured in this run: memory read");
    for (int i = 0; i < m->n_bw; i++)
        fprintf(f, "%s %d thread%s %.1f GB/s", i ? "," : "", m->bw_threads[i],
                m->bw_threads[i] == 1 ? "" : "s", m->bw_gbps[i]);
    if (!m->n_bw) fprintf(f, " not measured");
    if (m->disk_mbps > 0)
        fprintf(f, "; disk %.0f MB/s (%d reads of %.2f MB expert windows, %d readers, %s)\n",
                m->disk_mbps, m->disk_reads, m->disk_window / 1e6, m->disk_readers,
                m->odirect ? "O_DIRECT" : "buffered");
    else fprintf(f, "; disk not measured\n");
    if (o->compare)
        fprintf(f, "- B = %s (--compare), run rep by rep with A = this k3\n", o->compare);
    if (m->ranks > 1)
        fprintf(f, "- ranks: %d (k3-mpi under mpirun): every rank runs each rep in its process, "
                "its peak RSS reset first; peak RSS is the largest rank's, the limits rank 0's; "
                "coll/tok, comm KB/tok, comm ms/tok: collectives, bytes received and seconds "
                "waited in them per token (decode's), the largest rank's\n", m->ranks);
    fprintf(f, "\nprefill tok/s, s/token: median (min-max) over the reps; peak RSS: the largest "
            "rep (wait4; a child starts from k3 bench's own %.3f GB); MB/tok: bytes read per "
            "decode token; hit rate: decode; disk, mem bw: the row's bytes per second as a share "
            "of the limit (mem bw: %.2f GB of weights touched per token; disk can pass 100%%: "
            "its limit is read in the experts' pattern, small windows by 4 readers, while the "
            "trunk and lm_head stream in large pieces with up to 16 reads in flight, which a "
            "disk serves faster, and buffered reads may come from the page cache); rows marked "
            "warm kept the page cache, the others started cold.\n\n", m->parent_rss / K3_GB,
            m->touched / K3_GB);
}

/* The table's cells: the header line and one per row; *nc columns, *ecol the error
 * column (-1: none). NULL when out of memory. */
static Line *table_lines(const KbOpts *o, const KbMachine *m, const KbRow *rows, int n,
                         int *nc_out, int *ecol) {
    Line *L = calloc((size_t)n + 1, sizeof *L);
    if (!L) return NULL;
    int nc = 0, any_err = 0;
    for (size_t i = 0; i < sizeof MD_HEAD / sizeof *MD_HEAD; i++) {
        snprintf(L[0].s[nc++], 160, "%s", MD_HEAD[i]);
        if (o->batched && !strcmp(MD_HEAD[i], "n")) snprintf(L[0].s[nc++], 160, "batch");
    }
    if (o->draft) snprintf(L[0].s[nc++], 160, "acc/block");
    for (int i = 0; m->ranks > 1 && i < 3; i++) snprintf(L[0].s[nc++], 160, "%s", MD_RANKS[i]);
    for (int i = 0; o->compare && i < 4; i++) snprintf(L[0].s[nc++], 160, "%s", MD_CMP[i]);
    snprintf(L[0].s[nc++], 160, "error");
    for (int i = 0; i < n; i++) {
        md_line(&L[i + 1], o, m, &rows[i], i);
        any_err |= rows[i].a.rc || rows[i].b.rc;
    }
    if (!any_err) nc--;
    *ecol = any_err ? nc - 1 : -1;             /* text columns are left-aligned */
    *nc_out = nc;
    return L;
}

static void md_table(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n) {
    int nc, ecol, w[NCOL] = { 0 };
    Line *L = table_lines(o, m, rows, n, &nc, &ecol);
    if (!L) return;
    for (int i = 0; i <= n; i++)
        for (int c = 0; c < nc; c++) {
            int len = (int)strlen(L[i].s[c]);
            if (len > w[c]) w[c] = len;
        }
    for (int i = 0; i <= n; i++) {
        for (int c = 0; c < nc; c++)
            fprintf(f, c < 2 || c == ecol ? "| %-*s " : "| %*s ", w[c], L[i].s[c]);
        fprintf(f, "|\n");
        if (i == 0) {
            for (int c = 0; c < nc; c++) {
                fputs(c < 2 || c == ecol ? "|:" : "|-", f);
                for (int k = 0; k < w[c]; k++) fputc('-', f);
                fputs(c < 2 || c == ecol ? "-" : ":", f);
            }
            fprintf(f, "|\n");
        }
    }
    free(L);
}

/* -o html: the same cells as a <table>, each escaped (a <pre> of the markdown scrolled
 * sideways). */
static void html_table(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows,
                       int n) {
    int nc, ecol;
    Line *L = table_lines(o, m, rows, n, &nc, &ecol);
    if (!L) return;
    fputs("<table>\n<thead><tr>", f);
    for (int c = 0; c < nc; c++) {
        fputs("<th>", f); kb_html_esc(f, L[0].s[c]); fputs("</th>", f);
    }
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int i = 1; i <= n; i++) {
        fputs("<tr>", f);
        for (int c = 0; c < nc; c++) {
            fputs(c < 2 || c == ecol ? "<td class=\"t\">" : "<td>", f);
            kb_html_esc(f, L[i].s[c]);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody>\n</table>\n", f);
    free(L);
}

static void csv_val(FILE *f, double v) {
    if (!isfinite(v)) fputc(',', f);
    else if (v == floor(v) && fabs(v) < 1e15) fprintf(f, ",%.0f", v);
    else fprintf(f, ",%.6g", v);
}
static void csv_str(FILE *f, const char *s) {
    fputs(",\"", f);
    for (; s && *s; s++) { if (*s == '"') fputc('"', f); if (*s != '\n') fputc(*s, f); }
    fputc('"', f);
}

static void csv(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n) {
    fputs("row,budget,preset,trunk_gb,cache_gb,threads,kernels,n_prompt,n_gen,reps,cold,"
          "prefill_tps_median,prefill_tps_min,prefill_tps_max,spt_median,spt_min,spt_max,"
          "tokens_per_second,peak_rss_bytes,plan_bytes,trunk_bytes_per_token,"
          "expert_bytes_per_token,lm_head_bytes_per_token,io_share,expert_hit_rate,"
          "decode_hit_rate,memory_read_gb_per_s,disk_mb_per_s,memory_ratio,disk_ratio,"
          "b_spt_median,b_prefill_tps_median,b_peak_rss_bytes,ratio_spt,ratio_prefill_tps,"
          "ratio_peak_rss,error,batch,stop", f);
    for (int k = 0; k < KB_NROOF; k++) fprintf(f, ",%s", kb_roof_keys[k]);
    if (o->draft) fputs(",draft_blocks,draft_proposed,draft_accepted,draft_accepted_per_block", f);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        const KbRow *r = &rows[i];
        const Sum a = sum_side(&r->a), b = sum_side(&r->b);
        const Lim l = limits(m, &r->c, &a);
        fprintf(f, "%d", i + 1);
        csv_str(f, r->c.budget); csv_str(f, r->c.preset);
        csv_val(f, gb_or_nan(r->c.trunk_gb)); csv_val(f, gb_or_nan(r->c.cache_gb));
        csv_val(f, a.threads ? a.threads : r->c.threads ? r->c.threads : NAN);
        csv_str(f, a.kernels[0] ? a.kernels : r->c.kernels ? r->c.kernels : "auto");
        csv_val(f, r->c.n_prompt); csv_val(f, r->c.n_gen); csv_val(f, r->a.n);
        csv_val(f, r->c.cold);
        const double v[] = { a.ptps.med, a.ptps.min, a.ptps.max, a.spt.med, a.spt.min, a.spt.max,
            a.tps, a.rss, a.plan, a.bt.med, a.be.med, a.bh.med, a.io.med, a.hit.med, a.dhit.med,
            l.mem_lim, l.disk_lim, l.mem, l.disk };
        for (size_t k = 0; k < sizeof v / sizeof *v; k++) csv_val(f, v[k]);
        const double c[] = { b.spt.med, b.ptps.med, b.rss, ratio(b.spt.med, a.spt.med),
            ratio(b.ptps.med, a.ptps.med), ratio(b.rss, a.rss) };
        for (size_t k = 0; k < sizeof c / sizeof *c; k++) csv_val(f, o->compare ? c[k] : NAN);
        csv_str(f, r->a.rc ? r->a.error : r->b.rc ? r->b.error : "");
        csv_val(f, r->c.batch);
        if (r->a.n) csv_str(f, r->a.rep[0].stop);
        else fputc(',', f);
        for (int k = 0; k < KB_NROOF; k++) csv_val(f, a.roof[k].med);
        const double dv[] = { a.dblk.med, a.dpro.med, a.dacc.med, a.dapb.med };
        for (int k = 0; o->draft && k < 4; k++) csv_val(f, dv[k]);
        fputc('\n', f);
    }
}

/* ---- the three calls ---- */

void kb_out_start(FILE *f, const KbOpts *o, const KbMachine *m) {
    if (o->fmt != KB_JSONL) return;
    fputc('{', f); machine_json(f, o, m); fputs("}\n", f);
    fflush(f);
}

void kb_out_row(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *r, int idx) {
    if (o->fmt != KB_JSONL) return;
    row_json(f, o, m, r, idx);
    fputc('\n', f);
    fflush(f);
}

void kb_out_end(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n) {
    if (o->fmt == KB_MD) { md_header(f, o, m); md_table(f, o, m, rows, n); }
    else if (o->fmt == KB_CSV) csv(f, o, m, rows, n);
    else if (o->fmt == KB_HTML) {              /* the figure, the notes, the table */
        char *h = NULL, *t = NULL;
        size_t hn = 0, tn = 0;
        FILE *hf = open_memstream(&h, &hn), *tf = open_memstream(&t, &tn);
        if (hf) { md_header(hf, o, m); fclose(hf); }
        if (tf) { html_table(tf, o, m, rows, n); fclose(tf); }
        kb_plot_html(f, o, m, rows, n, h ? h : "", t ? t : "");
        free(h); free(t);
    }
    else if (o->fmt == KB_JSON) {
        fputc('{', f);
        machine_json(f, o, m);
        fputs(",\n\"rows\": [", f);
        for (int i = 0; i < n; i++) {
            fputs(i ? ",\n  " : "\n  ", f);
            row_json(f, o, m, &rows[i], i);
        }
        fputs("\n]}\n", f);
    }
}
