/* test_dspark.c — the DSpark draft (dspark.h) against tools/dspark_ref.py's float64
 * expectations on tiny5 with drafts A, B (mscale_all_dim 0.5) and C (Markov x10):
 *   (a) the target's taps through K3Engine.tap vs taps.f32, and the target's logits with
 *       the tap installed have the bits of those without;
 *   (b) fed taps.f32: ctx, lat, kpe, h_in, h_l0, h_l1, hf, base, logits, conf within 1e-5
 *       max relative error — max |c - ref| / max |ref| over the whole array — and the
 *       7 drafts exactly; the drafts from the C target's own taps too;
 *   (c) the same bits at 1 and 2 threads and on the scalar kernels, and after a rollback
 *       (truncate, re-ingest);
 *   (d) refusals naming the problem: fc_norm true, aux_hidden_stream, a target_layer_ids
 *       out of order, a vocab that is not the target's, a missing tensor, a wrong shape;
 *       and the RoPE tables: the golden YaRN numbers of A and B, "default" plain. */
#include "engine_fixture.h"
#include "dspark.h"
#include "draft/dspark_priv.h"
#include <math.h>
#include "util.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOL 1e-5
static int verbose;
#define TAP_TOL 1e-4   /* the fp32 target over 13 layers (test_model: 1e-4 a position) */
enum { N = 7, H = 256, V = 1024, NL = 2, KL = 32, DR = 8 };

static float *read_f32(const char *dir, const char *name, size_t *n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    size_t len = 0;
    char *b = k3_read_file(p, &len);
    CHECK(b != NULL, "cannot read %s", p);
    if (!b) { *n = 0; return NULL; }
    *n = len / sizeof(float);
    float *f = malloc(len + sizeof(float));
    memcpy(f, b, len);
    free(b);
    return f;
}

static int read_ids(const char *dir, const char *name, int *ids, int max) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    size_t len = 0;
    char *b = k3_read_file(p, &len);
    CHECK(b != NULL, "cannot read %s", p);
    int n = 0;
    for (char *s = b; b && *s && n < max;) {
        while (*s == ',' || *s == ' ' || *s == '\n') s++;
        if (!*s) break;
        ids[n++] = (int)strtol(s, &s, 10);
    }
    free(b);
    return n;
}

/* max |c - ref| / max |ref| over the array */
static double maxrel(const float *c, const float *ref, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = c[i] - (double)ref[i];
        if (e < 0) e = -e;
        if (e > d || e != e) d = e;
        double a = ref[i] < 0 ? -ref[i] : ref[i];
        if (a > m) m = a;
    }
    return m > 0 ? d / m : d;
}

static void cmp(const char *cs, const char *what, const float *c, const char *dir,
                const char *file, size_t n, double tol) {
    size_t nr = 0;
    float *ref = read_f32(dir, file, &nr);
    CHECK(nr == n, "%s: %s has %zu floats, expected %zu", cs, file, nr, n);
    if (ref && nr == n) {
        double r = maxrel(c, ref, n);
        CHECK(r <= tol, "%s: %s max relative error %.3g > %.0e", cs, what, r, tol);
        if (verbose || r > tol / 10) printf("%s: %s max rel %.3g\n", cs, what, r);
    }
    free(ref);
}

/* Everything one block computes (for the bit comparisons). */
typedef struct {
    float lat[NL][256 * KL], kpe[NL][256 * DR];
    float h_in[N * H], h_l[NL * N * H], hf[N * H], base[N * V], logits[N * V], conf[N];
    int drafts[N];
} Out;

static int run_block(K3DSpark *d, const float *taps, int P, int anchor, Out *o, int split) {
    char err[512];
    memset(o, 0, sizeof *o);
    k3_dspark_truncate(d, 0);
    const int W = k3_dspark_tap_width(d);
    int rc = 0;
    if (split && P > 1) {                     /* in two pieces, then a rollback of the last */
        const int a = P / 2, b = P - a;
        rc |= k3_dspark_ingest(d, taps, a, err, sizeof err);
        rc |= k3_dspark_ingest(d, taps + (size_t)a * W, b, err, sizeof err);
        k3_dspark_truncate(d, a);
        rc |= k3_dspark_ingest(d, taps + (size_t)a * W, b, err, sizeof err);
    } else
        rc |= k3_dspark_ingest(d, taps, P, err, sizeof err);
    CHECK(rc == 0 && k3_dspark_pos(d) == P, "ingest: %s", err);
    for (int l = 0; l < NL; l++) {
        memcpy(o->lat[l], k3_dspark_lat(d, l), sizeof(float) * P * KL);
        memcpy(o->kpe[l], k3_dspark_kpe(d, l), sizeof(float) * P * DR);
    }
    K3DSparkTrace tr = { o->h_in, o->h_l, o->hf, o->base };
    rc = k3_dspark_draft_trace(d, anchor, N, o->drafts, o->conf, o->logits, &tr, err, sizeof err);
    CHECK(rc == 0, "draft: %s", err);
    return rc;
}

static void test_case(K3Engine *e, K3DSpark *d, const char *cdir) {
    char err[512];
    const char *cs = strrchr(cdir, '/') + 1;
    int prompt[256], anchor = 0, want[N];
    const int P = read_ids(cdir, "prompt.txt", prompt, 256);
    read_ids(cdir, "anchor.txt", &anchor, 1);
    read_ids(cdir, "drafts.txt", want, N);
    const int W = k3_dspark_tap_width(d);
    size_t nt = 0;
    float *taps = read_f32(cdir, "taps.f32", &nt);
    CHECK(nt == (size_t)P * W, "%s: taps.f32 holds %zu floats for P %d", cs, nt, P);
    if (nt != (size_t)P * W) { free(taps); return; }
    /* (a) the target's own taps, the forward in chunks of 64; its bits without the tap */
    float *own = malloc(sizeof(float) * ((size_t)P * W + 1));
    float *lg = malloc(sizeof(float) * V), *lg0 = malloc(sizeof(float) * V);
    if (P > 0) {
        K3State *s = k3_state_new(&e->m), *s0 = k3_state_new(&e->m);
        e->tap = k3_dspark_tap(d);
        for (int t = 0; t < P; t += 64) {
            const int T = P - t < 64 ? P - t : 64;
            int rows = 0, rc = k3_forward(e, s, prompt + t, T, lg, 0, err, sizeof err);
            const float *tr = k3_dspark_tap_rows(d, &rows);
            CHECK(rc == 0 && rows == T, "%s: forward: %s (%d tap rows)", cs, err, rows);
            memcpy(own + (size_t)t * W, tr, sizeof(float) * T * W);
        }
        e->tap = NULL;
        k3_prefill(e, s0, prompt, P, 64, lg0, 0, err, sizeof err);
        CHECK(!memcmp(lg, lg0, sizeof(float) * V), "%s: the tap changed the logits' bits", cs);
        CHECK(k3_argmax(lg, V) == anchor, "%s: the target's argmax %d, anchor.txt %d", cs,
              k3_argmax(lg, V), anchor);
        cmp(cs, "target taps", own, cdir, "taps.f32", (size_t)P * W, TAP_TOL);
        k3_state_free(&e->m, s); k3_state_free(&e->m, s0);
    }
    /* (b) fed taps.f32, stage by stage */
    static Out o, o2;
    float *ctx = malloc(sizeof(float) * ((size_t)P * H + 1));
    k3_dspark_truncate(d, 0);
    CHECK(k3_dspark_ingest_ctx(d, taps, P, ctx, err, sizeof err) == 0, "%s: ingest: %s", cs,
          err);
    if (P > 0) cmp(cs, "ctx", ctx, cdir, "ctx.f32", (size_t)P * H, TOL);
    free(ctx);
    run_block(d, taps, P, anchor, &o, 0);
    {                                          /* non-causal: row 0 sees the rows after it */
        int d2[2];
        float hf2[2 * H];
        K3DSparkTrace t2 = { NULL, NULL, hf2, NULL };
        k3_dspark_draft_trace(d, anchor, 2, d2, NULL, NULL, &t2, err, sizeof err);
        CHECK(memcmp(hf2, o.hf, sizeof(float) * H) != 0, "%s: row 0 of 2 rows == of 7", cs);
    }
    {                  /* the gate: below it c_0 alone (its bits), no drafts; at it, all */
        int dg[N];
        float cg[N];
        k3_dspark_set_gate(d, o.conf[0] * 1.001f);
        k3_dspark_draft(d, anchor, N, dg, cg, NULL, err, sizeof err);
        CHECK(dg[0] == -1 && cg[0] == o.conf[0], "%s: gated: draft %d, c_0 %g (want %g)", cs,
              dg[0], cg[0], o.conf[0]);
        k3_dspark_set_gate(d, o.conf[0]);
        k3_dspark_draft(d, anchor, N, dg, cg, NULL, err, sizeof err);
        k3_dspark_set_gate(d, 0);
        CHECK(!memcmp(dg, o.drafts, sizeof dg) && !memcmp(cg, o.conf, sizeof cg),
              "%s: c_0 at the gate: other drafts", cs);
    }
    float *lat = malloc(sizeof(float) * (NL * (size_t)P * KL + 1));
    float *kpe = malloc(sizeof(float) * (NL * (size_t)P * DR + 1));
    for (int l = 0; l < NL; l++) {
        memcpy(lat + (size_t)l * P * KL, o.lat[l], sizeof(float) * P * KL);
        memcpy(kpe + (size_t)l * P * DR, o.kpe[l], sizeof(float) * P * DR);
    }
    if (P > 0) {
        cmp(cs, "lat", lat, cdir, "lat.f32", (size_t)NL * P * KL, TOL);
        cmp(cs, "kpe", kpe, cdir, "kpe.f32", (size_t)NL * P * DR, TOL);
    }
    cmp(cs, "h_in", o.h_in, cdir, "h_in.f32", N * H, TOL);
    cmp(cs, "h_l0", o.h_l, cdir, "h_l0.f32", N * H, TOL);
    cmp(cs, "h_l1", o.h_l + N * H, cdir, "h_l1.f32", N * H, TOL);
    cmp(cs, "hf", o.hf, cdir, "hf.f32", N * H, TOL);
    cmp(cs, "base", o.base, cdir, "base.f32", N * V, TOL);
    cmp(cs, "logits", o.logits, cdir, "logits.f32", N * V, TOL);
    cmp(cs, "conf", o.conf, cdir, "conf.f32", N, TOL);
    CHECK(!memcmp(o.drafts, want, sizeof want), "%s: drafts %d,%d,%d,%d,%d,%d,%d, want "
          "%d,%d,%d,%d,%d,%d,%d", cs, o.drafts[0], o.drafts[1], o.drafts[2], o.drafts[3],
          o.drafts[4], o.drafts[5], o.drafts[6], want[0], want[1], want[2], want[3], want[4],
          want[5], want[6]);
    if (P > 0) {                              /* from the C target's own taps */
        run_block(d, own, P, anchor, &o2, 0);
        CHECK(!memcmp(o2.drafts, want, sizeof want), "%s: drafts from the C taps differ", cs);
    }
    /* (c) the same bits: 1 thread, in pieces with a rollback, the scalar kernels */
    k3_threads_set(1);
    run_block(d, taps, P, anchor, &o2, 1);
    CHECK(!memcmp(&o, &o2, sizeof o), "%s: 1 thread with a rollback: other bits", cs);
    k3_threads_set(2);
    char kerr[128];
    const char *kname = k3_kernels_name();
    if (strcmp(kname, "scalar") && !k3_kernels_select("scalar", kerr, sizeof kerr)) {
        run_block(d, taps, P, anchor, &o2, 0);
        CHECK(!memcmp(&o, &o2, sizeof o), "%s: scalar kernels vs %s: other bits", cs, kname);
        k3_kernels_select(kname, kerr, sizeof kerr);
    }
    free(taps); free(own); free(lg); free(lg0); free(lat); free(kpe);
}

/* ---- (d) refusals: broken copies of draft A in a temp dir ---- */

static char tmp[] = "/tmp/k3_dspark_XXXXXX";

static void put(const char *name, const char *data, size_t n) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n, "cannot write %s", p);
    if (f) fclose(f);
}

/* config.json with `from` replaced by `to` (once), the weights as they are */
static char *cfg_text, *st_bytes;
static size_t cfg_len, st_len;

/* Draft A's files into tmp: config.json with `from` replaced by `to` (once; NULL: as it
 * is), the safetensors header with st_from replaced by st_to (the same length). */
static void write_edit(const char *what, const char *from, const char *to,
                       const char *st_from, const char *st_to) {
    char cfg[4096];
    const char *at = from ? strstr(cfg_text, from) : NULL;
    CHECK(!from || at, "%s: '%s' not in config.json", what, from);
    size_t o = 0;
    if (at) {
        o = snprintf(cfg, sizeof cfg, "%.*s%s%s", (int)(at - cfg_text), cfg_text, to,
                     at + strlen(from));
    } else o = snprintf(cfg, sizeof cfg, "%s", cfg_text);
    put("config.json", cfg, o);
    char *st = malloc(st_len);
    memcpy(st, st_bytes, st_len);
    if (st_from) {                            /* edit the header in place, same length */
        uint64_t hl; memcpy(&hl, st, 8);
        char *h = st + 8, *hit = NULL;
        for (char *s = h; s + strlen(st_from) <= h + hl && !hit; s++)
            if (!memcmp(s, st_from, strlen(st_from))) hit = s;
        CHECK(hit && strlen(st_from) == strlen(st_to), "%s: header edit", what);
        if (hit) memcpy(hit, st_to, strlen(st_to));
    }
    put("model.safetensors", st, st_len);
    free(st);
}

static void refuse(K3Engine *e, const char *what, const char *from, const char *to,
                   const char *st_from, const char *st_to, const char *named) {
    char err[2048];
    write_edit(what, from, to, st_from, st_to);
    K3DSpark *d = NULL;
    const int rc = k3_dspark_open(&d, tmp, e, 1, err, sizeof err);
    CHECK(rc == 2 && !d, "%s: open gave %d, want 2", what, rc);
    CHECK(strstr(err, named) != NULL, "%s: the message does not name '%s': %s", what, named,
          err);
    printf("refused (%s): %s\n", what, err);
    k3_dspark_close(d);
}

/* The header's entry for name, its shape swapped "[a, b]" -> "[b, a]" (the same bytes). */
static void wrong_shape(K3Engine *e, const char *name) {
    uint64_t hl; memcpy(&hl, st_bytes, 8);
    char *h = malloc(hl + 1);
    memcpy(h, st_bytes + 8, hl); h[hl] = 0;
    char *at = strstr(h, name), *sh = at ? strstr(at, "\"shape\"") : NULL;
    char *lb = sh ? strchr(sh, '[') : NULL, *rb = lb ? strchr(lb, ']') : NULL;
    CHECK(rb != NULL, "no shape for %s", name);
    if (rb) {
        char from[128], to[128], a[32], b[32];
        snprintf(from, sizeof from, "%.*s", (int)(rb - lb + 1), lb);
        const char *comma = strchr(from, ',');
        snprintf(a, sizeof a, "%.*s", (int)(comma - from - 1), from + 1);
        snprintf(b, sizeof b, "%.*s", (int)(strlen(comma + 1) - 1), comma + 1);
        const char *bs = b;
        while (*bs == ' ') bs++;
        snprintf(to, sizeof to, "[%s,%.*s%s]", bs, (int)(bs - b), "      ", a);
        refuse(e, "wrong shape", NULL, NULL, from, to, name);
    }
    free(h);
}

static int near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b); }

/* The RoPE tables against K3_DSPARK §8.1's golden numbers, and rope_type "default" or
 * apply_yarn_scaling false: plain theta^(-2i/D), the scale (nope+rope)^-1/2, magnitude 1. */
static void rope_golden(K3Engine *e, const char *what, const char *from, const char *to,
                        const double f[4], double scale, double mag) {
    char err[2048];
    K3DSpark *d = NULL;
    if (from) write_edit(what, from, to, NULL, NULL);
    const int rc = k3_dspark_open(&d, from ? tmp : "tests/models/tiny5_dspark_b", e, 1, err,
                                  sizeof err);
    CHECK(rc == 0, "%s: %s", what, err);
    if (rc) return;
    CHECK(near(d->inv_freq[0], f[0]) && near(d->inv_freq[1], f[1]) &&
          near(d->inv_freq[2], f[2]) && near(d->inv_freq[3], f[3]),
          "%s: inv_freq %.10g %.10g %.10g %.10g", what, d->inv_freq[0], d->inv_freq[1],
          d->inv_freq[2], d->inv_freq[3]);
    CHECK(near(d->scale, scale) && near(d->mag, mag), "%s: scale %.10g mag %.10g", what,
          d->scale, d->mag);
    CHECK(d->c.yarn == (mag != 1 || scale != 0.2041241452), "%s: yarn %d", what, d->c.yarn);
    k3_dspark_close(d);
}

static void test_refusals(K3Engine *e) {
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    cfg_text = k3_read_file("tests/models/tiny5_dspark/config.json", &cfg_len);
    st_bytes = k3_read_file("tests/models/tiny5_dspark/model.safetensors", &st_len);
    if (!cfg_text || !st_bytes) { CHECK(0, "cannot read draft A"); return; }
    const double yarn[4] = { 1.0, 0.2371708245, 0.05, 0.0079056942 };
    const double plain[4] = { 1.0, 0.316227766, 0.1, 0.0316227766 };
    rope_golden(e, "yarn A", "\"rope_type\": \"yarn\"", "\"rope_type\": \"yarn\"", yarn,
                0.2646422580, 1.0);
    rope_golden(e, "yarn B", NULL, NULL, yarn, 0.2334024810, 1.0648216254);
    rope_golden(e, "default", "\"rope_type\": \"yarn\"", "\"rope_type\": \"default\"",
                plain, 0.2041241452, 1.0);
    rope_golden(e, "apply_yarn_scaling", "\"rope_type\": \"yarn\"",
                "\"rope_type\": \"yarn\", \"apply_yarn_scaling\": false", plain,
                0.2041241452, 1.0);
    refuse(e, "fc_norm", "\"bos_token_id\"", "\"fc_norm\": true,\n  \"bos_token_id\"", NULL,
           NULL, "fc_norm");
    refuse(e, "aux stream", "\"bos_token_id\"",
           "\"aux_hidden_stream\": \"attn_res\",\n  \"bos_token_id\"", NULL, NULL,
           "aux_hidden_stream");
    refuse(e, "nope", "\"mla_use_nope\": false", "\"mla_use_nope\": true", NULL, NULL,
           "mla_use_nope");
    refuse(e, "markov head", "\"vanilla\"", "\"gated\"", NULL, NULL, "markov_head_type");
    refuse(e, "draft vocab", "\"draft_vocab_size\": 1024", "\"draft_vocab_size\": 512", NULL,
           NULL, "draft_vocab_size");
    refuse(e, "tap order", "0,\n    2,\n    7", "2,\n    0,\n    7", NULL, NULL,
           "target_layer_ids");
    refuse(e, "tap range", "0,\n    2,\n    7", "0,\n    2,\n   13", NULL, NULL,
           "target_layer_ids");
    refuse(e, "target layers", "\"target_num_hidden_layers\": 13",
           "\"target_num_hidden_layers\": 12", NULL, NULL, "target_num_hidden_layers");
    refuse(e, "vocab", "\"vocab_size\": 1024", "\"vocab_size\": 2048", NULL, NULL,
           "vocab_size");
    refuse(e, "hidden", "\"hidden_size\": 256", "\"hidden_size\": 512", NULL, NULL,
           "hidden_size");
    refuse(e, "missing tensor", NULL, NULL, "layers.1.mlp.up_proj.weight",
           "layers.1.mlp.up_proj.weighT", "layers.1.mlp.up_proj.weight");
    wrong_shape(e, "layers.0.mlp.gate_proj.weight");
    char p[256];
    snprintf(p, sizeof p, "%s/config.json", tmp); unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", tmp); unlink(p);
    rmdir(tmp);
    free(cfg_text); free(st_bytes);
}

int main(void) {
    verbose = getenv("K3_TEST_VERBOSE") != NULL;
    static const struct { const char *draft, *cases[5]; } variants[] = {
        { "tests/models/tiny5_dspark", { "a12", "a0", "a1", "a37", "a200" } },
        { "tests/models/tiny5_dspark_b", { "b37" } },
        { "tests/models/tiny5_dspark_c", { "c12" } },
    };
    (void)rand_int;
    k3_threads_set(2);
    K3Engine e;
    if (fixture_open(&e, "tests/models/tiny5", 64, 256)) return 1;
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        char err[2048], cdir[512];
        K3DSpark *d = NULL;
        const int rc = k3_dspark_open(&d, variants[v].draft, &e, v > 0, err, sizeof err);
        CHECK(rc == 0, "%s: open: %s", variants[v].draft, err);
        if (rc) continue;
        CHECK(k3_dspark_bytes(d, 256) > 0, "bytes");
        for (int i = 0; i < 5 && variants[v].cases[i]; i++) {
            snprintf(cdir, sizeof cdir, "%s/ref/%s", variants[v].draft, variants[v].cases[i]);
            test_case(&e, d, cdir);
        }
        k3_dspark_close(d);
    }
    printf("the same bits at 1 and 2 threads, after a rollback, and on scalar vs %s kernels\n",
           k3_kernels_name());
    test_refusals(&e);
    k3_engine_close(&e);
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    printf("test_dspark: ok\n");
    return 0;
}
