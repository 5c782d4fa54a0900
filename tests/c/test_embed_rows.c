/* test_embed_rows.c — rows given for positions (K3Embed, k3.h: how an image's rows enter
 * the prefill, K3_VISION.md §5.3) on tests/models/tiny5. The check that cannot be fooled by
 * the code under test: when the given rows are the embedding rows of known ids (read from
 * the checkpoint here), a prompt whose ids at those positions are anything else must give
 * the bits of the prompt with the known ids, at every chunk size (the span crossing chunks)
 * and in a batch step beside another sequence; a span outside the step changes nothing;
 * and rows that differ change the logits. */
#include "engine.h"
#include "kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL: " __VA_ARGS__); printf("\n"); fails++; } \
                           } while (0)

static void row_of(const K3Model *m, int id, float *out) {
    const K3Mat *E = &m->embed;
    for (int d = 0; d < E->cols; d++)
        out[d] = E->type == K3_W_F32 ? ((const float *)E->w)[(size_t)id * E->cols + d]
                                     : k3_bf16_to_f32(((const uint16_t *)E->w)[(size_t)id *
                                                                                E->cols + d]);
}

/* logits of the last position after a prefill of ids in chunks of `chunk` */
static void run(K3Engine *e, const int *ids, int n, int chunk, const K3Embed *emb, float *out) {
    char err[512];
    K3State *s = k3_state_new(&e->m);
    s->embed = emb;
    int rc = k3_prefill(e, s, ids, n, chunk, out, 0, err, sizeof err);
    CHECK(!rc, "prefill: %s", err);
    k3_state_free(&e->m, s);
}

int main(void) {
    char err[4096];
    K3Engine e;
    k3_threads_set(2);
    if (k3_engine_open_resident(&e, "tests/models/tiny5", 32, 64, err, sizeof err)) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    const int H = e.m.cfg.hidden_size, V = e.m.cfg.vocab_size, n = 20;
    int want[20], pads[20];
    for (int i = 0; i < n; i++) want[i] = pads[i] = (i * 37 + 11) % 700;
    for (int i = 5; i < 16; i++) pads[i] = 789;            /* 11 positions given as rows */
    float *rows = malloc(sizeof(float) * 11 * H), *a = malloc(sizeof(float) * V),
          *b = malloc(sizeof(float) * V);
    for (int i = 0; i < 11; i++) row_of(&e.m, want[5 + i], rows + (size_t)i * H);
    K3EmbedSpan sp[2] = { { 5, 6, rows }, { 11, 5, rows + (size_t)6 * H } };   /* two spans */
    K3Embed emb = { sp, 2 };

    run(&e, want, n, 0, NULL, a);
    int chunks[4] = { 0, 1, 4, 7 }, same = 1;
    for (int c = 0; c < 4; c++) {
        run(&e, pads, n, chunks[c], &emb, b);
        same &= !memcmp(a, b, sizeof(float) * V);
    }
    CHECK(same, "given rows = the known ids' rows: the logits differ from the ids' prefill");
    printf("%s the given rows give the known ids' bits (chunks whole, 1, 4, 7; two spans)\n",
           same ? "ok  " : "FAIL");

    /* a batch step: the sequence with rows beside one without, each with its solo bits */
    K3State *s1 = k3_state_new(&e.m), *s2 = k3_state_new(&e.m);
    s1->embed = &emb;
    K3Seq seq[2] = { { s1, pads, n, 0 }, { s2, want, 9, 0 } };
    float *two = malloc(sizeof(float) * 2 * V);
    int rc = k3_forward_seqs(&e, seq, 2, two, err, sizeof err);
    CHECK(!rc, "batch: %s", err);
    run(&e, want, 9, 0, NULL, b);
    const int ok2 = !rc && !memcmp(two, a, sizeof(float) * V) &&
                    !memcmp(two + V, b, sizeof(float) * V);
    CHECK(ok2, "a batch step with rows beside a plain sequence: not the solo bits");
    printf("%s a batch step: the sequence with rows and the one without keep their bits\n",
           ok2 ? "ok  " : "FAIL");
    k3_state_free(&e.m, s1); k3_state_free(&e.m, s2);

    /* a span past the prompt changes nothing; other rows change the logits */
    K3EmbedSpan far = { 40, 3, rows };
    K3Embed embf = { &far, 1 };
    run(&e, want, n, 0, &embf, b);
    const int ok3 = !memcmp(a, b, sizeof(float) * V);
    rows[3] += 0.5f;
    run(&e, pads, n, 0, &emb, b);
    const int ok4 = memcmp(a, b, sizeof(float) * V) != 0;
    CHECK(ok3 && ok4, "a span outside the prompt: %d; other rows, other logits: %d", ok3, ok4);
    printf("%s a span past the prompt is inert; a changed row changes the logits\n",
           ok3 && ok4 ? "ok  " : "FAIL");
    free(rows); free(a); free(b); free(two);
    k3_engine_close(&e);
    return fails ? 1 : 0;
}
