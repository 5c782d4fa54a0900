/* image_cli.c — k3 image FILE [--rgba OUT] [--rgb OUT] [--patches OUT] [--model DIR --rows OUT]
 * [--json]: decodes an
 * image as the vision input would (K3_VISION.md §2.1), prints what it is and what it costs
 * under the patch budget (§2.2), and writes the preprocessed pixels (§2.3-2.7). Positions:
 * the HF reference replaces the image's one pad token by its N rows, so a prompt grows by
 * N - 1 positions over the pad; the text around it ("image WxH", the begin/end tokens) is the
 * tokenizer's and not counted here. */
#include "cli.h"
#include "image.h"
#include "k3.h"
#include "outfile.h"
#include "util.h"
#include "vision.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char HELP[] =
"Usage: k3 image FILE [--rgba OUT] [--rgb OUT] [--patches OUT] [--resize WxH]\n"
"                [--model DIR --rows OUT [--threads N] [--kernels K]] [--json]\n"
"Decodes FILE (PNG, JPEG baseline/progressive, GIF's first frame; sniffed from its bytes)\n"
"and prints its format, size, PIL mode and the vision patch plan: the size after the\n"
"65,536-patch budget (K3_VISION.md 2.2), the padded patch grid, the rows N the image\n"
"adds to the prompt, and the positions that adds (N - 1: the N rows take the place of\n"
"the one image pad token the chat template writes, K3_VISION.md 5.3).\n"
"  --rgba OUT   write the decoded pixels, 8-bit RGBA row-major, before any resize\n"
"  --rgb OUT    write the preprocessed pixels before padding: 8-bit RGB row-major at the\n"
"               plan's size (Pillow's BICUBIC when the budget shrinks the image, then the\n"
"               transparency filled on the 8-pixel chessboard)\n"
"  --patches OUT  write the tower's input: the patches row-major over the padded grid,\n"
"               each 588 float32 (channel, row, column; (u/255 - 0.5) / 0.5), native order\n"
"  --resize WxH   preprocess at WxH instead of the plan's size (inspection and tests; the\n"
"               grid is then WxH padded to multiples of 28)\n"
"  --model DIR --rows OUT  run DIR's vision tower on the patches and write its projector's\n"
"               rows: N x hidden float32 row-major, native order; the\n"
"               tower's line (rows, seconds, GFLOP/s) on stderr. Each flag needs the other\n"
"  --threads N  threads for the tower (default: the online cores); the same bits at any N\n"
"  --kernels K  auto|scalar|avx2|avx512|neon for the tower; the same bits on every path\n"
"  --json       one JSON object on stdout instead of the text\n"
"Limits: 16384 pixels a side, 64 Mpx, 256 MiB of file. Exit 0 ok, 1 a damaged or\n"
"unsupported file or a failed tower, 2 a usage error (or DIR without a vision tower).\n";

/* --rgb and --patches: the preprocessed pixels of plan p. 0, or -1 with the reason said. */
/* --rows: the tower of `model` on those patches. 0, or an exit code with the reason said. */
static int write_prep(const K3Image *im, const K3ImagePlan *p, const char *rgbf,
                      const char *patchf, const char *model, const char *rowsf) {
    char err[512];
    uint8_t *rgb = k3_image_rgb(im, p->nw, p->nh);
    float *pv = rgb && (patchf || rowsf) ? k3_image_patches(rgb, p) : NULL;
    int rc = 0;
    if (!rgb || ((patchf || rowsf) && !pv)) {
        fprintf(stderr, "k3: out of memory preprocessing a %d x %d image\n", p->nw, p->nh);
        rc = -1;
    } else if (rgbf && k3_out_save(rgbf, rgb, (size_t)p->nw * p->nh * 3, 0644, err, sizeof err)) {
        fprintf(stderr, "k3: --rgb %s\n", err);
        rc = -1;
    } else if (patchf && k3_out_save(patchf, pv, sizeof *pv * (size_t)p->patches * K3_PATCH_DIM,
                                     0644, err, sizeof err)) {
        fprintf(stderr, "k3: --patches %s\n", err);
        rc = -1;
    } else if (rowsf) {
        rc = k3_vision_rows_file(model, pv, p->gh, p->gw, rowsf, 0, err, sizeof err);
        if (rc) fprintf(stderr, "k3: %s\n", err);   /* 2 config, 1 runtime */
    }
    free(rgb);
    free(pv);
    return rc;
}

int k3_image_main(int argc, char **argv) {
    const char *file = NULL, *rgba = NULL, *rgb = NULL, *patches = NULL, *model = NULL,
               *rows = NULL, *kern = NULL;
    int json = 0, rw = 0, rh = 0, threads = 0;
    for (int i = 1; i < argc; i++)   /* --help anywhere, even where a value was due */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(HELP, stdout);
            return K3_OK;
        }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rgba")) {
            if (++i >= argc) return k3_usage_error("k3 image --help", "%s needs a path", "--rgba");
            rgba = argv[i];
        } else if (!strcmp(argv[i], "--rgb") || !strcmp(argv[i], "--patches")) {
            if (i + 1 >= argc) return k3_usage_error("k3 image --help", "%s needs a path", argv[i]);
            *(argv[i][2] == 'r' ? &rgb : &patches) = argv[i + 1];
            i++;
        } else if (!strcmp(argv[i], "--model") || !strcmp(argv[i], "--rows")) {
            if (i + 1 >= argc) return k3_usage_error("k3 image --help", "%s needs a path", argv[i]);
            *(argv[i][2] == 'm' ? &model : &rows) = argv[i + 1];
            i++;
        } else if (!strcmp(argv[i], "--kernels")) {
            if (++i >= argc)
                return k3_usage_error("k3 image --help", "%s needs a name", "--kernels");
            kern = argv[i];
        } else if (!strcmp(argv[i], "--threads") || !strcmp(argv[i], "-t")) {
            char x;
            if (++i >= argc || sscanf(argv[i], "%d%c", &threads, &x) != 1 || threads < 1 ||
                threads > 100000)
                return k3_usage_error("k3 image --help", "%s",
                                      "--threads needs a count, 1..100000 (e.g. 2)");
        } else if (!strcmp(argv[i], "--resize")) {
            char x;
            if (++i >= argc || sscanf(argv[i], "%dx%d%c", &rw, &rh, &x) != 2 || rw < 1 ||
                rh < 1 || rw > 7168 || rh > 7168)
                return k3_usage_error("k3 image --help", "%s",
                                      "--resize needs WxH, each 1..7168 (e.g. 64x48)");
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return k3_usage_error("k3 image --help", "unknown flag %s", argv[i]);
        } else if (file) {
            return k3_usage_error("k3 image --help", "one FILE only (%s is a second)", argv[i]);
        } else {
            file = argv[i];
        }
    }
    if (!file) return k3_usage_error("k3 image --help", "%s", "no FILE given");
    if (!model != !rows)
        return k3_usage_error("k3 image --help", "%s", model ?
                              "--model needs --rows OUT (where the tower's rows go)" :
                              "--rows needs --model DIR (the model whose vision tower runs)");
    if (threads) k3_threads_set(threads);
    char err[512];
    if (kern && k3_kernels_select(kern, err, sizeof err)) {
        fprintf(stderr, "k3: %s\n", err);
        return K3_ERR_USAGE;
    }
    const char *outs[4] = { rgba, rgb, patches, rows };
    const char *flags[4] = { "--rgba", "--rgb", "--patches", "--rows" };
    for (int i = 0; i < 4; i++)
        if (outs[i] && k3_out_check(outs[i], 0, err, sizeof err)) {
            fprintf(stderr, "k3: %s %s\n", flags[i], err);
            return K3_ERR_USAGE;
        }
    size_t n;
    char *b = k3_slurp(file, (size_t)256 << 20, &n, err, sizeof err);
    if (!b) { fprintf(stderr, "k3: %s\n", err); return K3_ERR_RUNTIME; }
    K3Image im;
    int rc = k3_image_decode((const uint8_t *)b, n, file, &im, err, sizeof err);
    free(b);
    if (rc) { fprintf(stderr, "k3: %s\n", err); return K3_ERR_RUNTIME; }
    if (rgba && k3_out_save(rgba, im.rgba, (size_t)im.w * im.h * 4, 0644, err, sizeof err)) {
        fprintf(stderr, "k3: --rgba %s\n", err);
        k3_image_free(&im);
        return K3_ERR_RUNTIME;
    }
    K3ImagePlan p;
    k3_image_plan(im.w, im.h, &p);
    if (rw) k3_image_plan_fixed(rw, rh, &p);
    if (rgb || patches || rows) {
        rc = write_prep(&im, &p, rgb, patches, model, rows);
        if (rc) {
            k3_image_free(&im);
            return rc < 0 ? K3_ERR_RUNTIME : rc;
        }
    }
    if (json) {
        printf("{\"format\":\"%s\",\"width\":%d,\"height\":%d,\"mode\":\"%s\",\"detail\":\"%s\","
               "\"alpha\":%s,\"resized\":[%d,%d],\"pad\":[%d,%d],\"grid\":[%d,%d],"
               "\"patches\":%ld,\"rows\":%ld,\"extra_positions\":%ld}\n", im.format, im.w, im.h,
               im.mode, im.detail, im.has_alpha ? "true" : "false", p.nw, p.nh, p.pw, p.ph,
               p.gh, p.gw, p.patches, p.rows, p.rows - 1);
    } else {
        printf("%s: %s %d x %d, mode %s (%s)%s\n", file, im.format, im.w, im.h, im.mode,
               im.detail, im.has_alpha ? ", has transparency" : "");
        printf("plan: %s %d x %d, pad %d,%d, grid %d x %d (gh x gw), %ld patches\n",
               p.nw == im.w && p.nh == im.h ? "kept at" : "resized to", p.nw, p.nh, p.pw, p.ph,
               p.gh, p.gw, p.patches);
        printf("rows: %ld (in place of its one pad token: %ld more prompt positions)\n", p.rows,
               p.rows - 1);
    }
    k3_image_free(&im);
    return K3_OK;
}
