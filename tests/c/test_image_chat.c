/* test_image_chat.c — the chat's render of a conversation with images (chat_render,
 * src/chat/chat_gen.c; K3_VISION.md §5.2-5.4) against tests/images/chat_ids.txt, whose ids
 * tools/tok/gen_image_goldens.js computed with tiktoken from its own transcription of the
 * template: user [image 19x13, "Hi"], assistant "@", user "More", assistant "@", user
 * [image 48x40, "And this?"], the generation prompt (thinking off). Also: the spans of the
 * rows point at the pad runs (1 and 4 rows), a turn dropped by --context-full takes its image
 * out of the render, and k3_image_content's placeholder rules. No model is needed (the ids
 * and spans only; the tower's rows are test_vision's). */
#include "chat/chat.h"
#include "image_in.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL: " __VA_ARGS__); printf("\n"); fails++; } \
                           } while (0)

static int32_t *golden(const char *name, size_t *n) {
    FILE *f = fopen("tests/images/chat_ids.txt", "r");
    static char line[1 << 16];
    int32_t *v = NULL;
    *n = 0;
    while (f && fgets(line, sizeof line, f)) {
        size_t k = strlen(name);
        if (strncmp(line, name, k) || line[k] != ' ') continue;
        v = malloc(sizeof *v * sizeof line);
        for (char *p = line + k + 1; *p && *p != '\n';) {
            v[(*n)++] = (int32_t)strtol(p, &p, 10);
            if (*p == ',') p++;
        }
    }
    if (f) fclose(f);
    return v;
}

static void add(Chat *c, const char *role, const char *text, const char *const *imgs, int n) {
    char err[512];
    char *with = n ? k3_image_content(text, n, err, sizeof err) : NULL;
    CHECK(!chat_log_add(&c->log, role, with ? with : text, NULL), "log add");
    free(with);
    ChatMsg *m = &c->log.v[c->log.n - 1];
    m->img = n ? calloc((size_t)n, sizeof *m->img) : NULL;
    for (int i = 0; i < n; i++, m->n_img++)
        CHECK(!k3_image_in_file(imgs[i], c->tok, &m->img[i], err, sizeof err), "%s", err);
}

int main(void) {
    char err[512];
    static Chat c;
    c.tok = tok_load("tests/tok/tiny", err, sizeof err);
    if (!c.tok) { printf("FAIL: %s\n", err); return 1; }
    const char *a[1] = { "tests/images/png_rgba8.png" },
               *b[1] = { "tests/images/jpg_prog_420.jpg" };
    add(&c, "user", "Hi", a, 1);
    add(&c, "assistant", "@", NULL, 0);
    add(&c, "user", "More", NULL, 0);
    add(&c, "assistant", "@", NULL, 0);
    add(&c, "user", "And this?", b, 1);
    int32_t *ids = NULL;
    size_t n = 0, ng = 0;
    int32_t *want = golden("chat_three", &ng);
    CHECK(want && ng, "tests/images/chat_ids.txt has no chat_three line");
    int rc = chat_render(&c, &ids, &n);
    const int same = !rc && n == ng && !memcmp(ids, want, sizeof *ids * n);
    CHECK(same, "the render differs from the golden (%zu ids, want %zu)", n, ng);
    printf("%s the chat's render with two images equals tiktoken's golden (%zu ids)\n",
           same ? "ok  " : "FAIL", n);
    const int pad = tok_special_id(c.tok, "<|media_pad|>");
    int spans_ok = !rc && c.embed.n == 2 && c.embed.span[0].len == 1 && c.embed.span[1].len == 4;
    for (int k = 0; spans_ok && k < 2; k++)
        for (int i = 0; i < c.embed.span[k].len; i++)
            spans_ok &= ids[c.embed.span[k].pos0 + i] == pad;
    CHECK(spans_ok, "the spans are not the pad runs");
    printf("%s the rows' spans are the pad runs (1 and 4 rows)\n", spans_ok ? "ok  " : "FAIL");
    free(ids);

    c.skip = 2;                        /* --context-full dropped the first turn and its image */
    rc = chat_render(&c, &ids, &n);
    int one = !rc && c.embed.n == 1 && c.embed.span[0].len == 4;
    CHECK(one, "a dropped turn's image is still rendered");
    printf("%s a turn dropped to fit the context takes its image with it\n", one ? "ok  " : "FAIL");
    free(ids);

    char *s1 = k3_image_content("x", 2, err, sizeof err);
    char *s2 = k3_image_content("a" K3_IMAGE_PLACEHOLDER "b", 1, err, sizeof err);
    char *s3 = k3_image_content("a" K3_IMAGE_PLACEHOLDER "b", 2, err, sizeof err);
    const int rules = s1 && !strcmp(s1, K3_IMAGE_PLACEHOLDER K3_IMAGE_PLACEHOLDER "x") && s2 &&
                      !strcmp(s2, "a" K3_IMAGE_PLACEHOLDER "b") && !s3 && strstr(err, "1 ");
    CHECK(rules, "k3_image_content: %s | %s | %s", s1, s2, err);
    printf("%s placeholders: images first without any, kept when one per image, else refused\n",
           rules ? "ok  " : "FAIL");
    free(s1); free(s2); free(s3); free(want); free(c.span);
    chat_log_free(&c.log);
    tok_free(c.tok);
    return fails ? 1 : 0;
}
