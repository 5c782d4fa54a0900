/* serve_image_file.c — an image URL of a request as bytes: a data: URL, or (only when the
 * server runs with --image-dir DIR) a local file named by an absolute path or a file:// URL.
 * A file is read only when it lies inside DIR: the path is first checked as written (its
 * '..' resolved by hand, so a traversal is refused before the file system is asked), then
 * resolved with realpath (a symbolic link that leads out of DIR is refused), then opened
 * without following links and read only when it is a regular file within the byte limit.
 * The bytes are the same as a data: URL's: the prefix key hashes them, not the URL. */
#include "serve.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static char dir_real[PATH_MAX], dir_abs[PATH_MAX];     /* "" when --image-dir is not given */

/* The absolute path p with "." and ".." resolved and repeated '/' dropped, by hand (no
 * file system access) into out[0..cap). 0, or -1 when it does not fit. */
static int lex_norm(const char *p, char *out, size_t cap) {
    size_t o = 0;
    while (*p) {
        while (*p == '/') p++;
        const char *e = p;
        while (*e && *e != '/') e++;
        const size_t n = (size_t)(e - p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;      /* drop the last component */
            if (o > 0) o--;
        } else if (n && !(n == 1 && p[0] == '.')) {
            if (o + 1 + n >= cap) return -1;
            out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p = e;
    }
    if (o == 0) out[o++] = '/';
    out[o] = 0;
    return 0;
}

/* 1 when path p is dir d or lies below it. */
static int inside(const char *p, const char *d) {
    const size_t n = strlen(d);
    if (!n) return 0;
    if (n == 1 && d[0] == '/') return 1;
    return !strncmp(p, d, n) && (p[n] == 0 || p[n] == '/');
}

/* (serve.h) */
int serve_image_dir_set(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (!dir) { dir_real[0] = dir_abs[0] = 0; return 0; }
    char abs[PATH_MAX * 2];
    if (!realpath(dir, dir_real) || stat(dir_real, &st) || !S_ISDIR(st.st_mode)) {
        const int e = errno;
        dir_real[0] = 0;
        BAD("--image-dir: '%.160s' is not a folder (%s): name the folder whose image files "
            "requests may name", dir, e ? strerror(e) : "not a directory");
    }
    if (dir[0] == '/') snprintf(abs, sizeof abs, "%s", dir);
    else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
        snprintf(abs, sizeof abs, "%s/%s", cwd, dir);
    }
    if (lex_norm(abs, dir_abs, sizeof dir_abs)) snprintf(dir_abs, sizeof dir_abs, "%s", dir_real);
    return 0;
}

const char *serve_image_dir(void) { return dir_real[0] ? dir_real : NULL; }

/* A file:// URL's path (percent-escapes decoded) into out; 0, or -1 with err. */
static int file_url_path(const char *u, size_t n, char *out, size_t cap, char *err,
                         size_t errlen) {
    size_t i = 7, o = 0;                                  /* after "file://" */
    if (n - i >= 9 && !strncmp(u + i, "localhost", 9) && (n - i == 9 || u[i + 9] == '/'))
        i += 9;
    if (i >= n || u[i] != '/')
        BAD("a file:// URL names a host: k3 reads only local files (file:///PATH)");
    for (; i < n; i++) {
        char c = u[i];
        if (c == '?' || c == '#') BAD("a file:// URL with a query or fragment: name the file only");
        if (c == '%') {
            int v = 0;
            for (int k = 1; k <= 2; k++) {
                const char h = i + (size_t)k < n ? u[i + (size_t)k] : 0;
                const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) BAD("a file:// URL with a bad %%-escape at character %zu", i);
                v = v * 16 + d;
            }
            if (!v) BAD("a file:// URL with %%00 in it");
            c = (char)v;
            i += 2;
        }
        if (o + 1 >= cap) BAD("a file:// URL over %zu characters", cap);
        out[o++] = c;
    }
    out[o] = 0;
    return 0;
}

/* The bytes of the file at path p (absolute) under the --image-dir rules. */
static int read_file(const char *p, uint8_t **out, size_t *outn, char *err, size_t errlen) {
    char lex[PATH_MAX], rp[PATH_MAX];
    const char *d = dir_real;
    if (!d[0])
        BAD("a local file ('%.160s'): k3 serve reads image files only when started with "
            "--image-dir DIR, and then only files inside DIR; or send the bytes as a data: "
            "URL (data:image/png;base64,...)", p);
    if (lex_norm(p, lex, sizeof lex) || (!inside(lex, dir_abs) && !inside(lex, d)))
        BAD("'%.160s' is outside --image-dir %.160s (the server reads only files inside it, "
            "'..' resolved): put the image there or send it as a data: URL", p, d);
    if (!realpath(p, rp)) {
        const int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            BAD("'%.160s': no such file in --image-dir %.160s: check the path", p, d);
        BAD("'%.160s' cannot be opened: %s", p, strerror(e));
    }
    if (!inside(rp, d))
        BAD("'%.160s' leads outside --image-dir %.160s through a symbolic link: put the image "
            "itself inside the folder or send it as a data: URL", p, d);
    const int fd = open(rp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        BAD("'%.160s' cannot be read: %s (the server's user must be able to read it)", p,
            strerror(errno));
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        BAD("'%.160s' is not a regular file (%s): name an image file inside --image-dir", p,
            S_ISDIR(st.st_mode) ? "a folder" : "a device, socket or pipe");
    }
    if ((uint64_t)st.st_size > K3_IMAGE_MAX_BYTES || st.st_size <= 0) {
        close(fd);
        if (st.st_size <= 0) BAD("'%.160s' is empty: no image bytes", p);
        BAD("'%.160s' is %lld bytes, over the limit of %zu for an image: downscale or "
            "recompress it", p,
            (long long)st.st_size, K3_IMAGE_MAX_BYTES);
    }
    const size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n);
    size_t got = 0;
    while (b && got < n) {
        const ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    const int e = errno;
    close(fd);
    if (!b) BAD("out of memory for %zu bytes of '%.160s'", n, p);
    if (got != n) {
        free(b);
        BAD("'%.160s' could not be read whole (%zu of %zu bytes: %s)", p, got, n,
            got ? "it changed while read" : strerror(e));
    }
    *out = b;
    *outn = n;
    return 0;
}

/* (serve.h) */
int serve_image_src(const char *u, size_t n, uint8_t **out, size_t *outn, int *is_file,
                    char *err, size_t errlen) {
    *out = NULL;
    *outn = 0;
    *is_file = 0;
    if (n >= 7 && !strncmp(u, "file://", 7)) {
        char p[PATH_MAX];
        if (file_url_path(u, n, p, sizeof p, err, errlen)) return -1;
        *is_file = 1;
        return read_file(p, out, outn, err, errlen);
    }
    if (n && u[0] == '/') {
        if (n >= PATH_MAX) BAD("a path over %d characters", PATH_MAX - 1);
        *is_file = 1;
        return read_file(u, out, outn, err, errlen);
    }
    const int http = (n >= 7 && !strncmp(u, "http://", 7)) ||
                     (n >= 8 && !strncmp(u, "https://", 8));
    if (!http && (n < 5 || strncmp(u, "data:", 5)))
        BAD("not a data: URL (data:image/png;base64,... is expected; a local file needs "
            "k3 serve --image-dir DIR and an absolute path or file:// URL inside DIR)");
    return k3_data_url(u, n, out, outn, K3_IMAGE_MAX_BYTES, err, errlen);
}
