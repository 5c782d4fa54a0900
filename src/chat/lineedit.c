/* lineedit.c — raw-mode line editor for the chat REPL (see include/lineedit.h).
 * Input is read in chunks and the line is redrawn once per chunk, so a paste costs one
 * redraw, not one per byte. Cursor positions are byte offsets on UTF-8 boundaries; the
 * display width of a code point is taken as 1 (a tab shows as a space). */
#include "lineedit.h"
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios orig;
static volatile sig_atomic_t raw_on, have_orig;

void le_restore(void) {
    if (raw_on && have_orig) { tcsetattr(0, TCSADRAIN, &orig); raw_on = 0; }
}

static void on_fatal(int sig) {
    le_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

int le_init(void) {
    const char *term = getenv("TERM");
    if (!isatty(0) || !isatty(1) || (term && !strcmp(term, "dumb"))) return 0;
    if (tcgetattr(0, &orig)) return 0;
    have_orig = 1;
    atexit(le_restore);
    int sigs[] = { SIGTERM, SIGHUP, SIGQUIT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_fatal;
            sigemptyset(&sa.sa_mask);
            sigaction(sigs[i], &sa, NULL);
        }
    }
    return 1;
}

static int raw_mode(void) {
    struct termios t = orig;
    t.c_iflag &= ~(tcflag_t)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    t.c_cflag |= CS8;
    t.c_lflag &= ~(tcflag_t)(ECHO | ICANON | IEXTEN | ISIG);
    t.c_cc[VMIN] = 1; t.c_cc[VTIME] = 0;
    if (tcsetattr(0, TCSADRAIN, &t)) return -1;
    raw_on = 1;
    return 0;
}

/* ---- output: collected, then one write ---- */
static char *ob; static size_t on, ocap;
static void out(const char *s, size_t n) {
    if (on + n > ocap) {
        size_t nc = ocap ? ocap : 4096;
        while (nc < on + n) nc *= 2;
        char *nb = realloc(ob, nc);
        if (!nb) return;
        ob = nb; ocap = nc;
    }
    memcpy(ob + on, s, n); on += n;
}
static void outs(const char *s) { out(s, strlen(s)); }
static void outf(const char *fmt, int v) {
    char b[32]; int k = snprintf(b, sizeof b, fmt, v); out(b, (size_t)k);
}
static void flush_out(void) {
    size_t off = 0;
    while (off < on) {
        ssize_t r = write(1, ob + off, on - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        off += (size_t)r;
    }
    on = 0;
}

/* ---- input: pending bytes survive between calls (typed ahead, or after Enter in a paste) ---- */
static unsigned char ib[4096];
static size_t ipos, ilen;

/* 1 byte in *c; 0 EOF; -1 interrupted; -2 nothing within wait_ms (wait_ms >= 0 only). */
static int get_byte(unsigned char *c, int wait_ms) {
    if (ipos == ilen) {
        if (wait_ms >= 0) {
            struct pollfd p = { 0, POLLIN, 0 };
            int r = poll(&p, 1, wait_ms);
            if (r == 0) return -2;
            if (r < 0) return errno == EINTR ? -1 : 0;
        }
        ssize_t r = read(0, ib, sizeof ib);
        if (r < 0) return errno == EINTR ? -1 : 0;
        if (r == 0) return 0;
        ipos = 0; ilen = (size_t)r;
    }
    *c = ib[ipos++];
    return 1;
}

/* ---- the line ---- */
typedef struct { char *b; size_t len, cap, cur; const char *prompt; int plen, crow; } Line;

static size_t width(const char *s, size_t n) {        /* code points (continuation bytes skipped) */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) w += ((unsigned char)s[i] & 0xC0) != 0x80;
    return w;
}
static int cols(void) {
    struct winsize ws;
    if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}
static size_t prev_char(const Line *l, size_t i) {
    if (!i) return 0;
    i--;
    while (i && ((unsigned char)l->b[i] & 0xC0) == 0x80) i--;
    return i;
}
static size_t next_char(const Line *l, size_t i) {
    if (i >= l->len) return l->len;
    i++;
    while (i < l->len && ((unsigned char)l->b[i] & 0xC0) == 0x80) i++;
    return i;
}

/* Redraws prompt + line from the prompt's first row; leaves the cursor at l->cur. */
static void redraw(Line *l) {
    int W = cols();
    if (l->crow > 0) outf("\033[%dA", l->crow);
    outs("\r\033[J");
    outs(l->prompt);
    for (size_t i = 0; i < l->len; i++) out(l->b[i] == '\t' ? " " : l->b + i, 1);
    size_t tot = (size_t)l->plen + width(l->b, l->len), at = (size_t)l->plen + width(l->b, l->cur);
    if (tot > 0 && tot % (size_t)W == 0) outs("\r\n");           /* leave the pending-wrap column */
    int erow = (int)(tot / (size_t)W), row = (int)(at / (size_t)W), col = (int)(at % (size_t)W);
    if (erow > row) outf("\033[%dA", erow - row);
    outs("\r");
    if (col) outf("\033[%dC", col);
    l->crow = row;
    flush_out();
}

static int ins(Line *l, const char *s, size_t n) {
    if (l->len + n + 1 > LE_MAX_LINE) return -1;
    if (l->len + n + 1 > l->cap) {
        size_t nc = l->cap * 2;
        while (nc < l->len + n + 1) nc *= 2;
        char *nb = realloc(l->b, nc);
        if (!nb) return -1;
        l->b = nb; l->cap = nc;
    }
    memmove(l->b + l->cur + n, l->b + l->cur, l->len - l->cur);
    memcpy(l->b + l->cur, s, n);
    l->len += n; l->cur += n;
    return 0;
}
static void del(Line *l, size_t a, size_t b) {         /* removes [a, b), cursor to a */
    memmove(l->b + a, l->b + b, l->len - b);
    l->len -= b - a; l->cur = a;
}
static void set(Line *l, const char *s) {
    l->len = l->cur = 0;
    ins(l, s, strlen(s));
}

/* ---- history: the lines entered in this process ---- */
static char **hist; static int nhist, caphist;
static void hist_add(const char *s) {
    if (!*s || (nhist && !strcmp(hist[nhist - 1], s))) return;
    if (nhist == caphist) {
        int nc = caphist ? caphist * 2 : 64;
        char **nv = realloc(hist, sizeof *nv * (size_t)nc);
        if (!nv) return;
        hist = nv; caphist = nc;
    }
    char *d = strdup(s);
    if (d) hist[nhist++] = d;
}

/* Shows the whole line with tail after it; nl: then move to a fresh row (the caller
 * prints its own newline after Ctrl-C and EOF). */
static void finish(Line *l, const char *tail, int nl) {
    l->cur = l->len;
    redraw(l);
    outs(tail);
    if (nl) outs("\r\n");
    flush_out();
}

/* Reads the rest of an escape sequence; returns the key: 'A'..'D' arrows, 'H' Home, 'F' End,
 * 'X' Delete, 0 otherwise. */
static int escape(void) {
    unsigned char c, d;
    if (get_byte(&c, 100) != 1) return 0;
    if (c == 'O') { if (get_byte(&d, 100) != 1) return 0; return strchr("ABCDHF", d) ? d : 0; }
    if (c != '[') return 0;
    char p[16]; int np = 0;
    for (;;) {
        if (get_byte(&d, 100) != 1) return 0;
        if (d >= 0x40 && d <= 0x7E) break;
        if (np < 15) p[np++] = (char)d;
    }
    p[np] = 0;
    if (strchr("ABCD", d)) return d;
    if (d == 'H' || d == 'F') return d;
    if (d == '~') {
        int n = atoi(p);
        if (n == 1 || n == 7) return 'H';
        if (n == 4 || n == 8) return 'F';
        if (n == 3) return 'X';
    }
    return 0;
}

int le_read(const char *prompt, char **res) {
    Line l = { malloc(256), 0, 256, 0, prompt, (int)strlen(prompt), 0 };
    if (!l.b) return LE_EOF;
    fflush(stdout);
    if (raw_mode()) { free(l.b); return LE_EOF; }
    int hi = nhist, rc = LE_LINE;
    char *scratch = NULL;                              /* the line being typed, while browsing */
    redraw(&l);
    for (;;) {
        unsigned char c;
        int dirty = 0, r;
        do {                                 /* everything already read, then one redraw */
            r = get_byte(&c, -1);
            if (r <= 0) break;
            if (c == '\r' || c == '\n') { finish(&l, "", 1); goto done; }
            if (c == 3) { finish(&l, "^C", 0); rc = LE_INTR; goto done; }
            if (c == 4) {
                if (!l.len) { finish(&l, "", 0); rc = LE_EOF; goto done; }
                if (l.cur < l.len) { del(&l, l.cur, next_char(&l, l.cur)); dirty = 1; }
                continue;
            }
            int key = c == 27 ? escape() : 0;
            if (key == 'D' || c == 2) l.cur = prev_char(&l, l.cur);
            else if (key == 'C' || c == 6) l.cur = next_char(&l, l.cur);
            else if (key == 'H' || c == 1) l.cur = 0;
            else if (key == 'F' || c == 5) l.cur = l.len;
            else if (c == 127 || c == 8) { if (l.cur) del(&l, prev_char(&l, l.cur), l.cur); }
            else if (key == 'X') { if (l.cur < l.len) del(&l, l.cur, next_char(&l, l.cur)); }
            else if (c == 21) del(&l, 0, l.cur);
            else if (c == 11) l.len = l.cur;
            else if (c == 23) {
                size_t a = l.cur;
                while (a && l.b[a - 1] == ' ') a--;
                while (a && l.b[a - 1] != ' ') a--;
                del(&l, a, l.cur);
            } else if (c == 12) { outs("\033[H\033[2J"); l.crow = 0; }
            else if (key == 'A' || c == 16) {
                if (!hi) continue;
                if (hi == nhist) { free(scratch); l.b[l.len] = 0; scratch = strdup(l.b); }
                set(&l, hist[--hi]);
            } else if (key == 'B' || c == 14) {
                if (hi == nhist) continue;
                hi++;
                set(&l, hi == nhist ? (scratch ? scratch : "") : hist[hi]);
            } else if (c == '\t' || c >= 0x20) {
                char ch = (char)c;
                ins(&l, &ch, 1);
            } else continue;                           /* other control bytes: ignored */
            dirty = 1;
        } while (ipos < ilen);
        if (r == 0) { finish(&l, "", l.len > 0); rc = l.len ? LE_LINE : LE_EOF; goto done; }
        if (r < 0) { finish(&l, "", 0); rc = LE_INTR; goto done; }
        if (dirty) redraw(&l);
    }
done:
    le_restore();
    free(scratch);
    if (rc != LE_LINE) { free(l.b); return rc; }
    l.b[l.len] = 0;
    hist_add(l.b);
    *res = l.b;
    return LE_LINE;
}
