/* chat_hist.c — chat history as JSONL: one {"role","content"[,"reasoning_content"]
 * [,"k3_gen"]} object per line. Strictly validated on load (keys, types, role order,
 * sizes), errors name the line; written atomically (temp file, fsync, rename). k3_gen is
 * a reply's exact record (the ids the model produced), so that a reload renders the ids
 * the session had, not a re-tokenization of their text (docs/CHAT.md "History file"). */
#include "chat.h"
#include "json.h"
#include "outfile.h"
#include "util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void chat_msg_free(ChatMsg *m) {
    free(m->role); free(m->content); free(m->reasoning); free(m->gen_ids);
    for (int i = 0; i < m->n_img; i++) k3_image_in_free(&m->img[i]);
    free(m->img);
    memset(m, 0, sizeof *m);
}

void chat_log_free(ChatLog *l) {
    for (int i = 0; i < l->n; i++) chat_msg_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

int chat_log_add(ChatLog *l, const char *role, const char *content, const char *reasoning) {
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 16;
        ChatMsg *nv = realloc(l->v, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        l->v = nv; l->cap = nc;
    }
    ChatMsg *m = &l->v[l->n];
    memset(m, 0, sizeof *m);
    m->role = strdup(role);
    m->content = strdup(content ? content : "");
    m->reasoning = reasoning ? strdup(reasoning) : NULL;
    if (!m->role || !m->content || (reasoning && !m->reasoning)) { chat_msg_free(m); return -1; }
    l->n++;
    return 0;
}

/* s (at most max bytes of it) as a JSON literal: keys and roles come from the file and
 * may hold control bytes, which must not reach the terminal raw. */
static const char *quoted(char **buf, const char *s, size_t max) {
    size_t n = strlen(s);
    free(*buf);
    *buf = json_quote(s, n > max ? max : n);
    return *buf ? *buf : "(out of memory)";
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto bad; } while (0)

/* what a record was generated for: role, content and reasoning (an edited message's
 * record no longer applies, and is dropped on load) */
static uint64_t rec_of(const char *content, const char *reasoning) {
    uint64_t h = k3_hash(K3_HASH_INIT, content, strlen(content) + 1);
    return k3_hash(h, reasoning ? reasoning : "", strlen(reasoning ? reasoning : "") + 1);
}

/* "k3_gen":{"ids":[...],"thinking":0|1,"state":S,"of":"HASH"} into m; 0, or -1 with why */
static int get_rec(const Json *g, ChatMsg *m, const char **why) {
    const Json *ids = json_get(g, "ids"), *th = json_get(g, "thinking"),
               *st = json_get(g, "state"), *of = json_get(g, "of");
    *why = "must be {\"ids\":[...],\"thinking\":0|1,\"state\":0..5,\"of\":\"HASH\"}";
    if (g->type != JSON_OBJECT || g->len != 4 || !ids || !th || !st || !of ||
        ids->type != JSON_ARRAY || th->type != JSON_NUMBER || !th->is_integer ||
        (th->number != 0 && th->number != 1) || st->type != JSON_NUMBER || !st->is_integer ||
        st->number < 0 || st->number > XP_DONE || of->type != JSON_STRING) return -1;
    if (ids->len > CHAT_MAX_LINE / 2) { *why = "has too many ids"; return -1; }
    int32_t *v = malloc(sizeof *v * (ids->len ? ids->len : 1));
    if (!v) { *why = "out of memory"; return -1; }
    for (size_t i = 0; i < ids->len; i++) {
        const Json *x = ids->items[i];
        if (x->type != JSON_NUMBER || !x->is_integer || x->number < 0 || x->number > 1e9) {
            free(v); *why = "ids must be non-negative integers"; return -1;
        }
        v[i] = (int32_t)x->number;
    }
    char want[24];
    snprintf(want, sizeof want, "%016llx",
             (unsigned long long)rec_of(m->content, m->reasoning));
    if (strcmp(of->str, want)) { free(v); return 0; }      /* edited: render the text */
    m->gen_ids = v; m->n_gen = (int)ids->len;
    m->gen_thinking = (int)th->number; m->gen_state = (int)st->number;
    return 0;
}

int chat_hist_check_ids(const ChatLog *l, int vocab, const char *path, char *err,
                        size_t errlen) {
    for (int i = 0; i < l->n; i++)
        for (int k = 0; k < l->v[i].n_gen; k++)
            if (l->v[i].gen_ids[k] >= vocab) {
                snprintf(err, errlen, "history %s line %d: k3_gen id %d is outside the "
                         "tokenizer's vocabulary (0..%d); remove k3_gen from that line to "
                         "render its text instead", path, i + 1, (int)l->v[i].gen_ids[k],
                         vocab - 1);
                return K3_ERR_USAGE;
            }
    return 0;
}

int chat_hist_load(const char *path, int missing_ok, ChatLog *out, char *err, size_t errlen) {
    struct stat sb;
    if (missing_ok && k3_out_in_place(path)) {       /* a FIFO, /dev/stdout: a transcript out */
        memset(out, 0, sizeof *out); return 0;
    }
    if (stat(path, &sb)) {
        if (errno == ENOENT && missing_ok) { memset(out, 0, sizeof *out); return 0; }
        snprintf(err, errlen, "history %s: %s", path, strerror(errno));
        return K3_ERR_USAGE;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "history %s: not a regular file", path); return K3_ERR_USAGE;
    }
    if ((size_t)sb.st_size > CHAT_MAX_FILE) {
        snprintf(err, errlen,
                 "history %s: %lld bytes, over the %zu MiB limit; start a new history file",
                 path, (long long)sb.st_size, CHAT_MAX_FILE >> 20);
        return K3_ERR_USAGE;
    }
    size_t len;
    char *buf = k3_read_file(path, &len);
    if (!buf) {
        snprintf(err, errlen, "history %s: %s", path, strerror(errno)); return K3_ERR_USAGE;
    }
    ChatLog l = { 0 };
    Json *j = NULL;
    char *shown = NULL;
    size_t pos = 0;
    long line = 0;
    while (pos < len) {
        line++;
        char *nl = memchr(buf + pos, '\n', len - pos);
        size_t e = nl ? (size_t)(nl - buf) : len;
        size_t n = e - pos;
        if (n && buf[e - 1] == '\r') n--;
        if (n > CHAT_MAX_LINE)
            FAIL("history %s line %ld: %zu bytes, over the %zu MiB per-message limit",
                 path, line, n, CHAT_MAX_LINE >> 20);
        if (n == 0)
            FAIL("history %s line %ld: empty line; every line must be one JSON message object",
                 path, line);
        char jerr[256];
        j = json_parse(buf + pos, n, jerr, sizeof jerr);
        if (!j) FAIL("history %s line %ld: invalid JSON: %s", path, line, jerr);
        if (j->type != JSON_OBJECT)
            FAIL("history %s line %ld: expected a JSON object {\"role\",\"content\",...}, got %s",
                 path, line, json_type_name(j->type));
        for (size_t k = 0; k < j->len; k++) {
            const char *key = j->keys[k];
            if (strcmp(key, "role") && strcmp(key, "content") && strcmp(key, "reasoning_content")
                && strcmp(key, "k3_gen"))
                FAIL("history %s line %ld: unknown key %s (allowed: role, content, "
                     "reasoning_content, k3_gen)", path, line, quoted(&shown, key, 60));
            if (!strcmp(key, "k3_gen")) continue;           /* checked below */
            if (j->items[k]->type != JSON_STRING)
                FAIL("history %s line %ld: \"%s\" must be a string, got %s", path, line, key,
                     json_type_name(j->items[k]->type));
            if (strlen(j->items[k]->str) != j->items[k]->len)
                FAIL("history %s line %ld: \"%s\" contains a NUL character (\\u0000), which chat "
                     "does not support", path, line, key);
        }
        const Json *role = json_get(j, "role"), *content = json_get(j, "content"),
                   *rc = json_get(j, "reasoning_content"), *gen = json_get(j, "k3_gen");
        if (!role) FAIL("history %s line %ld: missing \"role\"", path, line);
        if (!content) FAIL("history %s line %ld: missing \"content\"", path, line);
        const char *r = role->str;
        if (!strcmp(r, "system")) {
            if (l.n)
                FAIL("history %s line %ld: a system message may only be the first line",
                     path, line);
        } else if (!strcmp(r, "user")) {
            if (l.n && strcmp(l.v[l.n - 1].role, "assistant") &&
                strcmp(l.v[l.n - 1].role, "system"))
                FAIL("history %s line %ld: two user messages in a row; user and assistant must "
                     "alternate", path, line);
        } else if (!strcmp(r, "assistant")) {
            if (!l.n || strcmp(l.v[l.n - 1].role, "user"))
                FAIL("history %s line %ld: an assistant message must follow a user message",
                     path, line);
        } else FAIL("history %s line %ld: role %s is not system, user or assistant",
                    path, line, quoted(&shown, r, 60));
        if (rc && strcmp(r, "assistant"))
            FAIL("history %s line %ld: reasoning_content is only allowed on assistant messages",
                 path, line);
        if (gen && strcmp(r, "assistant"))
            FAIL("history %s line %ld: k3_gen is only allowed on assistant messages",
                 path, line);
        if (l.n >= CHAT_MAX_MSGS)
            FAIL("history %s line %ld: more than %d messages", path, line, CHAT_MAX_MSGS);
        if (chat_log_add(&l, r, content->str, rc ? rc->str : NULL))
            FAIL("history %s: out of memory", path);
        const char *why;
        if (gen && get_rec(gen, &l.v[l.n - 1], &why))
            FAIL("history %s line %ld: k3_gen %s; or remove k3_gen to render the text",
                 path, line, why);
        json_free(j); j = NULL;
        pos = nl ? e + 1 : len;
    }
    if (l.n && !strcmp(l.v[l.n - 1].role, "user"))
        FAIL("history %s line %ld: the last message is a user message without a reply; remove it "
             "or add the assistant reply", path, line);
    free(buf);
    *out = l;
    return 0;
bad:
    free(shown);
    json_free(j);
    chat_log_free(&l);
    free(buf);
    return K3_ERR_USAGE;
}

static int put_field(FILE *f, const char *key, const char *val, int first) {
    char *q = json_quote(val, strlen(val));
    if (!q) return -1;
    fprintf(f, "%s\"%s\":%s", first ? "" : ",", key, q);
    free(q);
    return 0;
}

int chat_hist_save(const char *path, const ChatLog *l, char *err, size_t errlen) {
    K3Out out;                                  /* outfile.h: never replaces a FIFO, a device */
    char oe[4400];
    if (k3_out_open(&out, path, 0, 0666, oe, sizeof oe)) {
        snprintf(err, errlen, "history %s", oe);
        return -1;
    }
    FILE *f = k3_out_stdio(&out);
    if (!f) { k3_out_abort(&out); snprintf(err, errlen, "out of memory"); return -1; }
    int bad = 0;
    for (int i = 0; i < l->n && !bad; i++) {
        const ChatMsg *m = &l->v[i];
        fputc('{', f);
        bad |= put_field(f, "role", m->role, 1);
        bad |= put_field(f, "content", m->content, 0);
        if (!strcmp(m->role, "assistant"))
            bad |= put_field(f, "reasoning_content", m->reasoning ? m->reasoning : "", 0);
        if (!strcmp(m->role, "assistant") && m->gen_ids) {
            fputs(",\"k3_gen\":{\"ids\":[", f);
            for (int k = 0; k < m->n_gen; k++) fprintf(f, "%s%d", k ? "," : "", m->gen_ids[k]);
            fprintf(f, "],\"thinking\":%d,\"state\":%d,\"of\":\"%016llx\"}", m->gen_thinking,
                    m->gen_state, (unsigned long long)rec_of(m->content, m->reasoning));
        }
        fputs("}\n", f);
    }
    if (bad) {
        snprintf(err, errlen, "history %s: out of memory", path);
        k3_out_abort(&out);
        return -1;
    }
    if (k3_out_commit(&out, oe, sizeof oe)) {
        snprintf(err, errlen, "history %s", oe);
        return -1;
    }
    return 0;
}
