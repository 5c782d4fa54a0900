/* vision_plan.c — the tower's share of the memory plan (docs/VISION.md "Memory"): the size
 * of the largest image of a given shape that the plan's patches admit. (The bytes
 * themselves: k3_vision_config_weight_bytes, vision_load.c; k3_vision_image_bytes,
 * vision.c.) */
#include "vision.h"
#include "image.h"
#include "k3.h"
#include "mem.h"
#include <stdio.h>
#include <string.h>

static long patches_at(int w, int h) {
    K3ImagePlan p;
    k3_image_plan(w, h, &p);
    return p.patches;
}

/* Widths from 1 up: the grid grows with the size (both sides padded up to 28), so bisect on
 * the width with the height of the same shape, then step down past any rounding kink. */
void k3_vision_fit_size(int w, int h, long patches, int *fw, int *fh) {
    *fw = *fh = 0;
    if (w < 1 || h < 1 || patches < 4) return;
#define HEIGHT(x) ((int)((double)h * (x) / w + 0.5) > 0 ? (int)((double)h * (x) / w + 0.5) : 1)
    if (patches_at(w, h) <= patches) { *fw = w; *fh = h; return; }
    int lo = 0, hi = w;                       /* lo fits (0: none yet), hi does not */
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        if (patches_at(mid, HEIGHT(mid)) <= patches) lo = mid;
        else hi = mid;
    }
    while (lo > 0 && patches_at(lo, HEIGHT(lo)) > patches) lo--;
    if (lo > 0) { *fw = lo; *fh = HEIGHT(lo); }
#undef HEIGHT
}

int k3_vision_mem_plan(const char *dir, long patches, long all_patches, int held,
                       struct K3VisionPlan *vp, char *err, size_t errlen) {
    K3VisionConfig c;
    memset(vp, 0, sizeof *vp);
    int rc = k3_vision_read_config(dir, &c, err, errlen);
    if (rc) return rc;
    vp->weights = k3_vision_config_weight_bytes(&c);
    k3_vision_image_bytes(&c, &vp->fixed, &vp->act_pp, &vp->io_pp);
    vp->patches = patches;
    vp->all_patches = all_patches > patches ? all_patches : patches;
    if (held) vp->held = (uint64_t)vp->all_patches * 4 * 3 * c.patch * c.patch;
    return 0;
}

int k3_vision_admit(const char *name, int w, int h, long patches, long admit, char *err,
                    size_t errlen) {
    if (admit < 0 || patches <= admit) return 0;
    if (admit < 4) {
        snprintf(err, errlen, "%s (%dx%d, %ld patches): the memory plan leaves no room for the "
                 "vision tower beside the model (its weights and the smallest image's buffers; "
                 "the plan's \"vision tower\" line, --verbose): give k3 more memory, or a "
                 "smaller --ctx, --cache-gb or --trunk-gb", name, w, h, patches);
        return K3_ERR_USAGE;
    }
    int fw, fh;
    k3_vision_fit_size(w, h, admit, &fw, &fh);
    char fit[96];
    if (fw) snprintf(fit, sizeof fit, "at most %dx%d of its shape fits", fw, fh);
    else snprintf(fit, sizeof fit, "no image of its shape fits");
    snprintf(err, errlen, "%s is %dx%d: %ld patches in the vision tower, but the memory plan "
             "admits images of at most %ld patches beside the model; %s: resize it to that, "
             "or give k3 more memory (a smaller --ctx, --cache-gb or --trunk-gb leaves more "
             "room)", name, w, h, patches, admit, fit);
    return K3_ERR_USAGE;
}
