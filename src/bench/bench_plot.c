/* bench_plot.c — `k3 bench --plot FILE.svg` and `-o html`: the grid as a figure, the SVG
 * written here. The x axis is the grid's first axis with more than one value (budget,
 * threads, prompt tokens, generated tokens, kernels), its values evenly spaced in the order
 * given; the rows that differ in the other axes are separate series. Two panels: against
 * the budget, s/token and peak RSS; against anything else, decode and prefill tokens/s.
 * The limits measured in the same run are dashed grey lines: the memory stream (the
 * weights a token touches read at the measured bandwidth) and the disk (the row's bytes
 * per token read at the measured disk rate), as a floor on s/token or a ceiling on
 * tokens/s. Every y axis starts at 0. */
#include "bench_grid.h"
#include "mem.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 980                      /* the figure; two panels side by side */
#define PW 400                     /* a panel's plot area */
#define PH 260
#define MAXS 8                     /* series drawn (more are left out, said in the legend) */
#define MAXX 64                    /* x categories */

static const char *const COLOR[MAXS] = { "#1f5fa8", "#c0392b", "#2e8b57", "#8e44ad",
                                         "#d35400", "#16a085", "#7f6000", "#555555" };

/* What a row measured (medians over its reps; NAN = none). */
typedef struct { double spt, tps, ptps, rss, disk_s, mem_s; } Pt;

static double med(const KbSide *s, int what) {
    double v[KB_MAXREP];
    for (int i = 0; i < s->n; i++)
        v[i] = what ? s->rep[i].ptps : s->rep[i].n_generated > 1 ? s->rep[i].spt : -1;
    KbStat st = kb_stat(v, s->n);
    return st.n ? st.med : NAN;
}

static Pt point(const KbMachine *m, const KbRow *r, const KbSide *s) {
    Pt p = { med(s, 0), NAN, med(s, 1), NAN, NAN, NAN };
    p.tps = p.spt > 0 ? 1 / p.spt : NAN;
    double bytes[3][KB_MAXREP];
    for (int i = 0; i < s->n; i++) {
        const KbRep *q = &s->rep[i];
        if (!i || (double)q->rss > p.rss) p.rss = (double)q->rss;
        bytes[0][i] = q->b_trunk; bytes[1][i] = q->b_exp; bytes[2][i] = q->b_head;
    }
    double tot = 0;
    for (int k = 0; k < 3; k++) tot += kb_stat(bytes[k], s->n).med;
    if (m->disk_mbps > 0 && tot > 0) p.disk_s = tot / (m->disk_mbps * 1e6);
    int th = s->n && s->rep[0].threads ? s->rep[0].threads : r->c.threads;
    double bw = kb_mem_limit(m, th);
    if (bw > 0 && m->touched) p.mem_s = (double)m->touched / (bw * 1e9);
    return p;
}

/* ---- the axes of the grid ---- */
enum { AX_BUDGET, AX_THREADS, AX_PROMPT, AX_GEN, AX_KERNELS, AX_N };
static const char *const AX_TITLE[AX_N] = { "memory budget --trunk-gb:--cache-gb (GB)",
    "threads", "prompt length (tokens)", "generated tokens", "kernels" };

static void ax_value(const KbConf *c, int ax, char *b, size_t n) {
    switch (ax) {
    case AX_BUDGET:
        snprintf(b, n, "%s", c->budget ? c->budget : c->preset ? c->preset : "auto"); break;
    case AX_THREADS:
        if (c->threads) snprintf(b, n, "%d", c->threads); else snprintf(b, n, "auto");
        break;
    case AX_PROMPT: snprintf(b, n, "%d", c->n_prompt); break;
    case AX_GEN: snprintf(b, n, "%d", c->n_gen); break;
    default: snprintf(b, n, "%s", c->kernels ? c->kernels : "auto");
    }
}
static int varies(const KbRow *rows, int n, int ax) {
    char a[64], b[64];
    ax_value(&rows[0].c, ax, a, sizeof a);
    for (int i = 1; i < n; i++) {
        ax_value(&rows[i].c, ax, b, sizeof b);
        if (strcmp(a, b)) return 1;
    }
    return 0;
}

/* ---- SVG text ---- */
void kb_html_esc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n') fputc(*s, f);
    }
}
#define esc kb_html_esc
static void text(FILE *f, double x, double y, const char *anchor, const char *cls,
                 const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor, cls);
    esc(f, s);
    fputs("</text>\n", f);
}
static void fmtn(char *b, size_t n, double v) {
    if (v == 0) snprintf(b, n, "0");
    else if (fabs(v) >= 100) snprintf(b, n, "%.0f", v);
    else snprintf(b, n, "%.3g", v);
}

/* A step of 1, 2 or 5 times a power of ten giving 4-6 ticks up to top. */
static double nice_step(double top) {
    double raw = top / 5, p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

typedef struct {
    const char *title, *ylabel;
    double v[MAXS][MAXX];          /* series x category: the value, NAN = none */
    double lim[2][MAXX];           /* memory stream, disk: per category, NAN = none */
    const char *lim_name[2];
    double hline; const char *hline_name;   /* a horizontal limit (MemTotal), NAN = none */
} Panel;

static void panel(FILE *f, const Panel *P, int px, int py, int nx, char xl[][64], int ns,
                  char sl[][160], const char *xtitle) {
    double top = 0, dmax = 0;
    for (int s = 0; s < ns; s++)
        for (int x = 0; x < nx; x++)
            if (isfinite(P->v[s][x]) && P->v[s][x] > dmax) dmax = P->v[s][x];
    top = dmax;
    /* a limit far off the data would flatten it: drawn only within 3x of the data */
    int show[2] = { 0, 0 }, show_h = isfinite(P->hline) && (dmax <= 0 || P->hline <= 3 * dmax);
    for (int k = 0; k < 2; k++)
        for (int x = 0; x < nx; x++)
            if (isfinite(P->lim[k][x]) && P->lim[k][x] > 0) {
                if (dmax > 0 && P->lim[k][x] > 3 * dmax) { show[k] = -1; break; }
                show[k] = 1;
            }
    for (int k = 0; k < 2; k++)
        for (int x = 0; x < nx && show[k] > 0; x++)
            if (isfinite(P->lim[k][x]) && P->lim[k][x] > top) top = P->lim[k][x];
    if (show_h && P->hline > top) top = P->hline;
    if (!(top > 0)) top = 1;
    double step = nice_step(top * 1.05), ymax = ceil(top * 1.05 / step) * step;
    fprintf(f, "<g class=\"panel\" data-title=\"");
    esc(f, P->title);
    fprintf(f, "\" transform=\"translate(%d,%d)\">\n", px, py);
    text(f, PW / 2.0, -14, "middle", "title", P->title);
    /* y axis: ticks, grid, label */
    fprintf(f, "<g class=\"axis y\" data-max=\"%g\">\n", ymax);
    fprintf(f, "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"%d\" class=\"ax\"/>\n", PH);
    for (double t = 0; t <= ymax * (1 + 1e-9); t += step) {
        double y = PH - t / ymax * PH;
        char b[32];
        fmtn(b, sizeof b, t);
        fprintf(f, "<line x1=\"-5\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>\n", y,
                PW, y);
        fprintf(f, "<text x=\"-8\" y=\"%.1f\" text-anchor=\"end\" class=\"tick\" data-v=\"%g\">%s"
                "</text>\n", y + 4, t, b);
    }
    fprintf(f, "<text transform=\"translate(-52,%d) rotate(-90)\" text-anchor=\"middle\" "
            "class=\"label\">", PH / 2);
    esc(f, P->ylabel);
    fputs("</text>\n</g>\n", f);
    /* x axis: one tick a category */
    const double dx = (double)PW / nx;
    fprintf(f, "<g class=\"axis x\">\n<line x1=\"0\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
            "class=\"ax\"/>\n",
            PH, PW, PH);
    for (int x = 0; x < nx; x++) {
        double cx = dx * (x + 0.5);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"ax\"/>\n", cx, PH,
                cx, PH + 5);
        text(f, cx, PH + 18, "middle", "tick", xl[x]);
    }
    text(f, PW / 2.0, PH + 38, "middle", "label", xtitle);
    fputs("</g>\n", f);
    /* the limits, then the series over them */
    for (int k = 0; k < 2; k++) {
        if (show[k] <= 0) continue;
        fprintf(f, "<g class=\"limit\" data-name=\"%s\"><polyline class=\"lim%d\" points=\"",
                P->lim_name[k], k);
        for (int x = 0; x < nx; x++)
            if (isfinite(P->lim[k][x]))
                fprintf(f, "%.1f,%.1f ", dx * (x + 0.5), PH - P->lim[k][x] / ymax * PH);
        fputs("\"/></g>\n", f);
    }
    if (show_h) {
        double y = PH - P->hline / ymax * PH;
        fprintf(f, "<g class=\"limit\" data-name=\"%s\"><line x1=\"0\" y1=\"%.1f\" x2=\"%d\" "
                "y2=\"%.1f\" class=\"lim0\"/></g>\n", P->hline_name, y, PW, y);
    }
    for (int s = 0; s < ns; s++) {
        fprintf(f, "<g class=\"series\" data-name=\"");
        esc(f, sl[s]);
        fprintf(f, "\" stroke=\"%s\" fill=\"%s\">\n<polyline fill=\"none\" points=\"", COLOR[s],
                COLOR[s]);
        for (int x = 0; x < nx; x++)
            if (isfinite(P->v[s][x]))
                fprintf(f, "%.1f,%.1f ", dx * (x + 0.5), PH - P->v[s][x] / ymax * PH);
        fputs("\"/>\n", f);
        for (int x = 0; x < nx; x++)
            if (isfinite(P->v[s][x]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" data-v=\"%g\"/>\n",
                        dx * (x + 0.5), PH - P->v[s][x] / ymax * PH, P->v[s][x]);
        fputs("</g>\n", f);
    }
    /* the legend, below the x label */
    double ly = PH + 58;
    for (int s = 0; s < ns; s++, ly += 15) {
        fprintf(f, "<rect x=\"0\" y=\"%.1f\" width=\"12\" height=\"3\" fill=\"%s\"/>\n", ly - 4,
                COLOR[s]);
        text(f, 18, ly, "start", "legend", sl[s]);
    }
    for (int k = 0; k < 2; k++)
        if (show[k]) {
            char b[200];
            snprintf(b, sizeof b, "%s%s", P->lim_name[k], show[k] < 0 ? " (over 3x the data: "
                     "not drawn)" : "");
            fprintf(f, "<line x1=\"0\" y1=\"%.1f\" x2=\"12\" y2=\"%.1f\" class=\"lim%d\"/>\n",
                    ly - 3, ly - 3, k);
            text(f, 18, ly, "start", "legend", b);
            ly += 15;
        }
    if (isfinite(P->hline)) {
        char b[200];
        snprintf(b, sizeof b, "%s%s", P->hline_name, show_h ? "" : " (over 3x the data: not "
                 "drawn)");
        fprintf(f, "<line x1=\"0\" y1=\"%.1f\" x2=\"12\" y2=\"%.1f\" class=\"lim0\"/>\n", ly - 3,
                ly - 3);
        text(f, 18, ly, "start", "legend", b);
    }
    fputs("</g>\n", f);
}

void kb_plot_svg(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n) {
    int xa = AX_BUDGET;
    for (int a = 0; a < AX_N; a++) if (n > 1 && varies(rows, n, a)) { xa = a; break; }
    char (*xl)[64] = calloc(MAXX, 64), (*sl)[160] = calloc(MAXS, 160);
    Panel *P = calloc(2, sizeof *P);
    if (!xl || !sl || !P) { free(xl); free(sl); free(P); return; }
    int nx = 0, ns = 0, dropped = 0;
    char memn[80] = "memory stream limit", diskn[80] = "disk limit";
    if (m->n_bw) snprintf(memn, sizeof memn, "memory stream limit (%.1f GB/s, %.2f GB/token)",
                          m->bw_gbps[0], m->touched / K3_GB);
    if (m->disk_mbps > 0) snprintf(diskn, sizeof diskn, "disk limit (%.0f MB/s)", m->disk_mbps);
    const int budget = xa == AX_BUDGET;
    P[0] = (Panel){ budget ? "seconds per token (decode)" : "decode tokens per second",
                    budget ? "s/token" : "tokens/s", { { 0 } }, { { 0 } }, { memn, diskn },
                    NAN, NULL };
    P[1] = (Panel){ budget ? "peak RSS" : "prefill tokens per second",
                    budget ? "peak RSS (GB)" : "prompt tokens/s", { { 0 } }, { { 0 } },
                    { memn, diskn }, NAN, NULL };
    for (int i = 0; i < 2; i++) {
        for (int s = 0; s < MAXS; s++) for (int x = 0; x < MAXX; x++) P[i].v[s][x] = NAN;
        for (int k = 0; k < 2; k++) for (int x = 0; x < MAXX; x++) P[i].lim[k][x] = NAN;
    }
    char mt[80];
    snprintf(mt, sizeof mt, "MemTotal %.1f GB", m->mem_total / K3_GB);
    if (budget && m->mem_total) { P[1].hline = m->mem_total / K3_GB; P[1].hline_name = mt; }
    const int sides = o->compare ? 2 : 1;
    for (int i = 0; i < n; i++) {
        char v[64], key[160] = "", b[64];
        ax_value(&rows[i].c, xa, v, sizeof v);
        int x = 0;
        while (x < nx && strcmp(xl[x], v)) x++;
        if (x == nx) { if (nx == MAXX) continue; snprintf(xl[nx++], 64, "%s", v); }
        for (int a = 0; a < AX_N; a++)          /* the series: the other axes that vary */
            if (a != xa && varies(rows, n, a)) {
                static const char *const NM[AX_N] = { "budget ", "threads ", "p ", "n ", "" };
                ax_value(&rows[i].c, a, b, sizeof b);
                size_t l = strlen(key);
                snprintf(key + l, sizeof key - l, "%s%s%s", l ? ", " : "", NM[a], b);
            }
        for (int side = 0; side < sides; side++) {
            char lab[160];
            snprintf(lab, sizeof lab, "%s%s%s", side ? "B " : sides > 1 ? "A " : "", key,
                     !*key && sides == 1 ? "k3" : "");
            int s = 0;
            while (s < ns && strcmp(sl[s], lab)) s++;
            if (s == ns) {
                if (ns == MAXS) { dropped++; continue; }
                snprintf(sl[ns++], 160, "%s", lab);
            }
            const Pt p = point(m, &rows[i], side ? &rows[i].b : &rows[i].a);
            P[0].v[s][x] = budget ? p.spt : p.tps;
            P[1].v[s][x] = budget ? p.rss / K3_GB : p.ptps;
            if (side) continue;
            double lm = budget ? p.mem_s : p.mem_s > 0 ? 1 / p.mem_s : NAN;
            double ld = budget ? p.disk_s : p.disk_s > 0 ? 1 / p.disk_s : NAN;
            if (isfinite(lm)) P[0].lim[0][x] = lm;
            if (isfinite(ld)) P[0].lim[1][x] = ld;
        }
    }
    const int h = 80 + PH + 58 + 15 * (ns + 2) + 6;      /* the legend's lines below */
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, h, W, h);
    fputs("<style>.ax{stroke:#222;stroke-width:1}.grid{stroke:#ddd;stroke-width:1}"
          ".title{font-size:14px;font-weight:bold}.tick{fill:#333;font-size:11px}"
          ".label{fill:#111}.legend{fill:#333;font-size:11px}"
          ".lim0{stroke:#888;stroke-width:1.5;stroke-dasharray:6 4;fill:none}"
          ".lim1{stroke:#888;stroke-width:1.5;stroke-dasharray:2 3;fill:none}"
          "polyline{stroke-width:2}</style>\n", f);
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n", f);
    char head[600];
    snprintf(head, sizeof head, "k3 bench %s: %s, %d cores, %d rep%s a row (medians)%s",
             K3_VERSION, o->model, m->cores, o->reps, o->reps == 1 ? "" : "s",
             dropped ? " (some series left out)" : "");
    text(f, W / 2.0, 22, "middle", "title", head);
    text(f, W / 2.0, 40, "middle", "legend", m->cpu);
    panel(f, &P[0], 80, 80, nx, xl, ns, sl, AX_TITLE[xa]);
    panel(f, &P[1], 80 + W / 2, 80, nx, xl, ns, sl, AX_TITLE[xa]);
    fputs("</svg>\n", f);
    free(xl); free(sl); free(P);
}

int kb_plot_check(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "--plot %.300s: cannot write it: %s (give a writable FILE.svg)",
                 path, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

int kb_plot_file(const KbOpts *o, const KbMachine *m, const KbRow *rows, int n) {
    FILE *f = fopen(o->plot, "w");
    if (!f) {
        fprintf(stderr, "k3 bench: --plot %s: %s\n", o->plot, strerror(errno));
        return -1;
    }
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    kb_plot_svg(f, o, m, rows, n);
    if (fclose(f)) {
        fprintf(stderr, "k3 bench: --plot %s: %s\n", o->plot, strerror(errno));
        return -1;
    }
    if (!o->quiet) fprintf(stderr, "k3 bench: wrote the figure to %s\n", o->plot);
    return 0;
}

void kb_plot_html(FILE *f, const KbOpts *o, const KbMachine *m, const KbRow *rows, int n,
                  const char *notes, const char *table) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<title>k3 bench</title><style>body{font-family:sans-serif;margin:1.5em}"
          ".notes{white-space:pre-wrap;font-size:13px}"
          "table{border-collapse:collapse;font-size:13px}"
          "th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}"
          "th{background:#f2f2f2}td.t{text-align:left}</style></head><body>\n"
          "<h1>k3 bench</h1>\n", f);
    kb_plot_svg(f, o, m, rows, n);
    fputs("<div class=\"notes\">", f);     /* the header's notes wrap; the table is a table */
    esc(f, notes);
    fputs("</div>\n", f);
    fputs(table, f);
    fputs("</body></html>\n", f);
}
