/* image_in.h — images into a conversation (K3_VISION.md §5): a file's bytes become the
 * tower's rows (decode, preprocess, k3_vision_rows) and the prompt's ids
 *   <|media_begin|>image WxH<|media_content|> + N x <|media_pad|> + <|media_end|>
 * (W x H the original size, N the plan's rows: the N-pads form of vLLM, the same embedding
 * sequence as the reference's one pad expanded, §5.3). The chat renderer writes the literal
 * K3_IMAGE_PLACEHOLDER where an image goes (the reference's own marker, §5.2); k3_image_segs
 * puts each image's ids there; after encoding, k3_image_spans finds the pad runs, whose
 * positions take the rows (K3Embed, k3.h). One place for every mode (run, chat, batch,
 * serve). */
#ifndef K3_IMAGE_IN_H
#define K3_IMAGE_IN_H
#include <stddef.h>
#include <stdint.h>
#include "image.h"
#include "k3.h"
#include "tok.h"
#include "vision.h"
#include "xtml.h"

#define K3_IMAGE_PLACEHOLDER "<|kimi_image_placeholder|>"
#define K3_IMAGE_MAX_BYTES ((size_t)64 << 20)   /* an image file or data URL's bytes */

typedef struct {
    int w, h;              /* the original size: "image WxH" */
    K3ImagePlan plan;      /* rows N = plan.rows */
    uint64_t hash;         /* FNV-1a 64 of the file's bytes (prefix and state keys) */
    float *patches;        /* [plan.patches][588] until the tower has run, then NULL */
    float *rows;           /* [plan.rows][hidden]: the projector's output (k3_image_rows) */
    int32_t *ids;          /* the image's prompt ids (above) */
    int n_ids;
} K3ImageIn;

/* The vision side of a session: the checkpoint's tower, opened on first use. */
typedef struct {
    const char *dir;       /* the model's folder (its vision_config and tensors) */
    int hidden;            /* the text model's hidden_size: the rows' width */
    int quiet;             /* no progress line on stderr */
    K3Vision *v;
} K3ImageCtx;

/* One image from its bytes (name: for messages, a path or "a data URL"): decoded and
 * preprocessed, with its prompt ids from t (the prompt's length is known from here; the
 * tower runs in k3_image_rows). 0, or an exit code (1: a bad or unsupported image; 2: the
 * tokenizer has no media tokens) with the reason in err. */
int k3_image_in(const uint8_t *b, size_t n, const char *name, const Tok *t, K3ImageIn *out,
                char *err, size_t errlen);
/* The same from a file (at most K3_IMAGE_MAX_BYTES). */
int k3_image_in_file(const char *path, const Tok *t, K3ImageIn *out, char *err,
                     size_t errlen);
/* The rows of the n images that have none yet: the tower (opened on first use) over their
 * patches. 0, or an exit code (2: the model has no vision tower, or its rows are not the
 * text model's width; 1: the tower failed) with the reason in err. */
int k3_image_rows(K3ImageCtx *c, K3ImageIn *im, int n, char *err, size_t errlen);
void k3_image_in_free(K3ImageIn *im);
/* The n images of one prompt (a batch line, a server request) against the memory plan's
 * admitted patches (k3_mem_vision_patches; -1: not planned): each one (k3_vision_admit,
 * names[i] or "image i" naming it) and, with together, all of them at once (a plan that
 * holds each sequence's images, K3VisionPlan.per_seq). 0, or 2 with err naming the image
 * and the size that fits. */
int k3_image_admit(const K3ImageIn *im, int n, const char *const *names, long admit,
                   int together, char *err, size_t errlen);
void k3_image_ctx_close(K3ImageCtx *c);

/* The number of placeholders in text[0..len). */
int k3_image_placeholders(const char *text, size_t len);
/* A user turn's content with n images: text as is when it holds placeholders (then exactly
 * n of them), else n placeholders before it. malloc'd; NULL with the reason in err. */
char *k3_image_content(const char *text, int n, char *err, size_t errlen);
/* Replaces the placeholders of s's text segments, in order, by the images' ids (segments
 * that point at im[i].ids: keep im alive until encoded). 0, or -1 with the reason (the
 * counts differ, out of memory). n == 0 leaves s as it is. */
int k3_image_segs(XtmlSegs *s, const K3ImageIn *im, int n, char *err, size_t errlen);
/* The rows' positions in the encoded ids: image i's N pads (after its <|media_content|>)
 * get im[i].rows (as it is now: set spans[i].rows again once k3_image_rows has run).
 * spans[n] is filled; 0, or -1 when the ids do not hold the images as rendered. */
int k3_image_spans(const int32_t *ids, size_t nids, const Tok *t, const K3ImageIn *im, int n,
                   K3EmbedSpan *spans, char *err, size_t errlen);
/* A one-shot conversation (k3 --image, --batch "images"): an optional system message and
 * one user message (text[0..len), the images at its placeholders or first), thinking off,
 * with the generation prompt, as ids; spans[n] where the rows go. 0, or -1 with the reason
 * (a NUL in the text, a placeholder count, out of memory). */
int k3_image_render(const Tok *t, const char *system, const char *text, size_t len,
                    const K3ImageIn *im, int n, int32_t **ids, size_t *nids, K3EmbedSpan *spans,
                    char *err, size_t errlen);
/* k3_image_rows, then the spans take the rows and emb the spans: what a state's embed then
 * points at. 0, or k3_image_rows's exit code with err. */
int k3_image_embed(K3ImageCtx *c, K3ImageIn *im, int n, K3EmbedSpan *spans, K3Embed *emb,
                   char *err, size_t errlen);
/* The images' hash, chained onto h (a prefix key: same ids, other pixels, other key). */
uint64_t k3_image_hash(uint64_t h, const K3ImageIn *im, int n);
#endif
