/* image_in.c — an image's bytes to its rows and prompt ids, and the glue that puts them into
 * a rendered conversation (include/image_in.h, K3_VISION.md §5). */
#include "image_in.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char PH[] = K3_IMAGE_PLACEHOLDER;
#define PHLEN (sizeof PH - 1)

void k3_image_ctx_close(K3ImageCtx *c) {
    if (c->v) k3_vision_close(c->v);
    c->v = NULL;
}

/* <|media_begin|>image WxH<|media_content|><|media_pad|><|media_end|> as the reference
 * encodes that one structural segment (specials on), the pad then written N times. */
static int prompt_ids(const Tok *t, K3ImageIn *im, char *err, size_t errlen) {
    const char *names[4] = { "<|media_begin|>", "<|media_content|>", "<|media_pad|>",
                             "<|media_end|>" };
    for (int i = 0; i < 4; i++)
        if (tok_special_id(t, names[i]) < 0) {
            snprintf(err, errlen, "the tokenizer has no %s token (K3's media tokens are needed "
                     "for images)", names[i]);
            return K3_ERR_USAGE;
        }
    const int pad = tok_special_id(t, "<|media_pad|>");
    char s[160];
    int len = snprintf(s, sizeof s, "<|media_begin|>image %dx%d<|media_content|><|media_pad|>"
                       "<|media_end|>", im->w, im->h);
    size_t n = 0;
    int32_t *e = tok_encode(t, s, (size_t)len, 1, &n);
    long N = im->plan.rows;
    int32_t *v = e ? malloc(sizeof *v * (n + (size_t)N)) : NULL;
    if (!v) { free(e); snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i] != pad) { v[k++] = e[i]; continue; }
        for (long r = 0; r < N; r++) v[k++] = pad;
    }
    free(e);
    im->ids = v;
    im->n_ids = (int)k;
    return 0;
}

static int open_tower(K3ImageCtx *c, char *err, size_t errlen) {
    char why[1024];
    int rc = k3_vision_open(&c->v, c->dir, c->quiet, why, sizeof why);
    if (rc) {
        snprintf(err, errlen, "images need the checkpoint's vision tower: %s", why);
        return rc;
    }
    const K3VisionConfig *vc = k3_vision_config(c->v);
    if (vc->out != c->hidden) {
        snprintf(err, errlen, "%s: the vision tower's rows are %d wide but the text model's "
                 "hidden_size is %d (text_hidden_size must match)", c->dir, vc->out, c->hidden);
        k3_image_ctx_close(c);
        return K3_ERR_USAGE;
    }
    return 0;
}

int k3_image_in(const uint8_t *b, size_t n, const char *name, const Tok *t, K3ImageIn *out,
                char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    K3Image im;
    if (k3_image_decode(b, n, name, &im, err, errlen)) return K3_ERR_RUNTIME;
    out->w = im.w; out->h = im.h;
    out->hash = k3_hash(K3_HASH_INIT, b, n);
    k3_image_plan(im.w, im.h, &out->plan);
    const K3ImagePlan *p = &out->plan;
    uint8_t *rgb = k3_image_rgb(&im, p->nw, p->nh);
    k3_image_free(&im);
    out->patches = rgb ? k3_image_patches(rgb, p) : NULL;
    free(rgb);
    if (!out->patches) {
        snprintf(err, errlen, "%s: out of memory for its %ld patches", name, p->patches);
        return K3_ERR_RUNTIME;
    }
    int rc = prompt_ids(t, out, err, errlen);
    if (rc) k3_image_in_free(out);
    return rc;
}

int k3_image_in_file(const char *path, const Tok *t, K3ImageIn *out, char *err,
                     size_t errlen) {
    size_t n;
    char *b = k3_slurp(path, K3_IMAGE_MAX_BYTES, &n, err, errlen);
    if (!b) { memset(out, 0, sizeof *out); return K3_ERR_RUNTIME; }
    int rc = k3_image_in((const uint8_t *)b, n, path, t, out, err, errlen);
    free(b);
    return rc;
}

int k3_image_rows(K3ImageCtx *c, K3ImageIn *im, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (im[i].rows) continue;
        int rc;
        if (!c->v && (rc = open_tower(c, err, errlen))) return rc;
        const K3ImagePlan *p = &im[i].plan;
        if (!(im[i].rows = malloc(sizeof(float) * (size_t)p->rows * c->hidden))) {
            snprintf(err, errlen, "out of memory for image %d's %ld rows", i + 1, p->rows);
            return K3_ERR_RUNTIME;
        }
        K3VisionGrid g = { p->gh, p->gw };
        char why[512];
        double t0 = k3_now();
        if ((rc = k3_vision_rows(c->v, im[i].patches, &g, 1, im[i].rows, why, sizeof why))) {
            snprintf(err, errlen, "image %d (%dx%d): the vision tower: %s", i + 1, im[i].w,
                     im[i].h, why);
            free(im[i].rows);
            im[i].rows = NULL;
            return rc;
        }
        free(im[i].patches);
        im[i].patches = NULL;
        if (!c->quiet)
            fprintf(stderr, "k3: image %d: %dx%d, grid %dx%d, %ld rows, tower %.2f s\n", i + 1,
                    im[i].w, im[i].h, p->gh, p->gw, p->rows, k3_now() - t0);
    }
    return 0;
}

int k3_image_placeholders(const char *text, size_t len) {
    int k = 0;
    for (const char *p = text, *e = text + len; p && (size_t)(e - p) >= PHLEN;) {
        p = memmem(p, (size_t)(e - p), PH, PHLEN);
        if (p) { k++; p += PHLEN; }
    }
    return k;
}

char *k3_image_content(const char *text, int n, char *err, size_t errlen) {
    size_t len = strlen(text);
    int k = k3_image_placeholders(text, len);
    if (k && k != n) {
        snprintf(err, errlen, "the text holds %d %s for %d image%s: give one per image (or "
                 "none: the images then come first)", k, PH, n, n == 1 ? "" : "s");
        return NULL;
    }
    char *s = malloc(len + (k ? 0 : (size_t)n * PHLEN) + 1);
    if (!s) { snprintf(err, errlen, "out of memory"); return NULL; }
    size_t o = 0;
    for (int i = 0; !k && i < n; i++, o += PHLEN) memcpy(s + o, PH, PHLEN);
    memcpy(s + o, text, len + 1);
    return s;
}

static int push(XtmlSegs *s, XtmlSeg g) {
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 16;
        XtmlSeg *v = realloc(s->v, sizeof *v * (size_t)nc);
        if (!v) return -1;
        s->v = v; s->cap = nc;
    }
    s->v[s->n++] = g;
    return 0;
}

int k3_image_segs(XtmlSegs *s, const K3ImageIn *im, int n, char *err, size_t errlen) {
    if (n == 0) return 0;
    XtmlSegs o = { NULL, 0, 0 };
    int used = 0, oom = 0;
    for (int i = 0; i < s->n && !oom; i++) {
        XtmlSeg g = s->v[i];
        s->v[i].text = NULL;                       /* moved into o (or freed here) */
        if (g.special != 0 || !g.text || used == n) { oom = push(&o, g); continue; }
        const char *p = g.text, *e = g.text + g.len;
        while (!oom) {
            const char *q = used < n ? memmem(p, (size_t)(e - p), PH, PHLEN) : NULL;
            size_t k = (size_t)((q ? q : e) - p);
            if (k) {
                XtmlSeg t = { malloc(k + 1), k, 0, NULL, 0 };
                if (!t.text) { oom = 1; break; }
                memcpy(t.text, p, k);
                t.text[k] = 0;
                if ((oom = push(&o, t))) { free(t.text); break; }
            }
            if (!q) break;
            XtmlSeg m = { NULL, 0, 2, im[used].ids, im[used].n_ids };
            oom = push(&o, m);
            used++;
            p = q + PHLEN;
        }
        free(g.text);
    }
    xtml_segs_free(s);
    *s = o;
    if (oom) { snprintf(err, errlen, "out of memory rendering the images"); return -1; }
    if (used != n) {
        snprintf(err, errlen, "the conversation has %d image place%s for %d image%s", used,
                 used == 1 ? "" : "s", n, n == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

int k3_image_spans(const int32_t *ids, size_t nids, const Tok *t, const K3ImageIn *im, int n,
                   K3EmbedSpan *spans, char *err, size_t errlen) {
    const int32_t content = tok_special_id(t, "<|media_content|>"),
                  pad = tok_special_id(t, "<|media_pad|>");
    size_t i = 0;
    for (int k = 0; k < n; k++) {
        while (i + 1 < nids && !(ids[i] == content && ids[i + 1] == pad)) i++;
        size_t p0 = i + 1, r = p0;
        while (r < nids && ids[r] == pad) r++;
        if (i + 1 >= nids || (long)(r - p0) != im[k].plan.rows) {
            snprintf(err, errlen, "image %d's %ld rows are not where the prompt was rendered",
                     k + 1, im[k].plan.rows);
            return -1;
        }
        spans[k].pos0 = (int)p0;
        spans[k].len = (int)(r - p0);
        spans[k].rows = im[k].rows;
        i = r;
    }
    return 0;
}

int k3_image_embed(K3ImageCtx *c, K3ImageIn *im, int n, K3EmbedSpan *spans, K3Embed *emb,
                   char *err, size_t errlen) {
    int rc = k3_image_rows(c, im, n, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < n; i++) spans[i].rows = im[i].rows;
    emb->span = spans;
    emb->n = n;
    return 0;
}

int k3_image_render(const Tok *t, const char *system, const char *text, size_t len,
                    const K3ImageIn *im, int n, int32_t **ids, size_t *nids, K3EmbedSpan *spans,
                    char *err, size_t errlen) {
    if (strlen(text) != len) {
        snprintf(err, errlen, "the prompt holds a NUL byte, which the chat template cannot "
                 "carry");
        return -1;
    }
    char *content = k3_image_content(text, n, err, errlen);
    if (!content) return -1;
    XtmlMsg m[2] = { { "system", system, NULL, NULL, 0, 0, 0 },
                     { "user", content, NULL, NULL, 0, 0, 0 } };
    XtmlOpts xo = { 0, NULL, 1, 0 };
    XtmlSegs sg = { NULL, 0, 0 };
    int rc = xtml_segments(m + !system, 1 + !!system, &xo, &sg, err, errlen) ||
             k3_image_segs(&sg, im, n, err, errlen);
    if (!rc && xtml_segs_encode(&sg, t, ids, nids)) {
        snprintf(err, errlen, "out of memory encoding the chat");
        rc = -1;
    }
    if (!rc && n && k3_image_spans(*ids, *nids, t, im, n, spans, err, errlen)) {
        free(*ids);
        rc = -1;
    }
    xtml_segs_free(&sg);
    free(content);
    return rc ? -1 : 0;
}

uint64_t k3_image_hash(uint64_t h, const K3ImageIn *im, int n) {
    for (int i = 0; i < n; i++) h = k3_hash(h, &im[i].hash, sizeof im[i].hash);
    return h;
}

int k3_image_admit(const K3ImageIn *im, int n, const char *const *names, long admit,
                   int together, char *err, size_t errlen) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        char nm[48];
        snprintf(nm, sizeof nm, "image %d", i + 1);
        if (k3_vision_admit(names ? names[i] : nm, im[i].w, im[i].h, im[i].plan.patches, admit,
                            err, errlen))
            return K3_ERR_USAGE;
        sum += im[i].plan.patches;
    }
    if (!together || admit < 0 || sum <= admit) return 0;
    snprintf(err, errlen, "its %d images have %ld patches together in the vision tower, but "
             "the memory plan admits at most %ld patches of images per request beside the "
             "model (each sequence's images are held at once): send fewer or smaller images, "
             "or give k3 more memory (fewer sequences at once, a smaller --ctx, --cache-gb or "
             "--trunk-gb leave more room)", n, sum, admit);
    return K3_ERR_USAGE;
}
