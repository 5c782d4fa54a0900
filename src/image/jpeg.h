/* jpeg.h — what jpeg.c (markers, Huffman, scans) hands jpeg_pix.c (IDCT, upsampling,
 * colour): the decoded coefficients of each component. Private to src/image/. */
#ifndef K3_IMAGE_JPEG_H
#define K3_IMAGE_JPEG_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int id, h, v, tq;      /* sampling factors, quantization table */
    int bw, bh;            /* blocks allocated a row / a column (whole MCUs) */
    int dw, dh;            /* libjpeg's downsampled_width/height: ceil(W * h / hmax) */
    int td, ta, pred;      /* scan: DC and AC tables, DC predictor */
    int16_t *coef;         /* bw * bh blocks of 64, natural order */
} JComp;

typedef struct {
    int w, h, nc, hmax, vmax;
    int rgb;               /* 3 components stored as RGB (Adobe transform 0, 'R','G','B') */
    uint16_t q[4][64];     /* natural order */
    JComp c[3];
} JFrame;

/* IDCT (libjpeg's ISLOW), upsampling (its "fancy" filters) and YCbCr->RGB into rgba (w*h*4).
 * 0, or -1 with the reason in err. */
int k3_jpeg_pixels(const JFrame *f, uint8_t *rgba, char *err, size_t errlen);
#endif
