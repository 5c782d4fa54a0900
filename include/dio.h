/* dio.h — the one direct-I/O path: reads through an aligned O_DIRECT window where the
 * filesystem allows it and through the page cache otherwise (said once per file). Used
 * by the trunk ring, the lm_head stream and the expert cache. */
#ifndef K3_DIO_H
#define K3_DIO_H
#include <stddef.h>
#include <stdint.h>

#define K3_DIO_ALIGN 4096
static inline uint64_t k3_up4k(uint64_t x) { return (x + 4095) & ~(uint64_t)4095; }
/* Buffer bytes a read of n bytes at any offset needs (the window may start up to 4095
 * bytes early). Buffers must be K3_DIO_ALIGN-aligned. */
static inline uint64_t k3_dio_room(uint64_t n) { return k3_up4k(n) + K3_DIO_ALIGN; }

typedef struct {
    char path[4096];
    const char *what;                          /* "trunk reads", "expert reads", ... */
    int fd, dfd;                               /* buffered fd; O_DIRECT fd or -1 */
    int direct;                                /* 1 while O_DIRECT reads work */
} K3DioFile;

/* Opens path for buffered and (where possible) O_DIRECT reads. 0, or -1 with err. */
int k3_dio_open(K3DioFile *f, const char *path, const char *what, char *err, size_t errlen);
void k3_dio_close(K3DioFile *f);
/* Reads bytes [off, off+n) into buf (k3_dio_room(n) bytes, aligned) and returns where
 * they start inside buf; *moved (may be NULL) = bytes transferred. NULL with err on an
 * I/O error or a short read. Safe from several threads at once. */
const unsigned char *k3_dio_read(K3DioFile *f, unsigned char *buf, uint64_t off, uint64_t n,
                                 uint64_t *moved, char *err, size_t errlen);
/* Buffered read of exactly n bytes at off into dst. 0, or -1 with err. */
int k3_dio_pread(K3DioFile *f, void *dst, uint64_t off, uint64_t n, char *err, size_t errlen);
#endif
