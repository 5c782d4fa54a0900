/* vision.h — K3's vision tower (MoonViT3d), its 2x2 merge and the patchmergerv2 projector
 * (K3_VISION.md §3, §4), a room of its own (src/vision) on k3's kernels: normalised patches
 * in, rows of the text model's width out. All fp32 from the BF16 weights; the linears on
 * k3_matmul, attention within each image as a tiled online softmax (the L x L scores are
 * never held); every result has the same bits at any thread count and kernel path.
 * Functions returning int: 0, or an exit code (1 runtime, 2 usage/config) with the reason
 * (naming the file, the key or tensor, and the fix) in err. */
#ifndef K3_VISION_H
#define K3_VISION_H
#include <stddef.h>
#include <stdint.h>

typedef struct K3Vision K3Vision;

/* vision_config as read (config.json), plus the text hidden the rows are for. */
typedef struct {
    int hidden;            /* vt_hidden_size D (released 1024) */
    int qkv;               /* qkv_hidden_size A (1536); head_dim = A / heads */
    int heads, head_dim;   /* 12, 128 */
    int inter;             /* vt_intermediate_size F (4096) */
    int layers;            /* vt_num_hidden_layers (27) */
    int patch;             /* patch_size (14): a patch is 3 x patch x patch floats */
    int pos_h, pos_w;      /* init_pos_emb_height/width (64, 64) */
    int out;               /* text_hidden_size: the row width (7168) */
    float eps, proj_eps;   /* tower RMSNorm eps (FLT_EPSILON), projector's (1e-5) */
} K3VisionConfig;

/* One image's patch grid: gh rows x gw columns of patches, both even, 2..512. */
typedef struct { int gh, gw; } K3VisionGrid;

/* Opens the tower of the checkpoint in dir: config.json's vision_config (checked key by key)
 * and the 168 tensors vision_tower.* / mm_projector.* from the shards (model.safetensors or
 * the index), each by name, dtype (BF16) and shape; a tensor missing, mistyped or misshapen,
 * or a stray one under those prefixes (a .bias), is refused naming it. quiet: no stderr. */
int k3_vision_open(K3Vision **out, const char *dir, int quiet, char *err, size_t errlen);
void k3_vision_close(K3Vision *v);
const K3VisionConfig *k3_vision_config(const K3Vision *v);

/* Patches of n images, one after another, in the layout of K3_VISION.md §2.7:
 * [sum of gh*gw][3][patch][patch], patch index r*gw + c per image. Writes the projector's
 * rows, [sum of (gh/2)(gw/2)][out], in order (image, then row-major over the half grid).
 * Images are independent (attention never crosses them). */
int k3_vision_rows(K3Vision *v, const float *patches, const K3VisionGrid *g, int n,
                   float *rows, char *err, size_t errlen);

/* Rows and patches of n grids; 0 patches when a grid is invalid (k3_vision_grid_ok). */
long k3_vision_count_rows(const K3VisionGrid *g, int n);
long k3_vision_count_patches(const K3VisionGrid *g, int n);
/* 0 when the grid is one the tower takes, else -1 with the reason. */
int k3_vision_grid_ok(K3VisionGrid g, char *err, size_t errlen);

/* Floating-point operations of k3_vision_rows on these grids (multiply-add = 2; linears
 * and attention, K3_VISION.md §10), for the report's GFLOP/s. */
double k3_vision_flops(const K3VisionConfig *c, const K3VisionGrid *g, int n);

/* Memory for the plan: the weights as held (BF16 matrices, fp32 vectors and position
 * grid) and the activation peak of one image of `patches` patches (images run one at a
 * time). */
size_t k3_vision_weight_bytes(const K3Vision *v);
size_t k3_vision_act_bytes(const K3VisionConfig *c, long patches);

/* ---- the memory plan's share (vision_plan.c; docs/VISION.md "Memory") ---- */
/* The most patches one image gets under K3_VISION.md §2.2's rule within the decoders' limits
 * (K3_IMAGE_MAX_SIDE, K3_IMAGE_MAX_PIXELS), found by trying every size: 67,320, e.g.
 * 1889x7377 (resized to 1821x7113, grid 510x132, 16,830 rows); 8000x8000 gives 66,564. */
#define K3_VISION_MAX_PATCHES 67320L
/* config.json's vision_config alone, checked as k3_vision_open does (no tensors read). */
int k3_vision_read_config(const char *dir, K3VisionConfig *c, char *err, size_t errlen);
/* The bytes k3_vision_open holds for c's tensors (= k3_vision_weight_bytes once open). */
size_t k3_vision_config_weight_bytes(const K3VisionConfig *c);
/* One image of L patches at the current thread count: fixed + L x act_pp bytes of the
 * tower's buffers (k3_vision_act_bytes, Vt's key-tile rounding in fixed) while it runs, and
 * L x io_pp of its own (its normalised patches until the tower has run, its rows after). */
void k3_vision_image_bytes(const K3VisionConfig *c, uint64_t *fixed, uint64_t *act_pp,
                           uint64_t *io_pp);
/* The largest W' x H' of w x h's shape whose patch grid (K3_VISION.md §2.2) has at most
 * `patches` patches (0 x 0: none, under 4 patches). */
void k3_vision_fit_size(int w, int h, long patches, int *fw, int *fh);
/* The plan's share (mem.h's K3VisionPlan) for images of at most `patches` patches,
 * `all_patches` held at once (held: their patches are decoded already), from dir's
 * vision_config (no tensors read); an exit code with err when it has none or a bad one. */
struct K3VisionPlan;
int k3_vision_mem_plan(const char *dir, long patches, long all_patches, int held,
                       struct K3VisionPlan *vp, char *err, size_t errlen);
/* 0 when an image (name, w x h, its patches) is within the plan's admitted patches (admit;
 * -1: not planned), else 2 with err naming it and the size of its shape that fits. */
int k3_vision_admit(const char *name, int w, int h, long patches, long admit, char *err,
                    size_t errlen);

/* k3_vision_rows timed, with the report line on stderr (quiet: none): "k3: vision tower:
 * N rows from L patches in S s, G GFLOP/s (F GFLOP; kernels K, T threads)". */
int k3_vision_run(K3Vision *v, const float *patches, const K3VisionGrid *g, int n, float *rows,
                  int quiet, char *err, size_t errlen);
/* k3 image FILE --model DIR --rows OUT: opens the tower of DIR, runs one image's patches
 * (grid gh x gw) and writes its rows to OUT (float32, N x out, native order; "-" stdout). */
int k3_vision_rows_file(const char *model, const float *patches, int gh, int gw,
                        const char *out, int quiet, char *err, size_t errlen);

/* For the speed check: the released sizes (§1), and a tower of those sizes with random
 * BF16 weights (nothing read from disk). */
void k3_vision_release_config(K3VisionConfig *c);
int k3_vision_synthetic(K3Vision **out, const K3VisionConfig *c, unsigned seed, char *err,
                        size_t errlen);

/* For tests: one image's stages (each NULL: not kept) — after patch embedding + position
 * grid [L][D], after each block [layers][L][D], after the final norm [L][D], merged
 * [N][4D], the projector's output [N][out]. */
typedef struct { float *embed, *blocks, *final, *merged, *rows; } K3VisionTrace;
int k3_vision_trace(K3Vision *v, const float *patches, K3VisionGrid g, const K3VisionTrace *t,
                    char *err, size_t errlen);
#endif
