/* test_fuzz_state.c — the saved chat state reader (chat_state_load, src/chat/chat_state.c)
 * under mutation. The state is checked against an open engine, so the harness opens one:
 * tests/models/tiny5f and tests/tok/tiny, two greedy turns, their states saved (thinking
 * off and on) as the seeds. Every mutated file is loaded twice: as it is, and with its
 * trailing checksum recomputed (else nearly every mutation stops at the checksum and the
 * fields before it go unchecked). Each input is either refused with exit code 1 or 2, a
 * message naming the file that echoes no raw control byte, the conversation and the state
 * left as they were; or it loads, and then the state holds exactly the ids it claims
 * (pos == nfed, a prefix of the transcript) and saves back to a file that loads again to
 * the same ids. Inputs go through chat_state_load_bytes (no file writes), the fixed cases
 * and the reloads through chat_state_load. Then the draft context's trailer (--draft):
 * a state saved on tests/models/tiny5 with its synthetic draft, 600 mutations of the trailer.
 * A third seed is a version-2 state (images): a chat on tests/models/tiny5_vision with a
 * 48x40 image (tests/images/jpg_prog_420.jpg, 4 rows) in its first message, so the image
 * record reader (r_images) is fuzzed directly; its messages are then a resumed history's
 * (the image records taken off), as a state file meets them.
 * Runs in seconds (3000 inputs); `test_fuzz_state SECONDS` runs longer.
 *
 * Built with -DK3_LIBFUZZER -DFUZZ_TARGET_chat_state it is the libFuzzer target chat_state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include "chat/chat.h"
#include "util.h"
#define FJ_OWN_MUTATOR
#include "fuzz_json.h"

#define MODEL "tests/models/tiny5f"
#define TOKDIR "tests/tok/tiny"

static char g_path[300], g_path2[300];
#define NSEED 3                                 /* thinking off, on; off with an image */
#define IMG_SEED 2
static Chat g_chat[NSEED];
static ChatLog g_keep[NSEED];                   /* each conversation as it was saved */
static int g_full;                              /* resave the seeds too */
static char g_err[2048];                        /* the last refusal */
static unsigned char *g_seed[NSEED];
static size_t g_nseed[NSEED], g_head[NSEED];    /* file bytes, bytes before the tensors */

/* A resumed history's messages: their images' places, not their records (a state file
 * gives those back; a message that has them refuses another's). */
static void drop_images(Chat *c) {
    for (int i = 0; i < c->log.n; i++) {
        ChatMsg *m = &c->log.v[i];
        for (int j = 0; j < m->n_img; j++) k3_image_in_free(&m->img[j]);
        free(m->img);
        m->img = NULL; m->n_img = 0;
    }
}



static unsigned char *read_all(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) fj_fail_now(p, "cannot read");
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(sz > 0 ? (size_t)sz : 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) fj_fail_now(p, "cannot read");
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* A deep copy of the messages' exact records, to restore after each input. */
static void keep_log(const ChatLog *l, ChatLog *k) {
    k->n = l->n; k->cap = l->n;
    k->v = calloc((size_t)l->n, sizeof *k->v);
    for (int i = 0; i < l->n; i++) {
        k->v[i] = l->v[i];
        if (l->v[i].gen_ids) {
            k->v[i].gen_ids = malloc(sizeof(int32_t) * (size_t)(l->v[i].n_gen + 1));
            memcpy(k->v[i].gen_ids, l->v[i].gen_ids, sizeof(int32_t) * (size_t)l->v[i].n_gen);
        }
    }
}
static int same_records(const ChatLog *l, const ChatLog *k) {
    for (int i = 0; i < l->n; i++) {
        const ChatMsg *a = &l->v[i], *b = &k->v[i];
        if (!a->gen_ids != !b->gen_ids) return 0;
        if (!a->gen_ids) continue;
        if (a->n_gen != b->n_gen || a->gen_thinking != b->gen_thinking ||
            a->gen_state != b->gen_state ||
            memcmp(a->gen_ids, b->gen_ids, sizeof(int32_t) * (size_t)a->n_gen))
            return 0;
    }
    return 1;
}
static void restore_records(ChatLog *l, const ChatLog *k) {
    for (int i = 0; i < l->n; i++) {
        ChatMsg *a = &l->v[i];
        const ChatMsg *b = &k->v[i];
        free(a->gen_ids);
        a->gen_ids = NULL;
        if (b->gen_ids) {
            a->gen_ids = malloc(sizeof(int32_t) * (size_t)(b->n_gen + 1));
            memcpy(a->gen_ids, b->gen_ids, sizeof(int32_t) * (size_t)b->n_gen);
        }
        a->n_gen = b->n_gen; a->gen_thinking = b->gen_thinking; a->gen_state = b->gen_state;
    }
}

static void open_chat_on(Chat *c, int thinking, const char *model) {
    char err[4096];
    memset(c, 0, sizeof *c);
    c->model_dir = model; c->tok_dir = TOKDIR; c->kernels = "auto";
    c->gen = 6; c->ctx = 4096; c->thinking = thinking; c->sp.greedy = 1; c->seed = 7;
    snprintf(c->effort, sizeof c->effort, "max");
    c->tok = tok_load(TOKDIR, err, sizeof err);
    if (!c->tok) fj_fail_now("tokenizer", err);
    if (xtml_ids(c->tok, &c->ids, err, sizeof err)) fj_fail_now("xtml ids", err);
    if (k3_engine_open_resident(&c->eng, model, K3_PREFILL_CHUNK, c->ctx, err, sizeof err))
        fj_fail_now("engine", err);
    const K3SchedOpts so = { 1, 0, NULL, c->ctx, 0 };   /* chat's batch of one, resident */
    if (k3_sched_open(&c->sch, &c->eng, &so, err, sizeof err)) fj_fail_now("scheduler", err);
    c->q = k3_sched_join(c->sch, c);
    c->st = c->q ? c->q->st : NULL;
    c->logits = c->eng.rs.logits;
    if (!c->st) fj_fail_now("state", "out of memory");
}

static void open_chat(Chat *c, int thinking) { open_chat_on(c, thinking, MODEL); }

static void setup(void) {
    const char *tmp = fj_tmpdir();
    char err[1024];
    snprintf(g_path, sizeof g_path, "%s/k3_fuzz_state_%d.bin", tmp, (int)getpid());
    snprintf(g_path2, sizeof g_path2, "%s/k3_fuzz_state_%d_b.bin", tmp, (int)getpid());
    k3_threads_set(1);
    /* the replies and turn figures: kept out of the fuzzer's output */
    fflush(stdout);
    fflush(stderr);
    int out = dup(1), errfd = dup(2), null = open("/dev/null", O_WRONLY);
    if (out < 0 || errfd < 0 || null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
        fj_fail_now("stdout", "cannot redirect");
    close(null);
    for (int k = 0; k < NSEED; k++) {
        Chat *c = &g_chat[k];
        if (k == IMG_SEED) {
            open_chat_on(c, 0, "tests/models/tiny5_vision");
            if (chat_image_add(c, "tests/images/jpg_prog_420.jpg"))
                fj_fail_now("image seed", "/image failed");
        } else open_chat(c, k);
        if (chat_turn(c, "Hello there") || chat_turn(c, "Second one"))
            fj_fail_now("seed", "a chat turn failed");
        if (chat_state_save(c, g_path, err, sizeof err)) fj_fail_now("seed save", err);
        g_seed[k] = read_all(g_path, &g_nseed[k]);
        const K3Config *cf = &c->eng.m.cfg;
        size_t tensors = 0;
        for (int L = 0; L < cf->num_hidden_layers; L++)
            tensors += cf->is_kda[L]
                ? 4 * (size_t)cf->kda_num_heads * cf->kda_head_dim *
                      (cf->kda_head_dim + 3 * (size_t)(cf->short_conv_kernel_size - 1))
                : 4 * (size_t)c->st->pos * (size_t)(cf->kv_lora_rank + cf->qk_rope_head_dim);
        if (tensors + 8 >= g_nseed[k]) fj_fail_now("seed", "shorter than its tensors");
        g_head[k] = g_nseed[k] - tensors - 8;
        if (k == IMG_SEED && g_seed[k][8] != 2) fj_fail_now("image seed", "not version 2");
        drop_images(c);
        keep_log(&c->log, &g_keep[k]);
    }
    fflush(stdout); fflush(stderr);
    dup2(out, 1); dup2(errfd, 2);
    close(out); close(errfd);
}
static void cleanup(void) { unlink(g_path); unlink(g_path2); }

/* Loads d as the state of chat k; checks what a refusal leaves and what a load holds.
 * 1 if it loaded. */
static int check_one(int k, const unsigned char *d, size_t n) {
    Chat *c = &g_chat[k];
    char err[2048] = "";
    int32_t *fed0 = c->fed;
    size_t nfed0 = c->nfed;
    int rc = chat_state_load_bytes(c, g_path, d, n, err, sizeof err);
    snprintf(g_err, sizeof g_err, "%s", err);
    if (rc) {
        if (rc != 1 && rc != 2) fj_fail_now("state", "refused with an exit code other than 1 or 2");
        if (!strstr(err, g_path)) fj_fail_now("state refusal does not name the file", err);
        if (fj_raw_control(err)) fj_fail_now("state refusal echoes a raw control byte", err);
        if (c->st->pos != 0) fj_fail_now("state refusal", "left positions in the state");
        if (c->fed != fed0 || c->nfed != nfed0) fj_fail_now("state refusal", "changed the fed ids");
        if (!same_records(&c->log, &g_keep[k]))
            fj_fail_now("state refusal", "changed the exact records of the conversation");
        return 0;
    }
    if ((size_t)c->st->pos != c->nfed) fj_fail_now("state load", "positions != fed ids");
    int32_t *ids = NULL;
    size_t m = 0;
    if (chat_render(c, &ids, &m)) fj_fail_now("state load", "the transcript does not render");
    if (c->nfed > m || memcmp(ids, c->fed, sizeof *ids * c->nfed))
        fj_fail_now("state load", "the fed ids are not a prefix of the transcript");
    free(ids);
    /* saves and loads back to the same ids (the seeds did in check_seeds) */
    if (!g_full && n == g_nseed[k] && !memcmp(d, g_seed[k], n)) {
        drop_images(c);
        restore_records(&c->log, &g_keep[k]);
        return 1;
    }
    int32_t *fed1 = malloc(sizeof *fed1 * (c->nfed + 1));
    size_t nfed1 = c->nfed;
    memcpy(fed1, c->fed, sizeof *fed1 * nfed1);
    if (chat_state_save(c, g_path2, err, sizeof err)) fj_fail_now("state resave", err);
    drop_images(c);                             /* the reload gives them back */
    if (chat_state_load(c, g_path2, err, sizeof err)) fj_fail_now("state reload", err);
    if (c->nfed != nfed1 || memcmp(c->fed, fed1, sizeof *fed1 * nfed1))
        fj_fail_now("state reload", "other ids than the first load");
    free(fed1);
    drop_images(c);
    restore_records(&c->log, &g_keep[k]);
    return 1;
}

static void check_seeds(void) {
    g_full = 1;
    for (int k = 0; k < NSEED; k++)
        if (check_one(k, g_seed[k], g_nseed[k]) != 1) fj_fail_now("state seed", "refused");
    g_full = 0;
}

/* As given, then with the trailing checksum made right. */
static int check_state(int k, const unsigned char *d, size_t n) {
    int ok = check_one(k, d, n);
    if (n >= 8) {
        unsigned char *b = malloc(n);
        memcpy(b, d, n);
        uint64_t s = k3_state_sum(b, n - 8);
        for (int i = 0; i < 8; i++) b[n - 8 + i] = (unsigned char)(s >> (8 * i));
        if (memcmp(b, d, n)) ok += check_one(k, b, n);
        free(b);
    }
    return ok;
}

#ifdef K3_LIBFUZZER
#ifndef FUZZ_TARGET_chat_state
#error "define FUZZ_TARGET_chat_state"
#endif
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    setup();
    atexit(cleanup);
    check_seeds();
    return 0;
}
/* An input is a selector byte and the head of a state file: everything before the tensors
 * (header, fingerprint, options, ids, records), where the reader decides; the harness
 * appends the seed's tensor bytes and the checksum. Selector: bit 0 the chat (thinking
 * off / on), bit 7 the image chat instead (version 2), bit 1 the seed's checksum as stored
 * (else the right one for the bytes), bits 2-6 cut that many times 37 bytes off the tensors
 * (truncations). 1 in 16 a seed's head, else libFuzzer's byte mutations. */
size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t n, size_t max, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t n, size_t max, unsigned int seed) {
    if (n < 2 || seed % 16 == 0) {
        int k = (int)(seed / 16 % NSEED);
        if (g_head[k] + 1 <= max) {
            d[0] = (uint8_t)(k == IMG_SEED ? 0x80 : k);
            memcpy(d + 1, g_seed[k], g_head[k]);
            return g_head[k] + 1;
        }
    }
    return LLVMFuzzerMutate(d, n, max);
}
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static unsigned char *f;
    static size_t cap;
    if (!n) return 0;
    const int k = d[0] & 0x80 ? IMG_SEED : d[0] & 1;
    const size_t h = n - 1, tl = g_nseed[k] - 8 - g_head[k],
                 cut = (size_t)((d[0] >> 2) & 31) * 37;
    const size_t t = cut < tl ? tl - cut : 0, m = h + t + 8;
    if (m > cap) { free(f); cap = m; f = malloc(cap); }
    memcpy(f, d + 1, h);
    memcpy(f + h, g_seed[k] + g_head[k], t);
    memcpy(f + h + t, g_seed[k] + g_nseed[k] - 8, 8);
    /* the right checksum only where the reader got that far: hashing every input's whole
     * file would be most of the time spent */
    if (check_one(k, f, m) || (d[0] & 2) || !strstr(g_err, "checksum mismatch")) return 0;
    uint64_t sum = k3_state_sum(f, h + t);
    for (int i = 0; i < 8; i++) f[h + t + i] = (unsigned char)(sum >> (8 * i));
    check_one(k, f, m);
    return 0;
}
#else
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11;
}

/* Byte flips and boundary words, mostly in the header and records before the tensors
 * (where the reader makes its decisions), sometimes anywhere; cuts and insertions. */
static void mutate(unsigned char *b, size_t *np, size_t cap, size_t head) {
    static const uint32_t WORDS[] = { 0, 1, 2, 0x7fffffffu, 0x80000000u, 0xffffffffu,
                                      0xfffffffeu, 4096, 1u << 30, (1u << 30) + 1, 255, 256 };
    size_t n = *np;
    if (!n) return;
    size_t lim = rnd() % 4 && head < n ? head : n, pos = rnd() % lim;
    switch (rnd() % 6) {
    case 0: b[pos] ^= (unsigned char)(1u << (rnd() % 8)); break;
    case 1: b[pos] = (unsigned char)rnd(); break;
    case 2: {
        uint32_t w = WORDS[rnd() % (sizeof WORDS / sizeof *WORDS)];
        pos &= ~(size_t)3;
        for (int i = 0; i < 4 && pos + (size_t)i < n; i++) b[pos + i] = (unsigned char)(w >> 8 * i);
        break;
    }
    case 3: n = rnd() % n; break;
    case 4: { size_t l = 1 + rnd() % 16; if (pos + l > n) l = n - pos;
              memmove(b + pos, b + pos + l, n - pos - l); n -= l; break; }
    default: { size_t l = 1 + rnd() % 16;
               if (n + l <= cap) { memmove(b + pos + l, b + pos, n - pos);
                                   for (size_t i = 0; i < l; i++) b[pos + i] = (unsigned char)rnd();
                                   n += l; } }
    }
    *np = n;
}

/* Refusals the mutations must also reach, with their exit codes (README "Exit codes"). */
static void expect(int k, const unsigned char *d, size_t n, int want, const char *needle) {
    char err[2048] = "";
    fj_write_file(g_path, d, n);              /* the file reader here, the bytes one elsewhere */
    int rc = chat_state_load(&g_chat[k], g_path, err, sizeof err);
    if (rc != want || !strstr(err, needle)) {
        printf("FAIL state refusal: expected exit %d and '%s', got %d: %s\n", want, needle, rc,
               err);
        exit(1);
    }
}

/* The draft context's trailer (--draft): a chat on tests/models/tiny5 with its synthetic
 * draft, two turns saved (the trailer after the state's checksum), then the trailer's bytes
 * mutated, as given and with its own checksum made right: refused (exit 1, the file named,
 * the state and the draft's context empty), or loaded with the draft's context covering the
 * state exactly or empty (another identity or shape). */
static void draft_trailers(void) {
    static Chat c;
    char err[2048];
    fflush(stdout); fflush(stderr);
    int out = dup(1), errfd = dup(2), null = open("/dev/null", O_WRONLY);
    if (out < 0 || errfd < 0 || null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
        fj_fail_now("stdout", "cannot redirect");
    close(null);
    open_chat_on(&c, 0, "tests/models/tiny5");
    K3Spec cost;
    k3_spec_init(&cost, &c.eng.m, NULL, 0, 0);
    if (k3_draft_open(&c.draft, "tests/models/tiny5_dspark", &c.eng, 7, 0, cost.step_cost, 1,
                      err, sizeof err))
        fj_fail_now("draft", err);
    k3_draft_follow(c.draft, c.st);
    if (chat_turn(&c, "Hello there") || chat_turn(&c, "Second one"))
        fj_fail_now("draft seed", "a chat turn failed");
    if (chat_state_save(&c, g_path, err, sizeof err)) fj_fail_now("draft seed save", err);
    fflush(stdout); fflush(stderr);
    dup2(out, 1); dup2(errfd, 2);
    close(out); close(errfd);
    size_t n0 = 0;
    unsigned char *seed = read_all(g_path, &n0), *b = malloc(n0 + 64);
    const unsigned char *t = NULL;
    for (size_t i = n0 > 8 ? n0 - 8 : 0; i > 0 && !t; i--)
        if (!memcmp(seed + i, "K3DRAFT\n", 8)) t = seed + i;
    if (!t) fj_fail_now("draft seed", "no draft context trailer in the saved state");
    const size_t off = (size_t)(t - seed), tl = n0 - off;
    const int pos = c.st->pos;
    int loads = 0, full = 0;
    for (int it = 0; it < 600; it++) {
        size_t n = n0;
        memcpy(b, seed, n0);
        const int m = 1 + (int)(rnd() % 3);
        for (int i = 0; i < m; i++) {
            const size_t p = off + (it % 3 ? rnd() % (tl < 64 ? tl : 64) : rnd() % tl);
            switch (rnd() % 4) {
            case 0: b[p] ^= (unsigned char)(1u << (rnd() % 8)); break;
            case 1: b[p] = (unsigned char)rnd(); break;
            case 2: n = off + rnd() % tl; break;                  /* cut inside it */
            default: b[n++] = (unsigned char)rnd(); break;        /* a byte after it */
            }
            if (n < off || n > n0 + 32) n = n0;
        }
        if (it % 2 && n >= off + 8) {                             /* its checksum made right */
            const uint64_t sum = k3_state_sum(b + off, n - off - 8);
            for (int i = 0; i < 8; i++) b[n - 8 + i] = (unsigned char)(sum >> (8 * i));
        }
        const int rc = chat_state_load_bytes(&c, g_path, b, n, err, sizeof err);
        if (rc) {
            if (rc != 1 || !strstr(err, g_path) || fj_raw_control(err))
                fj_fail_now("draft trailer refusal", err);
            if (c.st->pos != 0 || k3_draft_pos(c.draft) != 0)
                fj_fail_now("draft trailer refusal", "left positions in the state or draft");
        } else {
            const int dp = k3_draft_pos(c.draft);
            if (c.st->pos != pos || (dp != pos && dp != 0))
                fj_fail_now("draft trailer load", "the draft's context does not cover the state");
            loads++; full += dp == pos;
        }
    }
    if (chat_state_load_bytes(&c, g_path, seed, n0, err, sizeof err) ||
        k3_draft_pos(c.draft) != pos)
        fj_fail_now("draft seed", "the unmutated state does not restore the draft's context");
    printf("draft context trailers: 600 mutated (%d loaded, %d with the context), %zu bytes "
           "after a %d-position state: ok\n", loads, full, tl, pos);
    free(seed); free(b);
    k3_draft_close(c.draft);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    setup();
    check_seeds();
    /* a state of the other thinking mode is a settings refusal (2); a damaged one is 1 */
    expect(1, g_seed[0], g_nseed[0], 2, "saved with thinking off");
    size_t n0 = g_nseed[0], cap = 0;
    for (int k = 0; k < NSEED; k++)
        if (g_nseed[k] > cap) cap = g_nseed[k];
    cap += 4096;
    unsigned char *buf = malloc(cap);
    memcpy(buf, g_seed[0], n0);
    buf[12] ^= 1;                                          /* checkpoint identity */
    expect(0, buf, n0, 1, "saved from another checkpoint");
    buf[12] ^= 1; buf[8] = 9;                              /* format version */
    expect(0, buf, n0, 1, "format version 9");
    buf[8] = 1;
    expect(0, buf, 100, 1, "truncated at byte 100");
    printf("state refusals: ok\n");
    long iters = 0, ok = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (iters < 3000 || clock() < end) {      /* make test: 3000 inputs, always the same */
        for (int j = 0; j < 50; j++, iters++) {
            int k = (int)(rnd() % NSEED);
            size_t n = g_nseed[k];
            if (n > cap) fj_fail_now("state seed", "too large");
            memcpy(buf, g_seed[k], n);
            /* the header, fingerprint, ids and records: all but the tensors and checksum
             * (the image chat's: its records, the image's rows among them) */
            size_t head = k == IMG_SEED ? g_head[k] : n > 4096 ? 4096 : n;
            int m = 1 + (int)(rnd() % 3);
            for (int i = 0; i < m; i++) mutate(buf, &n, cap, head);
            ok += check_state(k, buf, n);
        }
    }
    free(buf);
    draft_trailers();
    cleanup();
    printf("test_fuzz_state: %ld mutated states (each as given and with its checksum fixed), "
           "%ld loads (saved and reloaded equal), no crash, every refusal exit 1 or 2 naming "
           "the file and leaving the chat as it was\n", iters, ok);
    return 0;
}
#endif
