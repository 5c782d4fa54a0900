/* test_roofline.c — the FLOP model (roofline.h) on tests/models/tiny5's config against a
 * count by hand from its numbers: hidden 256, 13 layers (KDA 0-2 4-6 8-10, MLA 3 7 11 12,
 * layer 0 dense, 1-12 MoE), KDA 4 heads of 32, conv 4; MLA 4 heads, q_lora 96, kv_lora 64,
 * nope 32, rope 16, v 32, output gate; MLP 768; 16 experts, top 4, 2 shared, expert 64,
 * latent 128; vocab 1024. Multiply-adds, then 2 FLOPs each. */
#include "roofline.h"
#include "config.h"
#include <math.h>
#include <stdio.h>

static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

int main(void) {
    K3Config c;
    char err[2048];
    if (k3_config_load("tests/models/tiny5/config.json", &c, err, sizeof err)) {
        printf("  FAIL: %s\n", err);
        return 1;
    }
    /* a KDA layer: q k v g 128x256 each, f_a 32x256, f_b 128x32, b 4x256, o 256x128 */
    const double kda_mm = 4 * 128 * 256 + 32 * 256 + 128 * 32 + 4 * 256 + 256 * 128;
    const double kda_rest = 3 * 128 * 4 + 4 * 4 * (32 * 32);   /* conv taps; delta rule */
    /* an MLA layer: q_a 96x256, q_b 192x96, kv_a 80x256, g 128x256, o 256x128 */
    const double mla_mm = 96 * 256 + 192 * 96 + 80 * 256 + 128 * 256 + 256 * 128;
    const double mla_fix = 4 * (32 + 32) * 64;    /* kv_b's key rows into q, value rows out */
    const double mla_key = 4 * (64 + 16 + 64);    /* a key: latent and rope score, the sum */
    const double dense = 3 * 768 * 256;
    const double moe = 16 * 256 + 3 * 128 * 256 + 2 * 128 * 256;   /* router, shared, latent */
    const double routed = 4 * 3 * 64 * 128;
    const double head = 1024 * 256;
    K3Flops f;
    k3_flops_model(&c, &f);
    CHECK(near(f.trunk, 2 * (9 * kda_mm + 4 * mla_mm + dense + 12 * moe)), "trunk %.0f",
          f.trunk);
    CHECK(near(f.routed, 2 * 12 * routed), "routed %.0f", f.routed);
    CHECK(near(f.kda, 2 * 9 * kda_rest), "kda %.0f", f.kda);
    CHECK(near(f.mla_fixed, 2 * 4 * mla_fix), "mla_fixed %.0f", f.mla_fixed);
    CHECK(near(f.mla_key, 2 * 4 * mla_key), "mla_key %.0f", f.mla_key);
    CHECK(near(f.head, 2 * head), "head %.0f", f.head);
    const double tok = 2 * (9 * (kda_mm + kda_rest) + 4 * (mla_mm + mla_fix) + dense +
                            12 * (moe + routed));
    /* a prefill of 3 from 0 attends to 1 + 2 + 3 keys, one logits row */
    CHECK(near(k3_flops(&c, 0, 3, 1), 3 * tok + 6 * 2 * 4 * mla_key + 2 * head), "prefill 3");
    /* a decoded token at position 10: 11 keys */
    CHECK(near(k3_flops(&c, 10, 1, 1), tok + 11 * 2 * 4 * mla_key + 2 * head), "decode at 10");
    CHECK(k3_flops(&c, 0, 0, 0) == 0, "nothing");
    /* the decode re-probe rule: a lone stream reading 8x the last-level cache a token cannot
     * beat the read bandwidth; drafts, ranks and cache-sized models can */
    const double llc = 32 << 20;
    K3Roofline r = { .decode_bytes = 11e9, .decode_share = 1.12 };
    CHECK(k3_decode_beat_probe(&r, 1, llc), "11 GB a token at 112%% of the bandwidth, lone");
    CHECK(!k3_decode_beat_probe(&r, 0, llc), "the same with drafts accepted");
    r.decode_share = 0.97;
    CHECK(!k3_decode_beat_probe(&r, 1, llc), "97%% of the bandwidth");
    r.decode_share = 3; r.decode_bytes = 8 * llc;
    CHECK(!k3_decode_beat_probe(&r, 1, llc), "8x the cache a token: may run from the caches");
    r.decode_bytes = 8 * llc + 4096;
    CHECK(k3_decode_beat_probe(&r, 1, llc), "just past 8x the cache");
    r.decode_share = 0;
    CHECK(!k3_decode_beat_probe(&r, 1, llc), "no decode step");
    CHECK(k3_llc_bytes() >= 256 * 1024, "the last-level cache: %.0f bytes", k3_llc_bytes());
    printf("tiny5: %.0f FLOPs a token (trunk %.0f, routed %.0f), %.0f a key, head %.0f\n", tok,
           f.trunk, f.routed, f.mla_key, f.head);
    printf("%s\n", fails ? "FAILED" : "all passed");
    return fails != 0;
}
