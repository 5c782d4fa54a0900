/* test_image_plan.c — k3_image_plan (K3_VISION.md 2.2) against the spec's worked examples:
 * the size after the 65,536-patch budget, the padding to multiples of 28, the grid and the
 * rows N. */
#include "image.h"
#include <stdio.h>

int main(void) {
    static const struct { int w, h, nw, nh, pw, ph, gh, gw; long l, n; } T[] = {
        { 100, 100, 100, 100, 12, 12, 8, 8, 64, 16 },
        { 448, 448, 448, 448, 0, 0, 32, 32, 1024, 256 },
        { 640, 480, 640, 480, 4, 24, 36, 46, 1656, 414 },
        { 1024, 1024, 1024, 1024, 12, 12, 74, 74, 5476, 1369 },
        { 1920, 1080, 1920, 1080, 12, 12, 78, 138, 10764, 2691 },
        { 3840, 2160, 3840, 2160, 24, 24, 156, 276, 43056, 10764 },
        { 4000, 3000, 4000, 3000, 4, 24, 216, 286, 61776, 15444 },
        { 8000, 8000, 3586, 3586, 26, 26, 258, 258, 66564, 16641 },
        { 10000, 100, 7168, 71, 0, 13, 6, 512, 3072, 768 },
    };
    int fail = 0;
    for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
        K3ImagePlan p;
        k3_image_plan(T[i].w, T[i].h, &p);
        if (p.nw != T[i].nw || p.nh != T[i].nh || p.pw != T[i].pw || p.ph != T[i].ph ||
            p.gh != T[i].gh || p.gw != T[i].gw || p.patches != T[i].l || p.rows != T[i].n) {
            printf("FAIL %dx%d: %dx%d pad %d,%d grid %dx%d L %ld N %ld\n", T[i].w, T[i].h,
                   p.nw, p.nh, p.pw, p.ph, p.gh, p.gw, p.patches, p.rows);
            fail = 1;
        }
    }
    if (!fail) printf("test_image_plan: the 9 worked examples of K3_VISION.md 2.2 match\n");
    return fail;
}
