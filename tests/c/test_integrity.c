/* test_integrity.c — the trunk checksum (XXH64: published test vectors, and the same
 * value for any split of the input) and the value checks of load, pack and doctor
 * (k3_first_nonfinite on F32/BF16/F16 at every position of a block boundary,
 * k3_first_bad_scale). */
#include "tensors.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); fails++; } } while (0)

static void test_sum(void) {
    static const struct { const char *s; uint64_t h; } V[] = {   /* XXH64, seed 0 */
        { "", 0xef46db3751d8e999ull }, { "a", 0xd24ec4f1a98c6e5bull },
        { "abc", 0x44bc2cf5ad770999ull },
        { "Nobody inspects the spammish repetition", 0xfbcea83c8a378bf1ull },
    };
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++)
        CHECK(k3_sum64(V[i].s, strlen(V[i].s)) == V[i].h, "XXH64('%s')", V[i].s);
    const size_t n = 100003;
    unsigned char *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 131 + (i >> 7));
    const uint64_t whole = k3_sum64(b, n);
    for (size_t step = 1; step < 200; step += 13) {          /* pieces of every length */
        K3Sum s;
        k3_sum_init(&s);
        for (size_t o = 0, k = step; o < n; o += k, k = k * 7 % 97 + 1)
            k3_sum_add(&s, b + o, o + k < n ? k : n - o);
        CHECK(k3_sum_end(&s) == whole, "split %zu differs", step);
    }
    b[n / 2] ^= 1;
    CHECK(k3_sum64(b, n) != whole, "a flipped bit is not seen");
    free(b);
}

static void test_values(void) {
    enum { N = 5000 };
    float *f = calloc(N, 4);
    uint16_t *h = calloc(N, 2);
    CHECK(k3_first_nonfinite(ST_F32, f, N * 4) == -1, "zeros are finite");
    CHECK(k3_first_nonfinite(ST_BF16, h, N * 2) == -1, "bf16 zeros are finite");
    const int at[] = { 0, 1, 1023, 1024, 2047, 2048, 4999 };
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        uint32_t nan = 0x7fc00001u, inf = 0xff800000u;
        memcpy(&f[at[i]], i % 2 ? &nan : &inf, 4);
        CHECK(k3_first_nonfinite(ST_F32, f, N * 4) == at[i], "f32 at %d", at[i]);
        f[at[i]] = 3.0f;
        h[at[i]] = i % 2 ? 0x7fc0 : 0xff80;                   /* bf16 NaN, -Inf */
        CHECK(k3_first_nonfinite(ST_BF16, h, N * 2) == at[i], "bf16 at %d", at[i]);
        CHECK(k3_first_nonfinite(ST_F16, h, N * 2) == at[i], "f16 at %d", at[i]);
        h[at[i]] = 0x7f7f;                                    /* bf16 max finite */
        CHECK(k3_first_nonfinite(ST_BF16, h, N * 2) == -1, "bf16 max finite at %d", at[i]);
        h[at[i]] = 0;
    }
    CHECK(k3_first_nonfinite(ST_U8, f, 16) == -1, "U8 is not checked");
    unsigned char sc[300];
    memset(sc, 127, sizeof sc);
    CHECK(k3_first_bad_scale(sc, sizeof sc) == -1, "sane scales");
    sc[257] = 0xFF;
    CHECK(k3_first_bad_scale(sc, sizeof sc) == 257, "0xFF found");
    CHECK(k3_is_scale_tensor("model.layers.1.block_sparse_moe.experts.0.w1.weight_scale"),
          "scale name");
    CHECK(!k3_is_scale_tensor("model.layers.1.block_sparse_moe.experts.0.w1.weight_packed"),
          "packed name");
    free(f); free(h);
}

int main(void) {
    test_sum();
    test_values();
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    printf("test_integrity: all passed\n");
    return 0;
}
