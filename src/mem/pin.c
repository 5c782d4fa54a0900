/* pin.c — the trunk's pinned prefix, read once when the stream opens (stream_priv.h).
 *
 * The pinned rows of every matrix are read (buffered) in slices by the kernels' threads
 * (pool.h), then each matrix is checked against its checksum, a matrix per task. One
 * thread alone reads at the speed of a copy into pages the kernel zeroes first: on a VM
 * that backs memory when it is first touched that is ~0.4 GB/s, and a 10 GB prefix kept
 * the first token waiting ~25 s. Slices are cut at fixed offsets of the pinned buffer, so
 * two threads rarely fault the same huge page. What is read and checked does not depend
 * on the thread count; a failure names the first matrix, in stream order, whose read
 * failed, else the first whose check did. A partly pinned matrix's check reads its
 * streamed rows through the window: those run one after another, after the rest. */
#include "stream_priv.h"
#include "codec.h"
#include "fault.h"
#include "pool.h"
#include "sysmem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes per read task: 32 MB (whole huge pages) for a large prefix; down to 64 KB for a
 * small one, so that it too is read in several slices (the tiny test models). */
static uint64_t slice_bytes(uint64_t n) {
    uint64_t b = 64u << 10;
    while (b < (32u << 20) && b < n / 64) b *= 2;
    return b;
}

typedef struct { int mat; uint64_t off, len; unsigned char *dst; } Slice;

typedef struct {
    K3Stream *s;
    Slice *sl;
    pthread_mutex_t mu;
    int bad;                                  /* the first failed matrix, or nmat */
    char err[700];
    uint64_t done;                            /* bytes read so far */
    double t0, every, next;                   /* every <= 0: no progress lines */
    int lines;
} Load;

/* A progress line on stderr every K3_PROGRESS_SECONDS (5 s), as the prefill's: a real
 * K3's pinned prefix is up to 111 GB, minutes from a drive. */
static void progress(Load *ld, uint64_t n) {
    if (ld->every <= 0) return;
    pthread_mutex_lock(&ld->mu);
    ld->done += n;
    const double now = k3_now(), el = now - ld->t0;
    const double f = (double)ld->done / (double)ld->s->pin_len;
    if (now >= ld->next && ld->done < ld->s->pin_len) {
        ld->next = now + ld->every;
        ld->lines++;
        char left[32];
        k3_secs_text(left, sizeof left, f > 0 ? el * (1 - f) / f : 0.0);
        fprintf(stderr, "k3: pinning the trunk: %.2f of %.2f GB read (%.0f%%), %.2f GB/s, "
                "~%s left\n", ld->done / K3_GB, ld->s->pin_len / K3_GB, 100 * f,
                el > 0 ? ld->done / K3_GB / el : 0.0, left);
    }
    pthread_mutex_unlock(&ld->mu);
}

static void fail(Load *ld, int j, const char *msg) {
    pthread_mutex_lock(&ld->mu);
    if (j < ld->bad) {
        snprintf(ld->err, sizeof ld->err, "%s", msg);
        __atomic_store_n(&ld->bad, j, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&ld->mu);
}

static void read_task(void *ctx, int i) {
    Load *ld = ctx;
    const Slice *x = &ld->sl[i];
    const SMat *sm = &ld->s->mat[x->mat];
    char why[600], msg[700];
    if (x->mat > __atomic_load_n(&ld->bad, __ATOMIC_RELAXED)) return;   /* an earlier failed */
    if (k3_dio_pread(&ld->s->file[sm->file], x->dst, x->off, x->len, why, sizeof why)) {
        snprintf(msg, sizeof msg, "pinning '%s': %s", sm->name, why);
        fail(ld, x->mat, msg);
    }
    progress(ld, x->len);
}

static void corrupt(Load *ld, int j, const char *why) {
    const SMat *sm = &ld->s->mat[j];
    char msg[700];
    snprintf(msg, sizeof msg, "%s: coded tensor '%s' (layer %d) is corrupt: %s; re-run "
             "k3 pack MODEL_DIR TRUNK_DIR", k3_trunk_path(ld->s->t), sm->name, sm->L, why);
    fail(ld, j, msg);
}

/* A matrix whose check reads its streamed rows too (through the window). */
static int needs_window(const SMat *sm) {
    return sm->pin_rows && sm->L >= 0 && !sm->split && (sm->ro ? sm->npieces > 0 :
                                                        sm->pin_rows < sm->rows);
}

/* Checks matrix j: its checksum (whole matrices) or its coded structure (a rank's share,
 * N > 1: the sum is the whole tensor's, which no rank reads). */
static void check(Load *ld, int j) {
    K3Stream *s = ld->s;
    SMat *sm = &s->mat[j];
    if (!sm->pin_rows || sm->L < 0) return;   /* lm_head: no checksum in the shards */
    if (k3_trunk_from_shards(s->t)) return;   /* nor any trunk matrix: only a pack has them */
    uint64_t off, len;
    k3_stream_rows_at(s, sm, sm->lo, sm->lo + sm->pin_rows, &off, &len);
    char why[600], msg[700];
    if (sm->split) {
        if (sm->ro && k3_codec_check_rows(sm->ro, sm->lo, sm->lo + sm->pin_rows, sm->pin,
                                          sm->cols, 1, why, sizeof why))
            corrupt(ld, j, why);
        return;
    }
    k3_sum_add(&sm->pin_sum, sm->pin, len);
    K3Sum all = sm->pin_sum;
    for (int i = sm->first; sm->ro && i < sm->first + sm->npieces; i++) {
        const SPiece *p = &s->pc[i];          /* coded, partly pinned: its pieces fit W */
        if (k3_dio_pread(&s->file[sm->file], s->win, p->off, p->n, why, sizeof why)) {
            snprintf(msg, sizeof msg, "checking '%s': %s", sm->name, why);
            fail(ld, j, msg);
            return;
        }
        k3_sum_add(&all, s->win, p->n);
    }
    for (int r = sm->pin_rows; !sm->ro && r < sm->rows;) {    /* a partly pinned matrix */
        int nb = (int)((s->W > sm->row_bytes ? s->W - 8192 : sm->row_bytes) / sm->row_bytes);
        if (nb > sm->rows - r) nb = sm->rows - r;
        uint64_t o2, l2;
        k3_stream_rows_at(s, sm, r, r + nb, &o2, &l2);
        if (k3_dio_pread(&s->file[sm->file], s->win, o2, l2, why, sizeof why)) {
            snprintf(msg, sizeof msg, "checking '%s': %s", sm->name, why);
            fail(ld, j, msg);
            return;
        }
        k3_sum_add(&all, s->win, l2);
        r += nb;
    }
    const uint64_t got = k3_sum_end(&all);
    if (got != sm->sum) {
        k3_trunk_bad_sum(s->t, sm->L, sm->mi, got, msg, sizeof msg);
        fail(ld, j, msg);
    } else if (sm->ro && k3_codec_check_rows(sm->ro, 0, sm->pin_rows, sm->pin, sm->cols, 1,
                                             why, sizeof why)) {
        corrupt(ld, j, why);                  /* the sum matched; a stale pack could not */
    }
}

static void check_task(void *ctx, int j) {
    Load *ld = ctx;
    if (!needs_window(&ld->s->mat[j])) check(ld, j);
}

/* Places every matrix's pinned rows in s->pin and cuts them into slices (NULL sl: counts
 * them); returns the slice count. */
static int place(K3Stream *s, Slice *sl) {
    const uint64_t slice = slice_bytes(s->pin_len);
    int n = 0;
    uint64_t at = 0;
    for (int j = 0; j < s->nmat; j++) {
        SMat *sm = &s->mat[j];
        if (!sm->pin_rows) continue;
        uint64_t off, len;
        k3_stream_rows_at(s, sm, sm->lo, sm->lo + sm->pin_rows, &off, &len);
        if (sl) sm->pin = s->pin + at;
        for (uint64_t a = at; a < at + len;) {
            const uint64_t b = (a / slice + 1) * slice < at + len ? (a / slice + 1) * slice :
                               at + len;
            if (sl) sl[n] = (Slice){ j, off + (a - at), b - a, s->pin + a };
            n++;
            a = b;
        }
        at += (len + 63) & ~(uint64_t)63;
    }
    return n;
}

int k3_stream_pin(K3Stream *s, int quiet, char *err, size_t errlen) {
    uint64_t n = 0, in_file = 0;              /* the buffer (rows 64-byte aligned), the file */
    for (int j = 0; j < s->nmat; j++) {
        SMat *sm = &s->mat[j];
        uint64_t off, len;
        k3_stream_rows_at(s, sm, sm->lo, sm->lo + sm->pin_rows, &off, &len);
        n += (len + 63) & ~(uint64_t)63;
        in_file += len;
        k3_sum_init(&sm->pin_sum);
        if (sm->ro)                           /* the stored tensor starts with its table */
            k3_sum_add(&sm->pin_sum, sm->ro, k3_codec_table_bytes(sm->rows));
        if (!sm->pin_rows) continue;
        long nr = ++s->nreads;                /* a read per pinned matrix, in stream order */
        if (nr == k3_faults()->trunk_read) {
            snprintf(err, errlen, "%s: injected failure of trunk read %ld (%s, "
                     "K3_FAULT_TRUNK_READ)", s->file[sm->file].path, nr, sm->name);
            return -1;
        }
    }
    s->pin_len = n;
    if (!n) return 0;
    Load ld = { .s = s, .bad = s->nmat, .t0 = k3_now() };
    ld.every = quiet ? 0 : k3_progress_every();
    ld.next = ld.t0 + ld.every;
    const int ns = place(s, NULL);
    if (!(s->pin = k3_alloc_huge(n)) || !(ld.sl = malloc(sizeof(Slice) * (size_t)ns))) {
        snprintf(err, errlen, "out of memory pinning %.3f GB of the trunk", n / K3_GB);
        return -1;
    }
    place(s, ld.sl);
    pthread_mutex_init(&ld.mu, NULL);
    k3_pool_run(read_task, &ld, ns);
    free(ld.sl);
    if (ld.bad == s->nmat) s->st->trunk_load_bytes += in_file;
    for (int j = 0; ld.bad == s->nmat && j < s->nmat; j++) {
        SMat *sm = &s->mat[j];
        if (!sm->pin_rows || !sm->ro || !sm->lo) continue;   /* coded from row lo > 0 */
        if (!(sm->pin_rel = malloc(sizeof(uint32_t) * (size_t)(sm->pin_rows + 1)))) {
            snprintf(err, errlen, "out of memory");
            pthread_mutex_destroy(&ld.mu);
            return -1;
        }
        for (int r = 0; r <= sm->pin_rows; r++)
            sm->pin_rel[r] = sm->ro[sm->lo + r] - sm->ro[sm->lo];
    }
    if (ld.bad == s->nmat) k3_pool_run(check_task, &ld, s->nmat);
    for (int j = 0; ld.bad == s->nmat && j < s->nmat; j++)
        if (needs_window(&s->mat[j])) check(&ld, j);
    pthread_mutex_destroy(&ld.mu);
    if (ld.lines && ld.bad == s->nmat)
        fprintf(stderr, "k3: pinned %.2f GB of the trunk in %.1f s\n", n / K3_GB,
                k3_now() - ld.t0);
    if (ld.bad == s->nmat) return 0;
    snprintf(err, errlen, "%s", ld.err);
    return -1;
}
