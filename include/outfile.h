/* outfile.h — the one way k3 writes an output file (--out, --dump-logits, batch --out,
 * chat --save-state and --history, the server's state folder, pack).
 *
 * A regular file, or a path that does not exist yet, is written to a temporary file beside
 * it, fsynced and renamed over it (the old file's mode kept): a reader never sees half a
 * file, and a failed write leaves the old one as it was. A symlink is followed and its target
 * written that way (the link stays a link). Anything else (a character device such as
 * /dev/null, a FIFO, a socket, /dev/stdout, /dev/fd/N from a shell's >(cmd)) is opened and
 * written in place: never unlinked, never replaced. "-" is stdout where the caller allows. */
#ifndef K3_OUTFILE_H
#define K3_OUTFILE_H
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct {
    int fd;            /* write here (or through f) */
    FILE *f;           /* k3_out_stdio's stream over fd, else NULL */
    int in_place;      /* 1: written where it is (device, FIFO, socket, an open fd) */
    int keep_fd;       /* in place on a dup of a descriptor of ours: closed, never synced */
    char *target;      /* the file the rename replaces (a symlink's target), else NULL */
    char *tmp;         /* the temporary beside target, else NULL */
    char *name;        /* the path as given, for messages */
} K3Out;

/* Checks that path can be written, before a long run, creating nothing that stays: its
 * folder exists and takes new files (for a regular file or a new path), a folder is refused.
 * 0, or -1 with "PATH: what is wrong; the fix" in err. dash: "-" means stdout. */
int k3_out_check(const char *path, int dash, char *err, size_t errlen);
/* 1 when path would be written in place (a descriptor's name, a device, a FIFO, a socket):
 * a file read back before it is rewritten (chat's --history) has nothing to read there. */
int k3_out_in_place(const char *path);
/* Opens path for writing as above; mode is a new file's (an existing one keeps its own).
 * 0, or -1 with the reason in err (nothing created). */
int k3_out_open(K3Out *o, const char *path, int dash, mode_t mode, char *err, size_t errlen);
/* A stdio stream over the output (fully buffered); NULL on failure (out of memory). */
FILE *k3_out_stdio(K3Out *o);
/* Writes n bytes at the current end (EINTR retried): 0, or -1 with errno set. */
int k3_out_write(K3Out *o, const void *p, size_t n);
/* Finishes: flushes, fsyncs a file, closes, renames the temporary over the target. 0, or -1
 * with "PATH: writing it: why" in err, the temporary removed and the old file untouched. */
int k3_out_commit(K3Out *o, char *err, size_t errlen);
/* Gives up: closes and removes the temporary; the old file stays. Safe after a commit. */
void k3_out_abort(K3Out *o);
/* The whole of b[0..n) to path in one call (open, write, commit). */
int k3_out_save(const char *path, const void *b, size_t n, mode_t mode, char *err, size_t errlen);
#endif
