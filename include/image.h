/* image.h — image files decoded to 8-bit RGBA (row-major, 4 bytes a pixel), the first step of
 * the vision input (K3_VISION.md §2.1). The format is sniffed from the bytes (never the name):
 * PNG, JPEG (baseline and progressive Huffman) and GIF (first frame); anything else is refused
 * naming what it looks like. Pixels equal Pillow's decode converted to RGBA. */
#ifndef K3_IMAGE_H
#define K3_IMAGE_H
#include <stddef.h>
#include <stdint.h>

#define K3_IMAGE_MAX_SIDE   16384              /* pixels a side */
#define K3_IMAGE_MAX_PIXELS (64u * 1024 * 1024) /* 64 Mpx: 256 MiB of RGBA */

typedef struct {
    int w, h;
    const char *format;   /* "PNG", "JPEG", "GIF" */
    char mode[24];        /* the PIL mode the file opens as (RGB, RGBA, L, LA, P, I, 1) */
    char detail[96];      /* e.g. "8-bit palette, interlaced", "baseline 4:2:0" */
    int has_alpha;        /* any pixel with alpha < 255 possible (alpha band or tRNS) */
    int trns_key;         /* modes L, I, 1: the gray transparency value's low byte (what
                           * Pillow's convert("RGBA") matches, after a resize too), else -1 */
    uint8_t *rgba;        /* w*h*4 bytes, malloc'd */
    uint16_t *gray16;     /* mode I (16-bit gray PNG): the w*h samples Pillow resizes before
                           * it clips them to 0..255; else NULL */
} K3Image;

/* Decodes b[0..n). 0, or -1 with "NAME: what is wrong" in err (a damaged or refused file). */
int k3_image_decode(const uint8_t *b, size_t n, const char *name, K3Image *im, char *err,
                    size_t errlen);
void k3_image_free(K3Image *im);

/* zlib stream (RFC 1950: header, deflate, adler-32) into out[0..cap): the byte count, or -1
 * with the reason in err; more than cap bytes of output is an error (a bound set before). */
long k3_zlib_inflate(const uint8_t *in, size_t n, uint8_t *out, size_t cap, char *err,
                     size_t errlen);

/* The decoders (png.c, jpeg.c, gif.c): as k3_image_decode, the format already sniffed; err
 * without the name. */
int k3_png_decode(const uint8_t *b, size_t n, K3Image *im, char *err, size_t errlen);
int k3_jpeg_decode(const uint8_t *b, size_t n, K3Image *im, char *err, size_t errlen);
int k3_gif_decode(const uint8_t *b, size_t n, K3Image *im, char *err, size_t errlen);
/* Shared by the decoders: checks w x h against the limits (0, or -1 with the reason);
 * k3_image_alloc also allocates im->rgba. */
int k3_image_check(long w, long h, char *err, size_t errlen);
int k3_image_alloc(K3Image *im, long w, long h, char *err, size_t errlen);

/* The patch budget plan (K3_VISION.md §2.2) for an original W x H. */
typedef struct { int nw, nh, pw, ph, gw, gh; long patches, rows; } K3ImagePlan;
void k3_image_plan(int w, int h, K3ImagePlan *p);
/* The same padding, grid and rows for a size given as is (nw x nh, no budget rule). */
void k3_image_plan_fixed(int nw, int nh, K3ImagePlan *p);

/* Preprocessing (preprocess.c, resample.c), bit for bit the reference's PIL + NumPy.
 * §2.3-2.4: im at nw x nh (resized as Pillow does in the image's own mode when the size
 * differs), filled onto the chessboard where it has transparency: nh*nw*3 RGB bytes,
 * malloc'd; NULL out of memory. The pipeline passes the plan's nw x nh. */
uint8_t *k3_image_rgb(const K3Image *im, int nw, int nh);
/* §2.5-2.7: the plan's pixel values from rgb (p->nh x p->nw x 3): p->patches rows of
 * K3_PATCH_DIM floats (channel, row, column inside the patch), row-major over the grid;
 * malloc'd, NULL out of memory. */
#define K3_PATCH_DIM 588
float *k3_image_patches(const uint8_t *rgb, const K3ImagePlan *p);

/* data_url.c: base64 (RFC 4648, strict: the standard alphabet, '=' only as the end's
 * padding) of s[0..n) into out[0..cap): the byte count, or -1 with the reason in err. */
long k3_base64_decode(const char *s, size_t n, uint8_t *out, size_t cap, char *err,
                      size_t errlen);
/* A data: URL's bytes ("data:[TYPE];base64,DATA"; the type is not trusted: the format is
 * sniffed later): *out malloc'd, at most cap bytes. 0, or -1 with the reason in err (an
 * http(s) URL is refused: k3 does not fetch). */
int k3_data_url(const char *s, size_t n, uint8_t **out, size_t *outn, size_t cap, char *err,
                size_t errlen);
#endif
