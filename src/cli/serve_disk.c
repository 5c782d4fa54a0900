/* serve_disk.c — k3 serve --state-dir: every kept state is also a file in the REPL's
 * checksummed state format (chat_state.c, written by chat_state_save and checked by
 * chat_state_load), beside the conversation it resumes (NAME.jsonl: one {"role",
 * "content", "reasoning_content"} per line, the REPL's history lines; the last may be a
 * user message, since a state may end at the prompt). A restart loads them all, so
 * conversations resume without re-prefill. A file leaves with its kept state. */
#include "serve.h"
#include "chat.h"
#include "util.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void path_of(const Server *s, const char *file, const char *ext, char *p, size_t n) {
    snprintf(p, n, "%s/%s%s", s->state_dir, file, ext);
}

void serve_disk_forget(Server *s, const char *file) {
    char p[4200];
    if (!s->state_dir || !file[0]) return;
    path_of(s, file, ".state", p, sizeof p); unlink(p);
    path_of(s, file, ".jsonl", p, sizeof p); unlink(p);
}

static void chat_for(Server *s, Chat *c, K3State *st, int thinking, const char *effort) {
    memset(c, 0, sizeof *c);
    c->eng = s->eng;                        /* a view: closed by the server, never here */
    c->st = st; c->tok = s->tok; c->ids = s->ids; c->ctx = s->ctx;
    c->thinking = thinking;
    snprintf(c->effort, sizeof c->effort, "%s", effort);
}

int serve_disk_save(Server *s, const ServeReq *r, const int32_t *fed, size_t nfed,
                    size_t nprompt, void *st, const char *content, const char *reasoning,
                    char file[64]) {
    char err[1024], p[4200];
    Chat c;
    file[0] = 0;
    /* the REPL's history lines and state check know no tools: such states stay in memory */
    if (!s->state_dir || r->kind != REQ_CHAT || r->uses_tools) return 0;
    chat_for(s, &c, st, r->thinking, r->effort);
    int rc = 0;
    for (int i = 0; i < r->n_msgs && !rc; i++)
        rc = chat_log_add(&c.log, r->msgs[i].role, r->msgs[i].content, r->msgs[i].reasoning);
    if (!rc && nfed > nprompt) {            /* the reply, as the exact ids fed */
        rc = chat_log_add(&c.log, "assistant", content ? content : "",
                          r->thinking ? (reasoning ? reasoning : "") : NULL);
        ChatMsg *m = rc ? NULL : &c.log.v[c.log.n - 1];
        if (m && (m->gen_ids = malloc(4 * (nfed - nprompt + 1)))) {
            memcpy(m->gen_ids, fed + nprompt, 4 * (nfed - nprompt));
            m->n_gen = (int)(nfed - nprompt);
            m->gen_thinking = r->thinking;
            m->gen_state = r->thinking ? XP_THINK : XP_RESPONSE;
        } else rc = -1;
    }
    uint64_t h = K3_HASH_INIT;
    h = k3_hash(h, fed, 4 * nfed);
    h = k3_hash(h, c.effort, strlen(c.effort));
    snprintf(file, 64, "%016llx-%s", (unsigned long long)h, r->thinking ? c.effort : "off");
    c.fed = (int32_t *)fed; c.nfed = nfed;
    path_of(s, file, ".jsonl", p, sizeof p);
    if (!rc && chat_hist_save(p, &c.log, err, sizeof err)) rc = -1;
    else if (!rc) {
        path_of(s, file, ".state", p, sizeof p);
        rc = chat_state_save(&c, p, err, sizeof err);
    } else snprintf(err, sizeof err, "out of memory");
    if (rc) {
        fprintf(stderr, "k3: serve: --state-dir: %s\n", err);
        serve_disk_forget(s, file);
        file[0] = 0;
    }
    chat_log_free(&c.log);
    return rc;
}

/* The REPL's history lines, read without its turn-order rules. */
static int read_log(const char *path, ChatLog *l) {
    size_t n;
    char *t = k3_read_file(path, &n), err[256];
    if (!t) return -1;
    int rc = 0;
    for (char *line = t, *e; !rc && line < t + n; line = e + 1) {
        e = memchr(line, '\n', (size_t)(t + n - line));
        if (!e) e = t + n;
        Json *j = json_parse(line, (size_t)(e - line), err, sizeof err);
        const Json *ro = json_get(j, "role"), *co = json_get(j, "content"),
                   *re = json_get(j, "reasoning_content");
        if (!ro || ro->type != JSON_STRING || !co || co->type != JSON_STRING ||
            (re && re->type != JSON_STRING) ||
            chat_log_add(l, ro->str, co->str, re ? re->str : NULL))
            rc = -1;
        json_free(j);
    }
    free(t);
    return rc;
}

int serve_disk_load(Server *s) {
    if (!s->state_dir) return 0;
    DIR *d = opendir(s->state_dir);
    if (!d) {
        fprintf(stderr, "k3: --state-dir %s: cannot open it (create it first)\n", s->state_dir);
        return K3_ERR_USAGE;
    }
    int loaded = 0, refused = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t L = strlen(de->d_name);
        if (L < 7 || L > 60 || strcmp(de->d_name + L - 6, ".state")) continue;
        char file[64], p[4200], err[1024];
        snprintf(file, sizeof file, "%.*s", (int)(L - 6), de->d_name);
        const char *mode = strrchr(file, '-');
        if (!mode) continue;
        mode++;
        Chat c;
        chat_for(s, &c, k3_state_new(&s->eng.m), strcmp(mode, "off") != 0,
                 strcmp(mode, "off") ? mode : "max");
        path_of(s, file, ".jsonl", p, sizeof p);
        c.history = p;
        int rc = !c.st || read_log(p, &c.log) ? 1 : 0;
        if (!rc) {
            char sp[4200];
            path_of(s, file, ".state", sp, sizeof sp);
            rc = chat_state_load(&c, sp, err, sizeof err);
            if (rc) fprintf(stderr, "k3: serve: --state-dir: %s; ignored\n", err);
        }
        if (!rc) {
            serve_keep_file(s, c.st, c.fed, c.nfed, file);
            c.fed = NULL;
            loaded++;
        } else {
            if (c.st) k3_state_free(&s->eng.m, c.st);
            free(c.fed);
            refused++;
        }
        chat_log_free(&c.log);
    }
    closedir(d);
    fprintf(stderr, "k3: --state-dir %s: %d state(s) resumed%s\n", s->state_dir, loaded,
            refused ? " (some refused, see above)" : "");
    return 0;
}
