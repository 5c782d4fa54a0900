/* test_bench_plot.c — the figure of `k3 bench --plot` (src/bench/bench_plot.c).
 *   test_bench_plot               self-test: synthetic grids (budgets; threads x prompt
 *                                 lengths) drawn to memory and checked
 *   test_bench_plot FILE.svg      a figure k3 wrote (tests/sh/bench_plot.sh)
 * Checks: well-formed XML (every tag closed in order, quoted attributes, no raw '<' or
 * stray '&' in text), an <svg> root, two panels each with an x and a y axis, series of
 * points inside the plot area; on the synthetic grids, every point's value is the median
 * of its reps (peak RSS: the largest rep) worked out here, and its position is that value
 * on the y axis read back from the tick labels (so a flipped or mis-scaled axis fails). */
#include "bench/bench_grid.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL: " __VA_ARGS__); printf("\n"); \
                                       fails++; } } while (0)

/* ---- a small well-formedness checker ---- */
static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == ':' || c == '.';
}
static int entity_ok(const char *p) {
    static const char *const E[] = { "&lt;", "&gt;", "&amp;", "&quot;", "&apos;" };
    for (int i = 0; i < 5; i++) if (!strncmp(p, E[i], strlen(E[i]))) return 1;
    return 0;
}
/* 0 when s is well-formed with root <svg>; else -1 with why. */
static int well_formed(const char *s, char *why, size_t wn) {
    char stack[64][32];
    int depth = 0, roots = 0;
    const char *p = s;
    if (!strncmp(p, "<?xml", 5)) { p = strstr(p, "?>"); if (!p) goto bad_pi; p += 2; }
    while (*p) {
        if (*p == '&' && !entity_ok(p)) { snprintf(why, wn, "stray '&' at %ld", p - s); return -1; }
        if (*p == '>') { snprintf(why, wn, "stray '>' at %ld", p - s); return -1; }
        if (*p != '<') { p++; continue; }
        int close = p[1] == '/';
        const char *n = p + 1 + close, *e = n;
        while (name_char(*e)) e++;
        if (e == n || e - n >= 32) { snprintf(why, wn, "bad tag name at %ld", p - s); return -1; }
        const char *q = e;
        for (;;) {                               /* attributes: name="value" */
            while (*q == ' ' || *q == '\n') q++;
            if (*q == '>' || (*q == '/' && q[1] == '>')) break;
            if (close || !name_char(*q)) { snprintf(why, wn, "bad tag at %ld", q - s); return -1; }
            while (name_char(*q)) q++;
            if (q[0] != '=' || q[1] != '"') { snprintf(why, wn, "unquoted attr at %ld", q - s);
                                             return -1; }
            q += 2;
            while (*q && *q != '"') {
                if (*q == '<' || (*q == '&' && !entity_ok(q))) {
                    snprintf(why, wn, "raw '%c' in an attribute at %ld", *q, q - s); return -1;
                }
                q++;
            }
            if (!*q) { snprintf(why, wn, "unterminated attribute"); return -1; }
            q++;
        }
        int empty = *q == '/';
        if (close) {
            if (!depth || strncmp(stack[depth - 1], n, (size_t)(e - n)) ||
                stack[depth - 1][e - n]) {
                snprintf(why, wn, "</%.*s> closes <%s>", (int)(e - n), n,
                         depth ? stack[depth - 1] : "nothing");
                return -1;
            }
            depth--;
        } else if (!empty) {
            if (!depth && roots++) { snprintf(why, wn, "more than one root"); return -1; }
            if (!depth && strncmp(n, "svg", 3)) { snprintf(why, wn, "the root is not <svg>");
                                                  return -1; }
            if (depth == 64) { snprintf(why, wn, "too deep"); return -1; }
            snprintf(stack[depth++], 32, "%.*s", (int)(e - n), n);
        }
        p = q + (empty ? 2 : 1);
    }
    if (depth) { snprintf(why, wn, "<%s> is never closed", stack[depth - 1]); return -1; }
    if (!roots) { snprintf(why, wn, "no <svg> root"); return -1; }
    return 0;
bad_pi:
    snprintf(why, wn, "unterminated <?xml");
    return -1;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* Points of panel k: the value (data-v) and cy of each circle, and y of value v from the
 * panel's tick labels (a straight line through the first and last tick). */
typedef struct { double v[64], cy[64], cx[64]; int n; double t0, y0, t1, y1; } PanelPts;
static int panel_pts(const char *s, int k, PanelPts *P) {
    memset(P, 0, sizeof *P);
    const char *p = s;
    for (int i = 0; i <= k; i++) if (!(p = strstr(p + (i > 0), "<g class=\"panel\""))) return -1;
    const char *end = strstr(p + 1, "<g class=\"panel\"");
    int ticks = 0;
    for (const char *q = p; (q = strstr(q, "class=\"tick\" data-v=\"")) && (!end || q < end);
         q++) {
        const char *y = q;
        while (y > p && strncmp(y, " y=\"", 4)) y--;
        double v = atof(q + 21), yy = atof(y + 4) - 4;
        if (!ticks++) { P->t0 = v; P->y0 = yy; } else { P->t1 = v; P->y1 = yy; }
    }
    for (const char *q = p; (q = strstr(q, "<circle cx=\"")) && (!end || q < end); q++) {
        if (P->n == 64) break;
        P->cx[P->n] = atof(q + 12);
        const char *c = strstr(q, "cy=\""), *d = strstr(q, "data-v=\"");
        P->cy[P->n] = atof(c + 4); P->v[P->n++] = atof(d + 8);
    }
    return ticks >= 2 ? 0 : -1;
}
static double y_of(const PanelPts *P, double v) {
    return P->y0 + (v - P->t0) * (P->y1 - P->y0) / (P->t1 - P->t0);
}

/* The structure every figure has; returns the number of series. */
static int check_figure(const char *s, const char *what) {
    char why[200];
    int wf = well_formed(s, why, sizeof why);
    CHECK(!wf, "%s: not well-formed: %s", what, why);
    CHECK(count(s, "<g class=\"panel\"") == 2, "%s: %d panels, want 2", what,
          count(s, "<g class=\"panel\""));
    CHECK(count(s, "<g class=\"axis x\"") == 2 && count(s, "<g class=\"axis y\"") == 2,
          "%s: axes missing", what);
    int ns = count(s, "<g class=\"series\"");
    CHECK(ns >= 2 && count(s, "<circle ") >= 2, "%s: no series of points", what);
    for (int k = 0; k < 2; k++) {
        PanelPts P;
        CHECK(!panel_pts(s, k, &P), "%s: panel %d has no y ticks", what, k);
        for (int i = 0; i < P.n; i++)
            CHECK(P.cy[i] >= -0.5 && P.cy[i] <= 260.5 && P.cx[i] >= 0 && P.cx[i] <= 400,
                  "%s: panel %d point %d at (%g, %g) outside the plot", what, k, i, P.cx[i],
                  P.cy[i]);
    }
    return ns / 2;
}

/* ---- synthetic grids ---- */
static KbRep REPS[16][3];
static void rep(KbRep *r, double spt, double ptps, uint64_t rss, int threads) {
    memset(r, 0, sizeof *r);
    r->spt = spt; r->ptps = ptps; r->rss = rss; r->n_generated = 8; r->threads = threads;
    r->b_trunk = 1e6; r->b_exp = 2e6; r->b_head = 0;
}
static char *mem_b;                      /* open_memstream's (outlives the call) */
static size_t mem_n;
static char *draw(const KbOpts *o, const KbMachine *m, const KbRow *rows, int n) {
    char **bp = &mem_b, *b;
    size_t *np = &mem_n;
    *bp = NULL;
    FILE *f = open_memstream(bp, np);
    kb_plot_svg(f, o, m, rows, n);
    fclose(f);
    b = *bp;
    return b;
}

static void budgets(void) {
    KbOpts o = { 0 };
    o.model = "tests/models/<tiny>&5"; o.reps = 3;     /* escaped in the title */
    KbMachine m = { 0 };
    snprintf(m.cpu, sizeof m.cpu, "test CPU");
    m.cores = 2; m.n_bw = 1; m.bw_threads[0] = 2; m.bw_gbps[0] = 10; m.touched = 4000000000ull;
    m.disk_mbps = 1000; m.mem_total = (uint64_t)16e9;
    static const char *const B[3] = { "0:0", "1:0.5", "4:2" };
    /* s/token reps (median the middle value) and peak RSS reps (the largest counts) */
    static const double S[3][3] = { { 3.0, 2.0, 2.5 }, { 1.5, 1.2, 9.0 }, { 0.8, 0.9, 0.85 } };
    static const double R[3][3] = { { 1.0, 1.2, 1.1 }, { 2.0, 2.5, 2.2 }, { 6.0, 5.5, 5.9 } };
    KbRow rows[3];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 3; i++) {
        rows[i].c.budget = B[i]; rows[i].c.n_prompt = 16; rows[i].c.n_gen = 8;
        rows[i].c.threads = 2;
        for (int j = 0; j < 3; j++) rep(&REPS[i][j], S[i][j], 100, (uint64_t)(R[i][j] * 1e9), 2);
        rows[i].a.rep = REPS[i]; rows[i].a.n = 3;
    }
    char *s = draw(&o, &m, rows, 3);
    CHECK(check_figure(s, "budgets") == 1, "budgets: want one series");
    CHECK(strstr(s, "tests/models/&lt;tiny&gt;&amp;5") != NULL, "budgets: the title unescaped");
    CHECK(strstr(s, "memory budget") && strstr(s, "(GB)") && strstr(s, "s/token") &&
          strstr(s, "peak RSS (GB)"), "budgets: axis titles with units missing");
    CHECK(count(s, "<g class=\"limit\"") >= 2, "budgets: the memory and disk limits missing");
    static const double want_spt[3] = { 2.5, 1.5, 0.85 }, want_rss[3] = { 1.2, 2.5, 6.0 };
    PanelPts P0, P1;
    panel_pts(s, 0, &P0);
    panel_pts(s, 1, &P1);
    CHECK(P0.n == 3 && P1.n == 3, "budgets: %d and %d points, want 3 and 3", P0.n, P1.n);
    for (int i = 0; i < 3 && P0.n == 3 && P1.n == 3; i++) {
        CHECK(fabs(P0.v[i] - want_spt[i]) < 1e-9, "budgets: s/token point %d is %g, want the "
              "median %g", i, P0.v[i], want_spt[i]);
        CHECK(fabs(P1.v[i] - want_rss[i]) < 1e-9, "budgets: RSS point %d is %g GB, want the "
              "largest rep %g", i, P1.v[i], want_rss[i]);
        CHECK(fabs(P0.cy[i] - y_of(&P0, want_spt[i])) < 0.6, "budgets: s/token point %d at y "
              "%g, the axis puts %g at %g", i, P0.cy[i], want_spt[i], y_of(&P0, want_spt[i]));
        CHECK(fabs(P1.cy[i] - y_of(&P1, want_rss[i])) < 0.6, "budgets: RSS point %d at y %g, "
              "the axis puts %g at %g", i, P1.cy[i], want_rss[i], y_of(&P1, want_rss[i]));
        if (i) CHECK(P0.cx[i] > P0.cx[i - 1], "budgets: x not in the grid's order");
    }
    /* the memory-stream floor: 4 GB a token at 10 GB/s = 0.4 s/token */
    const char *lim = strstr(s, "data-name=\"memory stream limit");
    PanelPts L = P0;
    CHECK(lim && fabs(atof(strstr(lim, "points=\"") + 8 + strcspn(strstr(lim, "points=\"") + 8,
          ",") + 1) - y_of(&L, 0.4)) < 0.6, "budgets: the memory stream limit is not at 0.4 "
          "s/token");
    printf("budgets: 3 rows, s/token medians and RSS maxima on their axes, limits drawn\n");
    free(s);
}

static void threads_prompts(void) {
    KbOpts o = { 0 };
    o.model = "m"; o.reps = 1;
    KbMachine m = { 0 };
    m.cores = 4; m.n_bw = 2; m.bw_threads[0] = 1; m.bw_gbps[0] = 5; m.bw_threads[1] = 4;
    m.bw_gbps[1] = 20; m.touched = 10000000000ull;
    KbRow rows[4];
    memset(rows, 0, sizeof rows);
    static const int T[4] = { 1, 1, 4, 4 }, Pl[4] = { 16, 64, 16, 64 };
    static const double S[4] = { 4.0, 4.0, 1.0, 1.25 }, PT[4] = { 10, 30, 40, 90 };
    for (int i = 0; i < 4; i++) {
        rows[i].c.budget = "1:1"; rows[i].c.threads = T[i]; rows[i].c.n_prompt = Pl[i];
        rows[i].c.n_gen = 8;
        rep(&REPS[8 + i][0], S[i], PT[i], 1000000, T[i]);
        rows[i].a.rep = REPS[8 + i]; rows[i].a.n = 1;
    }
    char *s = draw(&o, &m, rows, 4);
    CHECK(check_figure(s, "threads") == 2, "threads: want a series per prompt length");
    CHECK(strstr(s, ">threads</text>") && strstr(s, "tokens/s") &&
          strstr(s, "data-name=\"p 16\"") && strstr(s, "data-name=\"p 64\""),
          "threads: the x axis should be threads, the series p 16 and p 64");
    PanelPts P0, P1;
    panel_pts(s, 0, &P0);
    panel_pts(s, 1, &P1);
    /* series p 16 first: threads 1, 4; then p 64 */
    static const double tps[4] = { 0.25, 1.0, 0.25, 0.8 }, pp[4] = { 10, 40, 30, 90 };
    CHECK(P0.n == 4 && P1.n == 4, "threads: %d and %d points", P0.n, P1.n);
    for (int i = 0; i < 4 && P0.n == 4 && P1.n == 4; i++) {
        CHECK(fabs(P0.v[i] - tps[i]) < 1e-9 && fabs(P0.cy[i] - y_of(&P0, tps[i])) < 0.6,
              "threads: decode point %d is %g at y %g, want %g", i, P0.v[i], P0.cy[i], tps[i]);
        CHECK(fabs(P1.v[i] - pp[i]) < 1e-9 && fabs(P1.cy[i] - y_of(&P1, pp[i])) < 0.6,
              "threads: prefill point %d is %g at y %g, want %g", i, P1.v[i], P1.cy[i], pp[i]);
    }
    printf("threads x prompt lengths: tokens/s against threads, a series per prompt length\n");
    free(s);
}

static void checker_selftest(void) {
    char why[200];
    static const char *const BAD[] = { "<svg><g></svg>", "<svg>a < b</svg>", "<svg x=1></svg>",
        "<svg>&nope;</svg>", "<g></g>", "<svg></svg><svg></svg>", "<svg><g></g>" };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++)
        CHECK(well_formed(BAD[i], why, sizeof why), "the checker takes '%s'", BAD[i]);
    CHECK(!well_formed("<?xml version=\"1.0\"?>\n<svg a=\"&amp;\"><g/><t>x &lt; y</t></svg>",
                       why, sizeof why), "the checker refuses good XML: %s", why);
    printf("the XML checker: 7 broken documents refused, a good one taken\n");
}

int main(int argc, char **argv) {
    if (argc > 1) {
        FILE *f = fopen(argv[1], "rb");
        if (!f) { printf("FAIL: cannot open %s\n", argv[1]); return 1; }
        char *b = calloc(1, 1 << 22);
        size_t n = b ? fread(b, 1, (1 << 22) - 1, f) : 0;
        fclose(f);
        if (!n) { printf("FAIL: %s is empty\n", argv[1]); return 1; }
        int ns = check_figure(b, argv[1]);
        if (!fails) printf("%s: well-formed, 2 panels with axes, %d series\n", argv[1], ns);
        free(b);
        return fails ? 1 : 0;
    }
    checker_selftest();
    budgets();
    threads_prompts();
    if (fails) { printf("%d checks failed\n", fails); return 1; }
    printf("test_bench_plot: all passed\n");
    return 0;
}
