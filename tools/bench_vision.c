/* bench_vision.c — the tower's speed check (issue 37 §7): a full-width synthetic tower (the
 * released sizes, random BF16 weights, nothing read from disk) on one image's grid (default
 * 74 x 74: a 1024 x 1024 image), its seconds and GFLOP/s against the FMA peak of the same
 * kernels and threads measured in the same run (the loop of k3 bench-kernels).
 *   bin/k3-vision-bench [--grid GHxGW] [--threads N] [--kernels K] [--layers N] [--runs N]
 * --layers < 27 runs a shorter tower (same per-layer work) for a quick look. */
#include "vision.h"
#include "kernels.h"
#include "roofline.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int gh = 74, gw = 74, threads = 0, layers = 27, runs = 1;
    const char *kern = "auto";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--grid") && i + 1 < argc) sscanf(argv[++i], "%dx%d", &gh, &gw);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kern = argv[++i];
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else { fprintf(stderr, "usage: %s [--grid GHxGW] [--threads N] [--kernels K] "
                       "[--layers N] [--runs N]\n", argv[0]); return 2; }
    }
    char err[512];
    if (k3_kernels_select(kern, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 2; }
    k3_threads_set(threads);
    K3VisionConfig c;
    k3_vision_release_config(&c);
    if (layers >= 1 && layers <= 27) c.layers = layers;
    K3VisionGrid g = { gh, gw };
    if (k3_vision_grid_ok(g, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 2; }
    K3Vision *v;
    if (k3_vision_synthetic(&v, &c, 1, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    long L = (long)gh * gw;
    float *px = malloc(sizeof(float) * (size_t)L * 588);
    float *rows = malloc(sizeof(float) * (size_t)(L / 4) * c.out);
    if (!px || !rows) { fprintf(stderr, "out of memory\n"); return 1; }
    for (long i = 0; i < L * 588; i++) px[i] = (float)((i * 2654435761u) >> 24) / 128.0f - 1.0f;
    char cpu[128];
    k3_cpu_model(cpu, sizeof cpu);
    double peak = k3_fma_peak(k3_threads(), 5, 20000000);
    double f = k3_vision_flops(&c, &g, 1), best = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = k3_now();
        if (k3_vision_run(v, px, &g, 1, rows, 0, err, sizeof err)) {
            fprintf(stderr, "%s\n", err); return 1;
        }
        double s = k3_now() - t0;
        if (best == 0 || s < best) best = s;
    }
    double gf = f / best / 1e9;
    printf("vision tower %dx%d (L %ld, %d layers): %.2f s, %.1f GFLOP/s of %.1f GFLOP/s FMA "
           "peak = %.1f%% (kernels %s, %d threads, %s)\n", gh, gw, L, c.layers, best, gf, peak,
           100 * gf / peak, k3_kernels_name(), k3_threads(), cpu);
    free(px); free(rows);
    k3_vision_close(v);
    return 0;
}
