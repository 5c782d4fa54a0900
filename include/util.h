/* util.h — small helpers shared by the CLI and the engine. */
#ifndef K3_UTIL_H
#define K3_UTIL_H
#include <stddef.h>
#include <stdint.h>

double k3_now(void);                 /* monotonic seconds: the one clock */
/* s as "42 s", "3m05s" or "2h07m" (a progress line's time left). */
void k3_secs_text(char *b, size_t n, double s);
/* Seconds between progress lines on stderr: K3_PROGRESS_SECONDS, else 5. */
double k3_progress_every(void);
/* SIGINT calls handler once; a second Ctrl-C is the default's (ends the process). */
void k3_sigint_once(void (*handler)(int));
/* FNV-1a 64: the one hash of identities (checkpoint identity, config, chat state).
 * Chain calls: h = k3_hash(k3_hash(K3_HASH_INIT, a, na), b, nb). */
#define K3_HASH_INIT 0xcbf29ce484222325ull
uint64_t k3_hash(uint64_t h, const void *p, size_t n);
/* XXH64 (seed 0) at memory speed: the packed trunk's per-tensor checksums (checksum.c).
 * k3_sum64 in one call, or init/add/end over pieces: the same value for any split. */
typedef struct { uint64_t v[4], len; unsigned char tail[32]; unsigned ntail; } K3Sum;
void k3_sum_init(K3Sum *s);
void k3_sum_add(K3Sum *s, const void *p, size_t n);
uint64_t k3_sum_end(const K3Sum *s);
uint64_t k3_sum64(const void *p, size_t n);
/* The saved states' checksum (chat_state.c, serve_disk.c: the last 8 bytes of a file hold
 * it over the bytes before them), in one call or init/add/end; not XXH64's value. */
uint64_t k3_state_sum(const void *p, size_t n);
typedef struct { uint64_t v[4]; unsigned char tail[32]; size_t nt; uint64_t total; } K3StateSum;
void k3_state_sum_init(K3StateSum *h);
void k3_state_sum_add(K3StateSum *h, const void *p, size_t n);
uint64_t k3_state_sum_end(const K3StateSum *h);
/* A fresh sampling seed (/dev/urandom, else the clock), under 10^10: short enough to retype. */
uint64_t k3_draw_seed(void);
uint64_t k3_peak_rss(void);          /* VmHWM (else getrusage ru_maxrss), in bytes */
uint64_t k3_mem_available(void);     /* /proc/meminfo MemAvailable in bytes, 0 if unknown */
/* A command-line integer for flag: all of v, lo <= x <= 2^30. -1 with a message on
 * stderr naming the flag otherwise. */
int k3_parse_int(const char *flag, const char *v, int lo, int *out);
/* The same check with the message in err instead of on stderr. */
int k3_parse_int_msg(const char *flag, const char *v, int lo, int *out, char *err, size_t errlen);
/* Parses "1,2,3" (spaces allowed) into a malloc'd array; -1 with a message on error. */
int k3_parse_ids(const char *s, int **ids, int *n, char *err, size_t errlen);
/* pread until n bytes arrive (EINTR retried, requests capped at 1 GiB); returns the
 * bytes read (< n only at end of file), or -1 on error. */
int64_t k3_pread_full(int fd, void *dst, uint64_t n, uint64_t off);
/* Reads a whole file ("-" = stdin) into a malloc'd NUL-terminated buffer (length in
 * *len). A file over max bytes is refused. NULL with "PATH: what went wrong" in err. */
char *k3_slurp(const char *path, size_t max, size_t *len, char *err, size_t errlen);
/* k3_slurp without a limit or message: NULL with errno set. */
char *k3_read_file(const char *path, size_t *len);
#endif
