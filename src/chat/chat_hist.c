/* chat_hist.c — chat history as JSONL: one {"role","content"[,"reasoning_content"]}
 * object per line. Strictly validated on load (keys, types, role order, sizes), errors
 * name the line; written atomically (temp file, fsync, rename). */
#include "chat.h"
#include "json.h"
#include "util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void chat_msg_free(ChatMsg *m) {
    free(m->role); free(m->content); free(m->reasoning); free(m->gen_ids);
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

int chat_hist_load(const char *path, int missing_ok, ChatLog *out, char *err, size_t errlen) {
    struct stat sb;
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
            if (strcmp(key, "role") && strcmp(key, "content") && strcmp(key, "reasoning_content"))
                FAIL("history %s line %ld: unknown key %s (allowed: role, content, "
                     "reasoning_content)", path, line, quoted(&shown, key, 60));
            if (j->items[k]->type != JSON_STRING)
                FAIL("history %s line %ld: \"%s\" must be a string, got %s", path, line, key,
                     json_type_name(j->items[k]->type));
            if (strlen(j->items[k]->str) != j->items[k]->len)
                FAIL("history %s line %ld: \"%s\" contains a NUL character (\\u0000), which chat "
                     "does not support", path, line, key);
        }
        const Json *role = json_get(j, "role"), *content = json_get(j, "content"),
                   *rc = json_get(j, "reasoning_content");
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
        if (l.n >= CHAT_MAX_MSGS)
            FAIL("history %s line %ld: more than %d messages", path, line, CHAT_MAX_MSGS);
        if (chat_log_add(&l, r, content->str, rc ? rc->str : NULL))
            FAIL("history %s: out of memory", path);
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
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 32);
    if (!tmp) { snprintf(err, errlen, "out of memory"); return -1; }
    snprintf(tmp, pl + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "history %s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp); return -1;
    }
    int bad = 0;
    for (int i = 0; i < l->n && !bad; i++) {
        const ChatMsg *m = &l->v[i];
        fputc('{', f);
        bad |= put_field(f, "role", m->role, 1);
        bad |= put_field(f, "content", m->content, 0);
        if (!strcmp(m->role, "assistant"))
            bad |= put_field(f, "reasoning_content", m->reasoning ? m->reasoning : "", 0);
        fputs("}\n", f);
    }
    if (bad || fflush(f) || fsync(fileno(f))) {
        snprintf(err, errlen, "history %s: writing %s: %s", path, tmp,
                 bad ? "out of memory" : strerror(errno));
        fclose(f); unlink(tmp); free(tmp);
        return -1;
    }
    if (fclose(f) || rename(tmp, path)) {
        snprintf(err, errlen, "history %s: %s", path, strerror(errno));
        unlink(tmp); free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
