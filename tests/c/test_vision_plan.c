/* test_vision_plan.c — the vision tower's share of the memory plan (src/vision/vision_plan.c,
 * docs/VISION.md "Memory"): the weights computed from vision_config equal what opening the
 * tower holds; one image's bytes cover k3_vision_act_bytes, its patches and its rows; the
 * largest image under K3_VISION.md §2.2's rule has K3_VISION_MAX_PATCHES patches (the size
 * that reaches it, the spec's 8000x8000, and no size of a sample over it); the size of a
 * shape that fits a patch budget is the largest one (one pixel wider does not fit); the
 * admission's refusal names the image and that size (exit 2). */
#include "vision.h"
#include "image.h"
#include "k3.h"
#include "mem.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int fails, checks;
#define CHECK(c, ...) do { checks++; if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); fails++; } } while (0)
#define DIR "tests/models/tiny5_vision"

static long patches(int w, int h) {
    K3ImagePlan p;
    k3_image_plan(w, h, &p);
    return p.patches;
}

static void fit_case(int w, int h, long admit) {
    int fw, fh;
    k3_vision_fit_size(w, h, admit, &fw, &fh);
    CHECK(fw > 0 && fw <= w && patches(fw, fh) <= admit, "%dx%d in %ld: %dx%d has %ld", w, h,
          admit, fw, fh, fw ? patches(fw, fh) : 0);
    const int w1 = fw + 1, h1 = (int)((double)h * w1 / w + 0.5);
    CHECK(fw == w || patches(w1, h1 > 0 ? h1 : 1) > admit, "%dx%d in %ld: %dx%d fits too", w, h,
          admit, w1, h1);
}

int main(void) {
    char err[2048];
    K3VisionConfig c;
    K3Vision *v = NULL;
    CHECK(!k3_vision_read_config(DIR, &c, err, sizeof err), "%s", err);
    CHECK(!k3_vision_open(&v, DIR, 1, err, sizeof err), "%s", err);
    if (v)
        CHECK(k3_vision_config_weight_bytes(&c) == k3_vision_weight_bytes(v),
              "weights %zu from the config, %zu held", k3_vision_config_weight_bytes(&c),
              k3_vision_weight_bytes(v));
    k3_vision_close(v);
    CHECK(k3_vision_read_config("tests/models/tiny5", &c, err, sizeof err) == 2 &&
          strstr(err, "vision_config"), "a model without a tower: %s", err);

    /* one image's bytes: the buffers k3_vision_act_bytes counts (+ grid tables), its
     * patches, its rows */
    K3VisionConfig r;
    k3_vision_release_config(&r);
    const K3VisionConfig *cs[2] = { &r, &c };
    k3_vision_read_config(DIR, &c, err, sizeof err);
    for (int k = 0; k < 2; k++) {
        uint64_t fixed, act, io;
        k3_vision_image_bytes(cs[k], &fixed, &act, &io);
        const long Ls[5] = { 4, 100, 1024, 5184, K3_VISION_MAX_PATCHES };
        for (int i = 0; i < 5; i++) {
            const uint64_t L = (uint64_t)Ls[i];
            CHECK(fixed + L * act >= k3_vision_act_bytes(cs[k], Ls[i]) &&
                  fixed + L * act <= k3_vision_act_bytes(cs[k], Ls[i]) + (1u << 20) * 4,
                  "config %d, L %ld: %llu for the buffers' %zu", k, Ls[i],
                  (unsigned long long)(fixed + L * act), k3_vision_act_bytes(cs[k], Ls[i]));
            CHECK(L * io == 4 * (L * 3 * cs[k]->patch * cs[k]->patch + L / 4 * cs[k]->out),
                  "config %d, L %ld: io %llu", k, Ls[i], (unsigned long long)(L * io));
        }
    }
    /* the release: 886.4 MB of BF16 matrices + 16.8 MB of f32 grid and norms (docs/VISION.md) */
    const size_t rw = k3_vision_config_weight_bytes(&r);
    CHECK(rw == 903233536u, "release weights %zu", rw);

    /* the largest image: reached, the spec's table, and no sampled size over it */
    CHECK(patches(1889, 7377) == K3_VISION_MAX_PATCHES, "1889x7377: %ld", patches(1889, 7377));
    CHECK(patches(8000, 8000) == 66564, "8000x8000: %ld", patches(8000, 8000));
    uint64_t s = 0x9E3779B97F4A7C15ull;
    long most = 0;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        const int w = 1 + (int)(s % K3_IMAGE_MAX_SIDE);
        const int h = 1 + (int)((s >> 20) % K3_IMAGE_MAX_SIDE);
        if ((uint64_t)w * h > K3_IMAGE_MAX_PIXELS) continue;
        const long p = patches(w, h);
        if (p > most) most = p;
    }
    CHECK(most <= K3_VISION_MAX_PATCHES && most > 60000, "sampled most %ld", most);

    /* the size that fits */
    fit_case(1000, 1000, 1463);
    fit_case(1000, 1000, 5184);
    fit_case(4000, 3000, 20000);
    fit_case(7301, 23, 300);
    fit_case(23, 7301, 300);
    fit_case(1889, 7377, 67319);
    int fw, fh;
    k3_vision_fit_size(1000, 1000, 1463, &fw, &fh);
    CHECK(fw == 532 && fh == 532, "1000x1000 in 1463 patches: %dx%d", fw, fh);
    k3_vision_fit_size(1000, 1000, 3, &fw, &fh);
    CHECK(fw == 0 && fh == 0, "under 4 patches: %dx%d", fw, fh);

    /* admission */
    CHECK(k3_vision_admit("a.png", 1000, 1000, 5184, 5184, err, sizeof err) == 0, "at the limit");
    CHECK(k3_vision_admit("a.png", 1000, 1000, 5184, -1, err, sizeof err) == 0, "not planned");
    CHECK(k3_vision_admit("a.png", 1000, 1000, 5184, 1463, err, sizeof err) == K3_ERR_USAGE &&
          strstr(err, "a.png is 1000x1000: 5184 patches") && strstr(err, "at most 532x532"),
          "over: %s", err);
    CHECK(k3_vision_admit("b.png", 100, 100, 64, 0, err, sizeof err) == K3_ERR_USAGE &&
          strstr(err, "b.png (100x100, 64 patches): the memory plan leaves no room"),
          "none: %s", err);
    if (fails) { printf("%d of %d checks failed\n", fails, checks); return 1; }
    printf("test_vision_plan: %d checks passed\n", checks);
    return 0;
}
