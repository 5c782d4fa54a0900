/* test_fuzz_hist.c — the chat history loader (src/chat/chat_hist.c, JSONL) under mutation:
 * byte-level, line-level (drop, duplicate, swap lines) and structural JSON mutations of a
 * line (tests/c/fuzz_json.h). Every input is either refused with exit code 2 and a
 * message naming the file and line that echoes no raw control byte, or loads into a
 * well-formed conversation that saves and reloads to the same messages. Runs in about a
 * second (10000 inputs); `test_fuzz_hist SECONDS` runs longer (`make fuzz` without libFuzzer).
 *
 * Built with -DK3_LIBFUZZER -DFUZZ_TARGET_chat_hist it is the libFuzzer target chat_hist.
 * (The saved chat state, checked against an open engine: tests/c/test_fuzz_state.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "chat/chat.h"
#include "fuzz_json.h"

static char g_path[300], g_path2[300];



static const char *nz(const char *s) { return s ? s : ""; }

static int same_log(const ChatLog *a, const ChatLog *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->v[i].role, b->v[i].role) || strcmp(a->v[i].content, b->v[i].content) ||
            strcmp(nz(a->v[i].reasoning), nz(b->v[i].reasoning)) ||
            a->v[i].n_gen != b->v[i].n_gen || !a->v[i].gen_ids != !b->v[i].gen_ids ||
            a->v[i].gen_thinking != b->v[i].gen_thinking ||
            a->v[i].gen_state != b->v[i].gen_state ||
            (a->v[i].n_gen && memcmp(a->v[i].gen_ids, b->v[i].gen_ids,
                                     sizeof(int32_t) * (size_t)a->v[i].n_gen)))
            return 0;
    return 1;
}

/* Loads d as a history; checks the refusal or the loaded conversation. 1 if it loaded. */
static int check_hist(const unsigned char *d, size_t n) {
    char err[1024] = "";
    ChatLog l = { 0 }, l2 = { 0 };
    fj_write_file(g_path, d, n);
    int rc = chat_hist_load(g_path, 0, &l, err, sizeof err);
    if (rc) {
        if (rc != 2) fj_fail_now("history", "refused with an exit code other than 2");
        if (!strstr(err, g_path)) fj_fail_now("history refusal does not name the file", err);
        if (fj_raw_control(err)) fj_fail_now("history refusal echoes a raw control byte", err);
        return 0;
    }
    for (int i = 0; i < l.n; i++) {
        const char *r = l.v[i].role;
        int sys = !strcmp(r, "system"), user = !strcmp(r, "user"), as = !strcmp(r, "assistant");
        if (!sys && !user && !as) fj_fail_now("history", "loaded an unknown role");
        if (sys && i) fj_fail_now("history", "loaded a system message after the first");
        if (as && (!i || strcmp(l.v[i - 1].role, "user")))
            fj_fail_now("history", "loaded an assistant message not after a user message");
        if (user && i && strcmp(l.v[i - 1].role, "assistant") && strcmp(l.v[i - 1].role, "system"))
            fj_fail_now("history", "loaded two user messages in a row");
        if (!as && l.v[i].reasoning) fj_fail_now("history", "reasoning on a non-assistant message");
    }
    if (l.n && !strcmp(l.v[l.n - 1].role, "user")) fj_fail_now("history", "loaded a trailing user");
    if (chat_hist_save(g_path2, &l, err, sizeof err)) fj_fail_now("history save", err);
    if (chat_hist_load(g_path2, 0, &l2, err, sizeof err)) fj_fail_now("history reload", err);
    if (!same_log(&l, &l2)) fj_fail_now("history", "save + load changed the conversation");
    chat_log_free(&l); chat_log_free(&l2);
    return 1;
}

static const char *SEEDS[] = {
    "{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\"assistant\",\"content\":\"yo\","
    "\"reasoning_content\":\"\",\"k3_gen\":{\"ids\":[5,7,9],\"thinking\":0,\"state\":2,"
    "\"of\":\"0000000000000000\"}}\n",
    "{\"role\":\"system\",\"content\":\"Be brief.\"}\n"
    "{\"role\":\"user\",\"content\":\"What is the capital of France?\"}\n"
    "{\"role\":\"assistant\",\"content\":\"Paris.\",\"reasoning_content\":\"Easy.\"}\n"
    "{\"role\":\"user\",\"content\":\"And of Italy? \\u00e9\\ud83d\\ude00\\n\"}\n"
    "{\"role\":\"assistant\",\"content\":\"Rome.\",\"reasoning_content\":\"\"}\n",
    "{\"role\":\"user\",\"content\":\"hi\"}\r\n{\"content\":\"yo\",\"role\":\"assistant\"}",
    "",
};
#define NSEEDS (sizeof SEEDS / sizeof *SEEDS)

static void setup(void) {
    const char *tmp = fj_tmpdir();
    snprintf(g_path, sizeof g_path, "%s/k3_fuzz_hist_%d.jsonl", tmp, (int)getpid());
    snprintf(g_path2, sizeof g_path2, "%s/k3_fuzz_hist_%d_b.jsonl", tmp, (int)getpid());
}
static void cleanup(void) { unlink(g_path); unlink(g_path2); }

#ifdef K3_LIBFUZZER
#ifndef FUZZ_TARGET_chat_hist
#error "define FUZZ_TARGET_chat_hist"
#endif
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    setup();
    atexit(cleanup);
    fj_seeds = SEEDS; fj_nseeds = NSEEDS; fj_kind = FJ_LINES;
    return 0;
}
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    check_hist(d, n);
    return 0;
}
#else
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11;
}

static const char *TOKENS[] = { "{", "}", "\"", "\\", "\n", "\r", ",", ":", "\\u0000",
    "\\u001b", "\\ud800", "\"role\"", "\"content\"", "\"reasoning_content\"", "\"user\"",
    "\"assistant\"", "\"system\"", "null", "1", "[]", "\xff", "\xc3" };


/* Refusals that must name the line and show what they echo escaped. */
static void expect(const char *text, const char *needle) {
    char err[1024] = "";
    ChatLog l = { 0 };
    fj_write_file(g_path, (const unsigned char *)text, strlen(text));
    int rc = chat_hist_load(g_path, 0, &l, err, sizeof err);
    if (rc != 2 || !strstr(err, needle) || fj_raw_control(err)) {
        printf("FAIL history refusal: expected exit 2 and '%s', got %d: %s\n", needle, rc, err);
        exit(1);
    }
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    setup();
    expect("{\"role\":\"\\u001b[2Juser\",\"content\":\"x\"}\n",
           "line 1: role \"\\u001b[2Juser\" is not system, user or assistant");
    expect("{\"role\":\"user\",\"content\":\"x\",\"\\u0007k\":\"\"}\n", "unknown key \"\\u0007k\"");
    expect("{\"role\":\"user\",\"content\":[1]}\n", "line 1: \"content\" must be a string");
    expect("{\"role\":\"user\",\"content\":\"a\"}\n[]\n", "line 2: expected a JSON object");
    printf("history refusals escape what they echo: ok\n");
    /* make test: 10000 inputs, always the same */
    long ok, iters = fj_fuzz_lines("history", SEEDS, NSEEDS, TOKENS, FJ_N(TOKENS), secs,
                                   check_hist, rnd, &ok);
    cleanup();
    printf("test_fuzz_hist: %ld mutated histories, %ld loaded (and saved, reloaded equal), "
           "no crash, every refusal exit 2 naming the file\n", iters, ok);
    return 0;
}
#endif
