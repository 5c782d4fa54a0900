/* serve_image.c — an image in the Anthropic Messages and OpenAI Responses requests, checked
 * with the API's own field names and written as the chat request's image_url part with a
 * data: URL (serve_req.c takes it from there: the same placeholder, bytes, hash and rows as
 * a chat image, so the three endpoints give one prompt). Anthropic's {"type": "image",
 * "source": {"type": "base64", "media_type", "data"}}: the media_type must name the bytes'
 * format (Anthropic refuses a mismatch too); Responses' {"type": "input_image", "image_url":
 * "data:...", "detail"} (with --image-dir also a path or file:// URL: its bytes become
 * the data: URL, serve_image_file.c). URL and file sources are refused: the server does
 * not fetch and has no Files API. */
#include "serve.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return 400; } while (0)

/* The media type the bytes' magic names, or NULL (the formats Anthropic takes; WebP is
 * then refused by the decoder, naming it). */
static const char *media_of(const uint8_t *b, size_t n) {
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return "image/png";
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return "image/jpeg";
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return "image/gif";
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return "image/webp";
    return NULL;
}

/* b[0..n) as base64 (RFC 4648, padded) onto o, a block of 3072 bytes at a time. */
static void b64(Buf *o, const uint8_t *b, size_t n) {
    static const char A[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                           (i + 2 < n ? b[i + 2] : 0);
        q[k++] = A[v >> 18]; q[k++] = A[v >> 12 & 63];
        q[k++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        q[k++] = i + 2 < n ? A[v & 63] : '=';
        if (k == sizeof q) { buf_add(o, q, k); k = 0; }
    }
    buf_add(o, q, k);
}

static int count_one(int *n_img, const char *w, char *err, size_t errlen) {
    if (++*n_img > SERVE_MAX_IMAGES)
        BAD("%s: more than %d images in a request", w, SERVE_MAX_IMAGES);
    return 0;
}

static void part(Buf *o, int *np, const char *url, size_t n) {
    buf_str(o, (*np)++ ? ", {\"type\": \"image_url\", \"image_url\": {\"url\": "
                       : "{\"type\": \"image_url\", \"image_url\": {\"url\": ");
    buf_json(o, url, n);
    buf_str(o, "}}");
}

/* (serve.h) */
int serve_anth_image(Buf *o, int *np, const Json *b, const char *w, int *n_img, char *err,
                     size_t errlen) {
    static const char *const KEYS[] = { "type", "source", "cache_control", NULL },
                             *B64[] = { "type", "media_type", "data", NULL };
    static const char *const MEDIA[] = { "image/jpeg", "image/png", "image/gif", "image/webp",
                                         NULL };
    if (serve_only_keys(b, KEYS, w, err, errlen)) return 400;
    const Json *s = json_get(b, "source");
    const char *ty = s && s->type == JSON_OBJECT ? serve_type_of(s) : NULL;
    if (!ty)
        BAD("%s.source must be {\"type\": \"base64\", \"media_type\": \"image/png\", "
            "\"data\": BASE64}", w);
    if (!strcmp(ty, "url"))
        BAD("%s.source: a \"url\" source: k3 does not fetch images; send the bytes as "
            "{\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": BASE64}", w);
    if (!strcmp(ty, "file"))
        BAD("%s.source: a \"file\" source: k3 has no Files API; send the bytes as "
            "{\"type\": \"base64\", ...}", w);
    if (strcmp(ty, "base64"))
        BAD("%s.source.type must be \"base64\" (got '%.40s')", w, ty);
    char ws[96];
    snprintf(ws, sizeof ws, "%s.source", w);
    if (serve_only_keys(s, B64, ws, err, errlen)) return 400;
    const Json *mt = json_get(s, "media_type"), *d = json_get(s, "data");
    int k = 0;
    while (serve_str_ok(mt) && MEDIA[k] && strcmp(MEDIA[k], mt->str)) k++;
    if (!serve_str_ok(mt) || !MEDIA[k])
        BAD("%s.media_type must be image/jpeg, image/png, image/gif or image/webp", ws);
    if (!serve_str_ok(d) || !d->len) BAD("%s.data must be a non-empty base64 string", ws);
    if (count_one(n_img, w, err, errlen)) return 400;
    uint8_t *bytes = malloc(d->len / 4 * 3 + 3);
    char why[256];
    if (!bytes) BAD("out of memory for %zu bytes of base64", d->len);
    const long nb = k3_base64_decode(d->str, d->len, bytes, K3_IMAGE_MAX_BYTES, why, sizeof why);
    const char *is = nb > 0 ? media_of(bytes, (size_t)nb) : NULL;
    free(bytes);
    if (nb < 0) BAD("%s.data: %s", ws, why);
    if (!is || strcmp(is, mt->str))
        BAD("%s.media_type is %s but the data is %s%s", ws, mt->str,
            is ? "an image of type " : "not a PNG, JPEG, GIF or WebP image", is ? is : "");
    Buf url = { 0 };
    buf_fmt(&url, "data:%s;base64,", mt->str);
    buf_add(&url, d->str, d->len);
    if (url.oom) { buf_free(&url); BAD("out of memory"); }
    part(o, np, url.b, url.n);
    buf_free(&url);
    return 0;
}

/* (serve.h) */
int serve_resp_image(Buf *o, int *np, const Json *p, const char *w, int *n_img, char *err,
                     size_t errlen) {
    static const char *const KEYS[] = { "type", "image_url", "detail", "file_id", NULL };
    const char *k = serve_unknown_key(p, KEYS);
    if (k) BAD("%s: unknown or unsupported field '%.60s'", w, k);
    const Json *f = json_get(p, "file_id"), *u = json_get(p, "image_url"),
               *dt = json_get(p, "detail");
    if (f && f->type != JSON_NULL)
        BAD("%s.file_id: k3 has no Files API; send the image as \"image_url\": "
            "\"data:image/png;base64,...\"", w);
    if (dt && dt->type != JSON_NULL && !serve_str_ok(dt))
        BAD("%s.detail must be a string (K3 has no detail setting: it is ignored)", w);
    if (!serve_str_ok(u))
        BAD("%s.image_url must be a string: a data: URL (data:image/png;base64,...)", w);
    if (count_one(n_img, w, err, errlen)) return 400;
    uint8_t *bytes;
    size_t nb;
    int file;
    char why[512];
    if (serve_image_src(u->str, u->len, &bytes, &nb, &file, why, sizeof why))
        BAD("%s.image_url: %s", w, why);
    if (!file) {
        free(bytes);
        part(o, np, u->str, u->len);
        return 0;
    }
    /* a file (--image-dir): its bytes as a data: URL, so that a stored conversation
     * (previous_response_id) holds the image itself, not a path whose file may change */
    Buf url = { 0 };
    const char *mt = media_of(bytes, nb);
    buf_fmt(&url, "data:%s;base64,", mt ? mt : "application/octet-stream");
    b64(&url, bytes, nb);
    free(bytes);
    if (url.oom) { buf_free(&url); BAD("out of memory"); }
    part(o, np, url.b, url.n);
    buf_free(&url);
    return 0;
}
