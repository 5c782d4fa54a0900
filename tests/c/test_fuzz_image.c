/* test_fuzz_image.c — the image decoders (src/image/) given damaged files: never a crash,
 * a hang or a read out of bounds; every refusal a message; a decoded image whole. And the
 * data: URL / base64 parser (data_url.c): mutated URLs of the corpus's bytes; a success must
 * re-encode (an encoder written here) to base64 that decodes to the same bytes.
 *
 * make test (no argument): every file of tests/images/ with bytes flipped at spread,
 * deterministic places, cut at 24 lengths, then 20000 random mutations (a fixed seed) of
 * them; PNG copies also get their chunk CRCs fixed, so damage reaches the inflate and the
 * filters instead of stopping at the CRC. With SECONDS: the same mutations for that long
 * (make fuzz's fallback under ASan/UBSan). Under libFuzzer (-DK3_LIBFUZZER) one target:
 *   FUZZ_TARGET_png, _jpeg, _gif: the input as a file of that format (its magic forced);
 *   FUZZ_TARGET_inflate: the input as deflate data behind a zlib header;
 *   FUZZ_TARGET_data_url: the input as a data: URL's text. */
#include "image.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t crc_tab[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_tab[i] = c;
    }
}

/* Rewrites each PNG chunk's CRC to match its bytes (as far as the chunks parse). */
static void fix_png_crcs(uint8_t *b, size_t n) {
    size_t pos = 8;
    while (n >= 12 && pos <= n - 12) {
        uint32_t len = (uint32_t)b[pos] << 24 | (uint32_t)b[pos + 1] << 16 |
                       (uint32_t)b[pos + 2] << 8 | b[pos + 3];
        if (len > n - pos - 12) return;
        uint32_t c = 0xffffffffu;
        for (size_t i = pos + 4; i < pos + 8 + len; i++) c = crc_tab[(c ^ b[i]) & 255] ^ (c >> 8);
        c ^= 0xffffffffu;
        uint8_t *q = b + pos + 8 + len;
        q[0] = (uint8_t)(c >> 24); q[1] = (uint8_t)(c >> 16); q[2] = (uint8_t)(c >> 8);
        q[3] = (uint8_t)c;
        pos += 12 + (size_t)len;
    }
}

static long n_ok, n_refused;

/* Decodes b[0..n); a success must hold a whole image within the limits. */
static void one(const uint8_t *b, size_t n) {
    K3Image im;
    char err[512];
    err[0] = 0;
    if (k3_image_decode(b, n, "fuzz", &im, err, sizeof err) == 0) {
        if (im.w < 1 || im.h < 1 || im.w > K3_IMAGE_MAX_SIDE || !im.rgba || !im.format) {
            fprintf(stderr, "test_fuzz_image: a decode succeeded with a bad image\n");
            abort();
        }
        volatile uint8_t sink = im.rgba[(size_t)im.w * im.h * 4 - 1];   /* all of it there */
        (void)sink;
        k3_image_free(&im);
        n_ok++;
    } else {
        if (!err[0] || strncmp(err, "fuzz: ", 6)) {
            fprintf(stderr, "test_fuzz_image: a refusal without its message: '%s'\n", err);
            abort();
        }
        n_refused++;
    }
}

static long n_url_ok, n_url_refused;

static size_t b64enc(const uint8_t *b, size_t n, char *o) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        o[k++] = A[v >> 18]; o[k++] = A[(v >> 12) & 63];
        o[k++] = i + 1 < n ? A[(v >> 6) & 63] : '=';
        o[k++] = i + 2 < n ? A[v & 63] : '=';
    }
    return k;
}

/* s[0..n) as a data: URL: a success's bytes round-trip; a refusal has a message */
static void one_url(const char *s, size_t n) {
    uint8_t *b = NULL, *c = NULL;
    size_t nb = 0;
    char err[256] = "";
    if (k3_data_url(s, n, &b, &nb, 1 << 20, err, sizeof err) == 0) {
        char *e = malloc(nb / 3 * 4 + 8);
        size_t ne = b64enc(b, nb, e);
        c = malloc(nb + 4);
        if (!b || !nb || k3_base64_decode(e, ne, c, nb + 4, err, sizeof err) != (long)nb ||
            memcmp(b, c, nb)) {
            fprintf(stderr, "test_fuzz_image: a data: URL decoded to bytes that do not "
                    "round-trip\n");
            abort();
        }
        free(e);
        n_url_ok++;
    } else {
        if (!err[0] || b) { fprintf(stderr, "test_fuzz_image: a data: URL refusal without "
                                    "its message\n"); abort(); }
        n_url_refused++;
    }
    free(b); free(c);
}

static void one_png_too(uint8_t *b, size_t n) {
    one(b, n);
    if (n >= 8 && !memcmp(b, "\x89PNG", 4)) { fix_png_crcs(b, n); one(b, n); }
}

#ifdef K3_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static int ready;
    if (!ready) { crc_init(); ready = 1; }
#if defined(FUZZ_TARGET_data_url)
    one_url((const char *)d, n);
#elif defined(FUZZ_TARGET_inflate)
    uint8_t *in = malloc(n + 2), *out = malloc(1 << 16);
    char err[256];
    in[0] = 0x78; in[1] = 0x9c;
    memcpy(in + 2, d, n);
    if (k3_zlib_inflate(in, n + 2, out, 1 << 16, err, sizeof err) < 0 && !err[0]) abort();
    free(in); free(out);
#else
#if defined(FUZZ_TARGET_png)
    static const uint8_t MAGIC[] = "\x89PNG\r\n\x1a\n";
    const size_t m = 8;
#elif defined(FUZZ_TARGET_jpeg)
    static const uint8_t MAGIC[] = "\xff\xd8\xff";
    const size_t m = 3;
#else
    static const uint8_t MAGIC[] = "GIF89a";
    const size_t m = 6;
#endif
    uint8_t *b = malloc(n + m);
    memcpy(b, MAGIC, m);                                  /* the decoder under test */
    memcpy(b + m, n >= m && !memcmp(d, MAGIC, m) ? d + m : d, n >= m && !memcmp(d, MAGIC, m)
           ? n - m : n);
    one_png_too(b, n >= m && !memcmp(d, MAGIC, m) ? n : n + m);
    free(b);
#endif
    return 0;
}
#else
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

typedef struct { uint8_t *b; size_t n; char name[300]; } Seed;

static int load(Seed *s, int max) {
    const char *dir = "tests/images";
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "test_fuzz_image: %s: cannot open (run from the repository "
                      "root)\n", dir); exit(1); }
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)) && k < max) {
        const char *x = strrchr(e->d_name, '.');
        if (!x || (strcmp(x, ".png") && strcmp(x, ".jpg") && strcmp(x, ".gif") &&
                   strcmp(x, ".webp") && strcmp(x, ".bmp"))) continue;
        snprintf(s[k].name, sizeof s[k].name, "%s/%s", dir, e->d_name);
        FILE *f = fopen(s[k].name, "rb");
        if (!f) continue;
        s[k].b = malloc(1 << 16);
        s[k].n = fread(s[k].b, 1, 1 << 16, f);
        fclose(f);
        k++;
    }
    closedir(d);
    return k;
}

int main(int argc, char **argv) {
    const double secs = argc > 1 ? atof(argv[1]) : 0;
    Seed s[128];
    crc_init();
    int ns = load(s, 128);
    if (ns < 10) { fprintf(stderr, "test_fuzz_image: only %d seed files\n", ns); return 1; }
    const size_t cap = (1 << 16) + 64;
    uint8_t *buf = malloc(cap);
    long iters = 0;
    for (int i = 0; i < ns; i++) {            /* deterministic: flips and cuts */
        for (int k = 0; k < 48; k++) {
            size_t pos = s[i].n * (size_t)k / 48;
            memcpy(buf, s[i].b, s[i].n);
            buf[pos] ^= (uint8_t)(1 << (k & 7)) | 0x10;
            one_png_too(buf, s[i].n); iters++;
        }
        for (int k = 0; k < 24; k++) {
            memcpy(buf, s[i].b, s[i].n);
            one_png_too(buf, s[i].n * (size_t)k / 24); iters++;
        }
    }
    long rand_iters = 0;
    const clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (rand_iters < 20000 || clock() < end) {
        const Seed *q = &s[rnd() % (uint64_t)ns];
        size_t n = q->n;
        memcpy(buf, q->b, n);
        for (int m = 1 + (int)(rnd() % 4); m > 0; m--) {
            size_t pos = n ? rnd() % n : 0;
            switch (rnd() % 5) {
            case 0: if (n) buf[pos] ^= (uint8_t)(1 << (rnd() % 8)); break;
            case 1: if (n) buf[pos] = (uint8_t)rnd(); break;
            case 2: if (n) buf[pos] = (uint8_t)(rnd() % 2 ? 0xff : 0); break;
            case 3: n = pos; break;                                  /* cut */
            default:                                                 /* a run repeated */
                if (n && n + 16 < cap) {
                    memmove(buf + pos + 16, buf + pos, n - pos);
                    n += 16;
                }
            }
        }
        one_png_too(buf, n);
        rand_iters++;
    }
    /* data: URLs of the corpus's first bytes, mutated (the URL text, not the bytes) */
    char *url = malloc(4 * 1024 + 64);
    long url_iters = 0;
    const char *heads[4] = { "data:image/png;base64,", "data:;base64,", "data:image/png,",
                             "https://x/a.png" };
    const clock_t end2 = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    for (long it = 0; it < 20000 || clock() < end2; it++) {
        const Seed *q = &s[rnd() % (uint64_t)ns];
        const char *h = heads[rnd() % 8 < 6 ? 0 : 1 + rnd() % 3];
        size_t hn = strlen(h), nb = q->n < 3000 ? q->n : 3000;
        memcpy(url, h, hn);
        size_t n = hn + b64enc(q->b, nb - rnd() % (nb + 1) / 2, url + hn);
        for (int m = (int)(rnd() % 3); m > 0 && n; m--) {
            size_t pos = rnd() % n;
            switch (rnd() % 4) {
            case 0: url[pos] = (char)rnd(); break;
            case 1: url[pos] = "=+/ \n%A"[rnd() % 8]; break;
            case 2: n = pos; break;
            default: memmove(url + pos, url + pos + 1, n - pos - 1); n--;
            }
        }
        one_url(url, n);
        url_iters++;
    }
    free(url);
    free(buf);
    for (int i = 0; i < ns; i++) free(s[i].b);
    printf("test_fuzz_image: %d corpus files, %ld flipped/cut and %ld randomly mutated inputs "
           "(PNGs also with CRCs fixed): %ld decoded, %ld refused with a message, no crash\n",
           ns, iters, rand_iters, n_ok, n_refused);
    printf("test_fuzz_image: %ld data: URLs (mutated base64 of the corpus): %ld decoded and "
           "round-tripped, %ld refused with a message\n", url_iters, n_url_ok, n_url_refused);
    return 0;
}
#endif
