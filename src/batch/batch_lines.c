/* batch_lines.c — the --batch file's lines made prompts: each line's ids (tokenized, an
 * "images" line through the chat template with its images read), every line checked
 * against the model before anything runs, and FILE "-" or a pipe read as lines arrive
 * (a bad line answered and skipped). Apart from batch.c, which runs the sequences. */
#include "batch_priv.h"
#include "config.h"
#include "json.h"
#include "util.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An "images" line: the chat template (thinking off, as k3 --image) around its prompt and
 * images; the images read and preprocessed (their rows when the line starts). */
static int image_ids(Batch *b, BatchLine *l, int32_t **ids, size_t *n, char *err,
                     size_t errlen) {
    char why[1024];
    if (!(l->img = calloc((size_t)l->n_images, sizeof *l->img)) ||
        !(l->span = calloc((size_t)l->n_images, sizeof *l->span))) {
        snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME;
    }
    for (int k = 0; k < l->n_images; k++) {
        int rc = k3_image_in_file(l->images[k], b->tok, &l->img[k], why, sizeof why);
        if (rc) {
            snprintf(err, errlen, "--batch %s: line %d: images: %s", b->o->file, l->line, why);
            return rc == K3_ERR_RUNTIME ? K3_ERR_USAGE : rc;   /* a bad line, not a crash */
        }
    }
    if (k3_image_render(b->tok, NULL, l->prompt, l->prompt_len, l->img, l->n_images, ids, n,
                        l->span, why, sizeof why))
        return snprintf(err, errlen, "--batch %s: line %d: %s", b->o->file, l->line, why),
               K3_ERR_USAGE;
    return 0;
}

int batch_ids_of(Batch *b, int i, char *err, size_t errlen) {
    const BatchLine *l = &b->lines[i];
    if (l->ids) {
        b->prompts[i] = malloc(sizeof(int) * (size_t)l->n_ids);
        if (!b->prompts[i]) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
        memcpy(b->prompts[i], l->ids, sizeof(int) * (size_t)l->n_ids);
        b->n_prompts[i] = l->n_ids;
        return 0;
    }
    if (!b->tok) {
        snprintf(err, errlen, "--batch %s: line %d: \"prompt\" needs a tokenizer: pass --tok DIR "
                 "or set K3_TOK_FILES (or give \"ids\")", b->o->file, l->line);
        return K3_ERR_USAGE;
    }
    size_t n = 0;
    int32_t *t = NULL;
    if (l->n_images) {
        int rc = image_ids(b, &b->lines[i], &t, &n, err, errlen);
        if (rc) return rc;
    } else t = tok_encode(b->tok, l->prompt, l->prompt_len, 0, &n);
    if (!t) { snprintf(err, errlen, "out of memory tokenizing line %d", l->line); return 1; }
    b->prompts[i] = malloc(sizeof(int) * (n ? n : 1));
    if (!b->prompts[i]) { free(t); snprintf(err, errlen, "out of memory"); return 1; }
    for (size_t k = 0; k < n; k++) b->prompts[i][k] = t[k];
    b->n_prompts[i] = (int)n;
    free(t);
    if (!n) {
        snprintf(err, errlen, "--batch %s: line %d: \"prompt\" has no tokens", b->o->file,
                 l->line);
        return K3_ERR_USAGE;
    }
    return 0;
}

/* Line i checked against the model of vocabulary V: its prompt ids, the context, its
 * logit_bias ids, JSON mode's tokenizer. 0, or 2 with the reason (naming the line) in err. */
int batch_prompt_check(Batch *b, int i, int V, char *err, size_t errlen) {
    int rc = 0;
    const int n = b->n_prompts[i];
    char what[1024];
    snprintf(what, sizeof what, "--batch %.900s: line %d: logit_bias", b->o->file,
             b->lines[i].line);
    for (int k = 0; !rc && k < n; k++)
        if (b->prompts[i][k] >= V) {
            snprintf(err, errlen, "--batch %s: line %d: \"ids\" item %d (%d) is outside the "
                     "vocabulary (vocab_size %d)", b->o->file, b->lines[i].line, k,
                     b->prompts[i][k], V);
            rc = K3_ERR_USAGE;
        }
    if (!rc && b->ctx && n + line_gen(b, i) > b->ctx) {
        snprintf(err, errlen, "--batch %s: line %d: prompt (%d) + gen (%d) is past the context "
                 "%d: pass a larger --ctx", b->o->file, b->lines[i].line, n, line_gen(b, i),
                 b->ctx);
        rc = K3_ERR_USAGE;
    }
    if (!rc && sampler_check_vocab(&b->lines[i].sp, V, what, err, errlen)) rc = K3_ERR_USAGE;
    if (!rc && (b->lines[i].jg || b->lines[i].gr) && !b->tok) {
        snprintf(err, errlen, "--batch %s: line %d: response_format and grammar need a tokenizer "
                 "(the tokens' bytes): pass --tok DIR", b->o->file, b->lines[i].line);
        rc = K3_ERR_USAGE;
    }
    return rc;
}

/* Line i's images within what the memory plan admits (a streamed batch: the line's images
 * together, each sequence's held at once). 0, or 2 with err naming the line. */
int batch_admit_images(Batch *b, int i, char *err, size_t errlen) {
    const BatchLine *l = &b->lines[i];
    char why[1024];
    if (!l->n_images || !l->img ||
        !k3_image_admit(l->img, l->n_images, (const char *const *)l->images,
                        k3_mem_vision_patches(b->e.mem), b->in != NULL, why, sizeof why))
        return 0;
    snprintf(err, errlen, "--batch %s: line %d: images: %s", b->o->file, l->line, why);
    return K3_ERR_USAGE;
}

void batch_bad_line(void *ctx, const char *msg) {
    Bad *bd = ctx;
    if (bd->n++ >= BAD_SHOWN) return;
    const int bare = !strncmp(msg, "line ", 5);     /* the parser's: the file named too */
    fprintf(stderr, "k3: %s%s%s%s\n", bare ? "--batch " : "", bare ? bd->file : "",
            bare ? ": " : "", msg);
}

/* Every line against the model's vocabulary (config.json, read before the engine opens);
 * a config that does not load is left to the engine's open to name. */
void batch_check_lines(Batch *b, Bad *bad) {
    K3Config *c = malloc(sizeof *c);
    char path[4200], err[1200];
    snprintf(path, sizeof path, "%s/config.json", b->o->model_dir);
    if (c && !k3_config_load(b->o->ef.config ? b->o->ef.config : path, c, err, sizeof err))
        for (int i = 0; i < b->n_lines; i++)
            if (b->prompts[i] && batch_prompt_check(b, i, c->vocab_size, err, sizeof err))
                batch_bad_line(bad, err);
    free(c);
}

/* One arrived line (text[0..n), line number ln): queued, or answered with an error line. */
static int stream_line(Batch *b, const char *text, size_t n, int ln, char *err, size_t errlen) {
    const BOpts *o = b->o;
    char why[1024];
    if (b->n_lines == b->cap_lines) {
        const int cap = b->cap_lines ? 2 * b->cap_lines : 16;
        BatchLine *l = realloc(b->lines, sizeof *l * (size_t)cap);
        if (l) b->lines = l;
        int **pp = realloc(b->prompts, sizeof *pp * (size_t)cap);
        if (pp) b->prompts = pp;
        int *np = realloc(b->n_prompts, sizeof *np * (size_t)cap);
        if (np) b->n_prompts = np;
        if (!l || !pp || !np) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
        b->cap_lines = cap;
    }
    const int i = b->n_lines;
    b->prompts[i] = NULL; b->n_prompts[i] = 0;
    int rc = batch_parse_line(text, n, ln, &o->ef.sp, o->ef.seed, o->ef.sampling,
                              &b->lines[i], why, sizeof why);
    if (!rc) {
        b->n_lines++;
        rc = batch_ids_of(b, i, why, sizeof why);
        if (!rc && !(rc = batch_prompt_check(b, i, b->e.m.cfg.vocab_size, why, sizeof why)) &&
            !(rc = batch_admit_images(b, i, why, sizeof why)))
            return 0;
        b->n_lines--;
        free(b->prompts[i]); b->prompts[i] = NULL;
        batch_line_free(&b->lines[i]);
    }
    if (rc != K3_ERR_USAGE) { snprintf(err, errlen, "%s", why); return rc; }
    char *q = json_quote(why, strlen(why));
    printf("{\"line\": %d, \"error\": %s}\n", ln, q ? q : "null");
    fflush(stdout);
    free(q);
    fprintf(stderr, "k3: %s (the line is skipped)\n", why);
    b->in->bad++;
    return 0;
}

/* Takes what has arrived on the stream (waiting for it when wait), line by line. */
int batch_stream_read(Batch *b, int wait, char *err, size_t errlen) {
    Stream *in = b->in;
    struct pollfd pf = { in->fd, POLLIN, 0 };
    if (poll(&pf, 1, wait ? -1 : 0) <= 0) return 0;
    if (in->cap - in->n < 65536) {
        char *nb = realloc(in->buf, in->cap + 65536 + 1);
        if (!nb) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
        in->buf = nb; in->cap += 65536;
    }
    ssize_t r = read(in->fd, in->buf + in->n, in->cap - in->n);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    if (r < 0) {
        snprintf(err, errlen, "--batch %s: %s", b->o->file, strerror(errno));
        return K3_ERR_RUNTIME;
    }
    if (r == 0) in->eof = 1;
    in->n += (size_t)r;
    size_t p = 0, len;
    int blank;
    for (const char *t; (t = batch_next_line(in->buf, in->n, &p, in->eof, &len, &blank));) {
        in->line++;
        const int rc = blank ? 0 : stream_line(b, t, len, in->line, err, errlen);
        if (rc) return rc;
    }
    memmove(in->buf, in->buf + p, in->n - p);
    in->n -= p;
    if (in->n > ((size_t)16 << 20)) {
        snprintf(err, errlen, "--batch %s: line %d is over 16 MiB", b->o->file, in->line + 1);
        return K3_ERR_USAGE;
    }
    return 0;
}
