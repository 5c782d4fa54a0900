/* test_tok_real.c — K3's real tokenizer vectors (spec §10.1 single ids, §10.2
 * plain-text ids). Runs when K3_TOK_FILES points at the directory holding K3's
 * tiktoken.model (+ tokenizer_config.json); prints SKIP otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tok.h"

typedef struct { const char *text; int special; int n; int ids[32]; } Vec;

static const Vec V[] = {
    {"The capital of France is", 0, 5, {1008, 10484, 318, 15383, 387}},
    {"getUserName iPhone helloWorld HTTPServer parseJSONResponse", 0, 12,
     {618, 3479, 1263, 1032, 11868, 40493, 14350, 73374, 4022, 9710, 11346, 4323}},
    {"\xE4\xB8\xAD\xE6\x96\x87" "abc \xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C"
     "\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81"
     "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF \xED\x95\x9C\xEA\xB5\xAD"
     "\xEC\x96\xB4 "
     "\xE2\xBA\x80\xE3\x80\x85\xEF\xA4\x80\xF0\xAE\xAF\xB0", 0, 25,
     {16717, 8497, 220, 33845, 378, 2243, 856, 16444, 29194, 6880, 43566, 8831, 78560, 54078,
      28763, 1425, 118, 222, 106101, 1353, 230, 172, 106, 107, 108}},
    {"  leading spaces, double  spaces\tand\ttabs\nnew\n\nlines\r\n", 0, 15,
     {220, 8134, 14803, 11, 4186, 220, 14803, 58443, 5604, 5609, 198, 3514, 382, 11541, 462}},
    {"Numbers: 1234567 3.14159 1,000,000 2026-09-24 0x1F", 0, 29,
     {38587, 25, 220, 6694, 12972, 22, 220, 18, 13, 18702, 6276, 220, 16, 11, 1476, 11, 1476, 220,
      2975, 21, 12, 5142, 12, 1903, 220, 15, 87, 16, 37}},
    {"It's they're we've I'm you'll he'd CAN'T", 0, 8,
     {15881, 19564, 22205, 6806, 13556, 84053, 32330, 64833}},
    {"emoji \xF0\x9F\x99\x82\xF0\x9F\x9A\x80 and caf\xC3\xA9 na\xC3\xAFve Z\xC3\xBCrich "
     "\xEF\xAC\x81", 0, 14,
     {33120, 56774, 5885, 40101, 316, 70591, 7915, 44187, 367, 2970, 14541, 969, 74792, 102746}},
    {"def f(x):\n    return x**2  # comment\n", 0, 13,
     {1166, 285, 3940, 2360, 274, 745, 1288, 381, 17, 220, 1214, 8018, 198}},
    {"path/to/file.go https://example.com/a?b=c", 0, 12,
     {4953, 49520, 34947, 38268, 5425, 1316, 17480, 1304, 18825, 30, 65, 23789}},
    {"\xC5\xBF K '\xC5\xBF 'K", 0, 8, {129, 123, 1040, 542, 129, 123, 542, 42}},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, 8,
     {101908, 101908, 101908, 101908, 101908, 101908, 101908, 101908}},
    {"[BOS]hello[EOS]", 1, 3, {163584, 22931, 163585}},
    /* spec §10.1 single ids */
    {"message", 0, 1, {2778}}, {" role", 0, 1, {6244}}, {"=\"", 0, 1, {878}}, {"\"", 0, 1, {1}},
    {"system", 0, 1, {14062}}, {"user", 0, 1, {2482}}, {"assistant", 0, 1, {69702}},
    {"think", 0, 1, {39964}}, {"response", 0, 1, {12092}}, {"Hello", 0, 1, {19180}},
    {" Paris", 0, 1, {17374}}, {" type", 0, 1, {1798}},
    {"=max", 0, 1, {105281}},
    {"<|open|><|sep|><|close|><|end_of_msg|>", 1, 4, {163587, 163589, 163588, 163586}},
};

int main(void) {
    const char *dir = getenv("K3_TOK_FILES");
    if (!dir || !*dir) {
        printf("SKIP: real K3 tokenizer vectors: K3_TOK_FILES is not set "
               "(point it at K3's tiktoken.model directory)\n");
        return 0;
    }
    char err[512];
    Tok *t = tok_load(dir, err, sizeof err);
    if (!t) { printf("FAIL: %s\n", err); return 1; }
    if (tok_n_ranks(t) != 163584) {
        printf("SKIP: %s has %d ranks, not K3's 163584\n", dir, tok_n_ranks(t));
        tok_free(t); return 0;
    }
    int fails = 0;
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
        size_t n;
        int32_t *v = tok_encode(t, V[i].text, strlen(V[i].text), V[i].special, &n);
        int ok = v && (int)n == V[i].n;
        for (int k = 0; ok && k < V[i].n; k++) ok = v[k] == V[i].ids[k];
        if (!ok) {
            fails++;
            printf("FAIL vector %zu (%.30s): got", i, V[i].text);
            for (size_t k = 0; v && k < n; k++) printf(" %d", v[k]);
            printf("\n");
        }
        free(v);
    }
    if (tok_special_id(t, "<|end_of_msg|>") != 163586 || tok_special_id(t, "[EOS]") != 163585 ||
        tok_special_id(t, "<|media_pad|>") != 163605 ||
        tok_special_id(t, "<|reserved_token_163592|>") != 163592) {
        printf("FAIL special ids\n"); fails++;
    }
    printf("real K3 vectors (spec 10.1/10.2): %zu checked, %d failures\n", sizeof V / sizeof V[0],
           fails);
    tok_free(t);
    return fails != 0;
}
