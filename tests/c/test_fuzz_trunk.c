/* test_fuzz_trunk.c — the packed trunk's reader (k3_trunk_open, src/mem/trunk.c: header,
 * text index of format 2 with a checksum per tensor) under mutation, against the
 * checkpoint it was packed from (tests/models/tiny5f, packed once by k3 pack). The data
 * is laid out once with room before it, so a mutated index is written in place without
 * moving the data. Mutations: bytes, lines (drop, duplicate, swap), fields (boundary
 * numbers, another line's name, offset or checksum), and now and then the binary header.
 * Every input is either refused with a message naming the trunk file that echoes no raw
 * control byte, or opens; an opened trunk then pins every layer (each tensor checked
 * against its checksum), and a pinned layer must hold exactly the checkpoint's bytes for
 * every matrix: an index that binds other bytes to a tensor without a refusal is a finding.
 * Runs in seconds (3000 inputs); `test_fuzz_trunk SECONDS` runs longer.
 *
 * Built with -DK3_LIBFUZZER -DFUZZ_TARGET_trunk it is the libFuzzer target trunk. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "../../src/mem/internal.h"
#include "cli.h"
#include "dio.h"
#define FJ_OWN_MUTATOR
#include "fuzz_json.h"
#include "tensors.h"
#include "util.h"

#define MODEL "tests/models/tiny5f"
#define ROOM 65536                        /* bytes the index may grow by (max_len) */

static char g_dir[300], g_file[340];
static K3Model g_m;
static K3Layer *g_layers;                 /* the model's layers as opened (shard mappings) */
static char *g_index;                     /* the seed index, offsets moved by ROOM */
static size_t g_nindex;
static uint64_t g_data;                   /* where the data starts in the harness's file */
static int g_fd = -1;


static void pwrite_all(int fd, const void *p, size_t n, uint64_t off) {
    const char *s = p;
    while (n) {
        ssize_t w = pwrite(fd, s, n, (off_t)off);
        if (w <= 0) fj_fail_now(g_file, "cannot write");
        s += w; n -= (size_t)w; off += (uint64_t)w;
    }
}

/* Packs the model, then lays the trunk out again with its data ROOM bytes further on. */
static void setup(void) {
    char err[4096], src[400];
    const char *tmp = fj_tmpdir();
    snprintf(g_dir, sizeof g_dir, "%s/k3_fuzz_trunk_%d", tmp, (int)getpid());
    snprintf(g_file, sizeof g_file, "%s/trunk.k3", g_dir);
    snprintf(src, sizeof src, "%s/src", g_dir);
    if (mkdir(g_dir, 0700) || mkdir(src, 0700)) fj_fail_now(g_dir, "cannot create");
    char *argv[] = { "pack", MODEL, src, "--quiet", NULL };
    if (k3_pack_main(4, argv)) fj_fail_now("k3 pack", MODEL);
    char sp[420];
    snprintf(sp, sizeof sp, "%s/trunk.k3", src);
    size_t n = 0;
    unsigned char *f = (unsigned char *)k3_slurp(sp, (size_t)1 << 30, &n, err, sizeof err);
    if (!f || n < 16) fj_fail_now("packed trunk", err);
    unlink(sp); rmdir(src);
    uint64_t ilen = 0;
    for (int i = 0; i < 8; i++) ilen |= (uint64_t)f[8 + i] << (8 * i);
    const uint64_t d0 = k3_up4k(16 + ilen);
    g_data = d0 + ROOM;
    /* the index again, every offset and the file size moved by ROOM */
    g_index = malloc(ilen * 2 + 64);
    char *line = malloc(ilen + 1);
    size_t o = 0;
    for (size_t a = 16; a < 16 + ilen;) {
        size_t e = a;
        while (e < 16 + ilen && f[e] != '\n') e++;
        memcpy(line, f + a, e - a); line[e - a] = 0;
        unsigned long long v, off;
        int L, pos = 0;
        if (sscanf(line, "file_size %llu", &v) == 1)
            o += (size_t)sprintf(g_index + o, "file_size %llu\n", v + ROOM);
        else if (sscanf(line, "t %d %llu %n", &L, &off, &pos) == 2 && pos)
            o += (size_t)sprintf(g_index + o, "t %d %llu %s\n", L, off + ROOM, line + pos);
        else o += (size_t)sprintf(g_index + o, "%s\n", line);
        a = e + 1;
    }
    free(line);
    g_nindex = o;
    g_fd = open(g_file, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (g_fd < 0) fj_fail_now(g_file, "cannot create");
    pwrite_all(g_fd, f + d0, n - d0, g_data);
    free(f);
    if (k3_model_open(&g_m, MODEL, NULL, err, sizeof err)) fj_fail_now("model", err);
    const int NL = g_m.cfg.num_hidden_layers;
    g_layers = malloc(sizeof *g_layers * (size_t)NL);
    memcpy(g_layers, g_m.layers, sizeof *g_layers * (size_t)NL);
}
/* The seed opens and pins to the checkpoint's bytes (an extra newline: not the seed itself,
 * which check_trunk does not pin again). */
static int check_trunk(const unsigned char *d, size_t n);
static void check_seed(void) {
    unsigned char *b = malloc(g_nindex + 1);
    memcpy(b, g_index, g_nindex);
    b[g_nindex] = '\n';
    if (!check_trunk(b, g_nindex + 1)) fj_fail_now("trunk seed", "refused");
    free(b);
}
static void cleanup(void) {
    if (g_fd >= 0) close(g_fd);
    unlink(g_file);
    rmdir(g_dir);
}

/* The head of the file: "K3TRUNK1", the index length, the index, zeros up to the data.
 * raw: d is the head itself (header included). */
static void write_head(const unsigned char *d, size_t n, int raw) {
    static unsigned char *b;
    static size_t last = 0;                    /* bytes written by the previous input */
    if (!b) { b = calloc(1, g_data); last = g_data; }
    size_t len;
    if (raw) { len = n < g_data ? n : g_data; memcpy(b, d, len); }
    else {
        if (n > g_data - 16) n = g_data - 16;
        memcpy(b, "K3TRUNK1", 8);
        for (int i = 0; i < 8; i++) b[8 + i] = (unsigned char)((uint64_t)n >> (8 * i));
        memcpy(b + 16, d, n);
        len = 16 + n;
    }
    if (len < last) memset(b + len, 0, last - len);   /* zeros up to the data, as before */
    pwrite_all(g_fd, b, len > last ? len : last, 0);
    last = len;
}

static const char *nm(const K3Mat *M) { return M->w ? "" : "(none)"; }

/* 1 if the trunk opened and pinned. */
static int check_trunk(const unsigned char *d, size_t n) {
    char err[1024] = "";
    int raw = n >= 8 && !memcmp(d, "K3TRUNK1", 8);
    write_head(d, n, raw);
    K3Trunk *t = k3_trunk_open(&g_m, g_dir, err, sizeof err);
    if (!t) {
        if (!err[0]) fj_fail_now("trunk refusal", "no message");
        if (!strstr(err, g_dir)) fj_fail_now("trunk refusal does not name the file", err);
        if (fj_raw_control(err)) fj_fail_now("trunk refusal echoes a raw control byte", err);
        return 0;
    }
    const int NL = g_m.cfg.num_hidden_layers;
    if (!raw && n == g_nindex && !memcmp(d, g_index, n)) {   /* the seed: pinned in setup */
        k3_trunk_close(t);
        return 1;
    }
    /* pin it all: the stream reads every matrix once and checks its checksum */
    K3MemStats st;
    memset(&st, 0, sizeof st);
    K3IoMeter io = { .st = &st };
    pthread_mutex_init(&io.mu, NULL);
    K3StreamOpts so = { .pin_bytes = UINT64_MAX, .piece_bytes = 1 << 20,
                        .window_bytes = 4 << 20, .io_depth = 1, .max_T = 1 };
    K3Stream *sm = k3_stream_open(&g_m, t, &so, &st, &io, err, sizeof err);
    int rc = sm ? 0 : 1;
    if (rc) {
        if (!strstr(err, g_dir)) fj_fail_now("trunk pin refusal does not name the file", err);
        if (fj_raw_control(err)) fj_fail_now("trunk pin refusal echoes a raw control byte", err);
    } else {
        /* every bound matrix holds the checkpoint's bytes */
        for (int L = 0; L < NL; L++) {
            const K3Layer *ly = k3_stream_acquire(sm, L, err, sizeof err);
            if (!ly) fj_fail_now("trunk acquire of a pinned layer", err);
            for (int i = 0; i < k3_n_layer_mats; i++) {
                if (!k3_mat_in_layer(&k3_layer_mats[i], &g_m.cfg, L)) continue;
                const K3Mat *a = k3_mat_field((K3Layer *)ly, &k3_layer_mats[i]);
                const K3Mat *b = k3_mat_field(&g_layers[L], &k3_layer_mats[i]);
                size_t nb = (size_t)b->rows * b->cols * (b->type == K3_W_F32 ? 4 : 2);
                if (!a->w || !b->w || memcmp(a->w, b->w, nb)) {
                    char why[600], p[400];
                    snprintf(p, sizeof p, "%s/k3_fuzz_trunk_failed.bin", fj_tmpdir());
                    FILE *f = fopen(p, "wb");
                    if (f) { fwrite(d, 1, n, f); fclose(f); }
                    snprintf(why, sizeof why, "layer %d, %s%s: other bytes than the "
                             "checkpoint's, not refused (input in %s)", L,
                             k3_layer_mats[i].suffix, nm(a), p);
                    fj_fail_now("trunk", why);
                }
            }
            k3_stream_release(sm, L);
        }
        k3_stream_close(sm);
    }
    pthread_mutex_destroy(&io.mu);
    k3_trunk_close(t);
    memcpy(g_m.layers, g_layers, sizeof *g_layers * (size_t)NL);
    return !rc;
}

/* ---- mutations shared by both drivers ---- */
static const char *const FIELDS[] = { "-1", "-2", "0", "1", "8", "9", "11", "4096", "4095",
    "18446744073709551615", "18446744073709551616", "9223372036854775807", "ffffffffffffffff",
    "0000000000000000", "F32", "BF16", "F16", "U8", "", "x", "1e3", "0x10",
    "language_model.model.layers.0.self_attn.A_log", "\x1b[2J", "k3trunk", "2" };

/* Replaces one space-separated field of one line by a boundary value or by the same field
 * of another line. Returns the new length or 0. */
static size_t mutate_field(const char *in, size_t n, char *out, size_t cap, FjRand rnd) {
    size_t starts[4096], nl = 0;
    for (size_t i = 0; i < n && nl < 4096; i++)
        if (i == 0 || in[i - 1] == '\n') starts[nl++] = i;
    if (!nl) return 0;
    size_t a = starts[rnd() % nl], e = a;
    while (e < n && in[e] != '\n') e++;
    size_t fs[16], nf = 0;                           /* field starts in [a, e) */
    for (size_t i = a; i < e && nf < 16; i++)
        if (i == a || in[i - 1] == ' ') fs[nf++] = i;
    if (!nf) return 0;
    size_t k = rnd() % nf, fa = fs[k], fe = fa;
    while (fe < e && in[fe] != ' ') fe++;
    const char *rep; size_t rl;
    char other[256];
    if (rnd() % 2) { rep = FIELDS[rnd() % FJ_N(FIELDS)]; rl = strlen(rep); }
    else {                                           /* the same field of another line */
        size_t b = starts[rnd() % nl], f = b, i = 0;
        while (i < k && f < n && in[f] != '\n') { if (in[f] == ' ') i++; f++; }
        size_t g = f;
        while (g < n && in[g] != ' ' && in[g] != '\n') g++;
        rl = g - f < sizeof other ? g - f : sizeof other - 1;
        memcpy(other, in + f, rl); rep = other;
    }
    size_t m = n - (fe - fa) + rl;
    if (m > cap) return 0;
    memcpy(out, in, fa); memcpy(out + fa, rep, rl); memcpy(out + fa + rl, in + fe, n - fe);
    return m;
}

static size_t mutate_index(unsigned char *d, size_t n, size_t max, FjRand rnd) {
    static char *tmp;
    if (!tmp) tmp = malloc(ROOM + 4096);
    size_t cap = max < ROOM + 4096 ? max : ROOM + 4096, m = 0;
    switch (rnd() % 3) {
    case 0: m = fj_mutate_lines((const char *)d, n, tmp, cap, rnd); break;
    default: m = mutate_field((const char *)d, n, tmp, cap, rnd); break;
    }
    if (m) memcpy(d, tmp, m);
    return m;
}

#ifdef K3_LIBFUZZER
#ifndef FUZZ_TARGET_trunk
#error "define FUZZ_TARGET_trunk"
#endif
/* The seed as a raw head: header (index length ilen) and index. */
static size_t raw_head(unsigned char *d, size_t max, uint64_t ilen) {
    if (16 + g_nindex > max) return 0;
    memcpy(d, "K3TRUNK1", 8);
    for (int i = 0; i < 8; i++) d[8 + i] = (unsigned char)(ilen >> (8 * i));
    memcpy(d + 16, g_index, g_nindex);
    return 16 + g_nindex;
}

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
static uint64_t lf_state;
static uint64_t lf_rnd(void) {
    lf_state ^= lf_state << 13; lf_state ^= lf_state >> 7; lf_state ^= lf_state << 17;
    return lf_state;
}
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    setup();
    atexit(cleanup);
    check_seed();
    return 0;
}
/* A seed (now and then as a raw head), else a line or field mutation, else libFuzzer's. */
size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t n, size_t max, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t n, size_t max, unsigned int seed) {
    lf_state = ((uint64_t)seed << 32 | seed) ^ 0x9E3779B97F4A7C15ull;
    uint64_t r = lf_rnd() % 16;
    if (n == 0 || r == 0) {
        if (lf_rnd() % 4 == 0) {
            size_t m = raw_head(d, max, g_nindex);
            if (m) return m;
        }
        if (g_nindex <= max) { memcpy(d, g_index, g_nindex); return g_nindex; }
    }
    if (r < 8 && !(n >= 8 && !memcmp(d, "K3TRUNK1", 8))) {
        size_t m = mutate_index(d, n, max, lf_rnd);
        if (m) return m;
    }
    return LLVMFuzzerMutate(d, n, max);
}
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    check_trunk(d, n);
    return 0;
}
#else
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11;
}

static void mutate_bytes(unsigned char *b, size_t *np, size_t cap) {
    size_t n = *np, pos = n ? rnd() % n : 0;
    switch (rnd() % 4) {
    case 0: if (n) b[pos] = (unsigned char)rnd(); break;
    case 1: if (n) b[pos] ^= (unsigned char)(1u << (rnd() % 8)); break;
    case 2: if (n) { memmove(b + pos, b + pos + 1, n - pos - 1); n--; } break;
    default: if (n < cap) { memmove(b + pos + 1, b + pos, n - pos); b[pos] = "\n 0-x"[rnd() % 5];
                            n++; }
    }
    *np = n;
}

/* Refusals the reader must give, each naming what is wrong. */
static void expect(const char *idx, size_t n, const char *needle) {
    if (n > g_data - 16) fj_fail_now("trunk expect", "index too long");
    char err[1024] = "";
    write_head((const unsigned char *)idx, n, 0);
    K3Trunk *t = k3_trunk_open(&g_m, g_dir, err, sizeof err);
    if (t || !strstr(err, needle) || fj_raw_control(err)) {
        printf("FAIL trunk refusal: expected '%s', got %s\n", needle, t ? "an open trunk" : err);
        exit(1);
    }
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    setup();
    check_seed();
    size_t cap = g_nindex + ROOM / 2;
    unsigned char *buf = malloc(cap);
    /* a checksum of another matrix (one the run reads from the trunk: norms come from the
     * shards): the pin refuses it, naming the tensor */
    memcpy(buf, g_index, g_nindex);
    buf[g_nindex] = 0;
    char *l = strstr((char *)buf, "\nt 0 ");
    while (l) {
        char *e = strchr(l + 1, '\n'), *b16 = strstr(l + 1, " BF16 2 ");
        if (b16 && (!e || b16 < e)) break;
        l = strstr(l + 1, "\nt 0 ");
    }
    if (!l) fj_fail_now("trunk seed", "no layer 0 matrix line");
    char *sum = l + 1;
    for (int i = 0; i < 4; i++) sum = strchr(sum, ' ') + 1;
    sum[0] = sum[0] == '0' ? '1' : '0';
    if (check_trunk(buf, g_nindex)) fj_fail_now("trunk", "a wrong checksum was pinned");
    expect("k3trunk 1\n", 10, "trunk format 1");
    expect("k3trunk 2\nt 0 1 2 3 F32 1 5 \x1b[2Jx\n", 35, "tensor '\\x1b[2Jx' does not match");
    expect("k3trunk 2\nt 0 \x1b[2J\n", 18, "malformed index line 't 0 \\x1b[2J'");
    /* two layers' lines of the same matrix with their layer numbers swapped: each
     * checksum still matches its bytes, so only the name's layer tells */
    memcpy(buf, g_index, g_nindex); buf[g_nindex] = 0;
    int swapped = 0;
    char *first4 = strstr((char *)buf, "\nt 4 ");      /* not the first: it sets the start */
    for (char *a = first4 ? strstr(first4 + 1, "\nt 4 ") : NULL; a && !swapped;
         a = strstr(a + 1, "\nt 4 ")) {
        char *nm4 = strstr(a, "layers.4."), *e = strchr(a + 1, '\n');
        if (!nm4 || !e) break;
        char want[300];
        snprintf(want, sizeof want, "layers.5.%.*s\n", (int)(e - nm4 - 9), nm4 + 9);
        char *b5 = strstr((char *)buf, want);
        if (!b5) continue;
        while (b5 > (char *)buf && b5[-1] != '\n') b5--;
        a[3] = '5'; b5[2] = '4'; swapped = 1;
    }
    if (!swapped) fj_fail_now("trunk seed", "no matrix in both layers 4 and 5");
    expect((char *)buf, g_nindex, "is listed under another layer");
    /* an offset that wraps: off + nbytes overflows into the file's range */
    memcpy(buf, g_index, g_nindex); buf[g_nindex] = 0;
    char *big = strstr((char *)buf, " 00000000000000221184 ");
    if (!big) fj_fail_now("trunk seed", "no 221184-byte tensor");
    char *o = big - 1;
    while (*o != ' ') o--;
    char *line2 = malloc(g_nindex + 64);
    snprintf(line2, g_nindex + 64, "%.*s18446744073709547520%s", (int)(o + 1 - (char *)buf),
             (char *)buf, big);
    expect(line2, strlen(line2), "out of range");
    free(line2);
    printf("trunk refusals: ok\n");
    long iters = 0, ok = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (iters < 3000 || clock() < end) {      /* make test: 3000 inputs, always the same */
        for (int j = 0; j < 50; j++, iters++) {
            size_t n = g_nindex;
            memcpy(buf, g_index, n);
            int m = 1 + (int)(rnd() % 3), raw = rnd() % 16 == 0;
            for (int i = 0; i < m; i++) {
                size_t k = rnd() % 3 ? mutate_index(buf, n, cap, rnd) : 0;
                if (k) n = k; else mutate_bytes(buf, &n, cap);
            }
            if (raw) {                                     /* the binary header too */
                unsigned char *h = malloc(n + 16);
                uint64_t il = rnd() % 2 ? n : rnd() % 4 ? rnd() % (2 * n + 1) : rnd();
                memcpy(h, "K3TRUNK1", 8);
                for (int i = 0; i < 8; i++) h[8 + i] = (unsigned char)(il >> (8 * i));
                memcpy(h + 16, buf, n);
                ok += check_trunk(h, n + 16);
                free(h);
            } else ok += check_trunk(buf, n);
        }
    }
    free(buf);
    cleanup();
    printf("test_fuzz_trunk: %ld mutated trunk indexes, %ld opened and pinned (every matrix "
           "the checkpoint's bytes), no crash, every refusal naming the trunk file\n", iters, ok);
    return 0;
}
#endif
