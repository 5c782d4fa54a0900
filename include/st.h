/* st.h — safetensors over a sharded checkpoint. Opening reads headers only, never
 * tensor data; everything in the headers is validated (see safetensors.c). */
#ifndef K3_ST_H
#define K3_ST_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ST_BF16, ST_F16, ST_F32, ST_U8, ST_I8, ST_I16, ST_I32, ST_I64, ST_F64, ST_U16, ST_U32, ST_U64,
    ST_BOOL
} StDtype;

typedef struct {
    const char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[8];
    int shard;              /* index into StIndex.shards */
    uint64_t offset;        /* absolute byte offset of the data in the shard file */
    uint64_t nbytes;
} StTensor;

typedef struct {
    char *path;             /* full path of the shard file */
    uint64_t file_size;
    uint64_t data_start;    /* 8 + header length */
    int fd;                 /* -1 until st_shard_fd() opens it */
} StShard;

typedef struct StIndex StIndex;
struct StIndex {
    StShard *shards; int n_shards;
    StTensor *tensors; size_t n_tensors;
    /* private: hash table, string pool */
    void *priv;
};

/* Open dir/model.safetensors.index.json (any number of shards) or dir/model.safetensors.
 * Returns NULL and a message naming the file and the problem in err. */
StIndex *st_open(const char *dir, char *err, size_t errlen);
/* Index one safetensors file (used by st_open and by tests/benchmarks). */
int st_add_file(StIndex *ix, const char *path, char *err, size_t errlen);
StIndex *st_new(void);
void st_close(StIndex *ix);

const StTensor *st_find(const StIndex *ix, const char *name);   /* hash lookup */
size_t st_dtype_size(StDtype t);
const char *st_dtype_name(StDtype t);
int64_t st_numel(const StTensor *t);
/* t's shape as "[A, B, ...]" in buf (n bytes); buf. */
const char *st_shape_str(const StTensor *t, char *buf, size_t n);
/* Read a tensor's bytes into dst (nbytes). Short read / IO error -> -1 with message. */
int st_read(StIndex *ix, const StTensor *t, void *dst, char *err, size_t errlen);
/* Read raw bytes [off, off+n) of a shard. */
int st_pread(StIndex *ix, int shard, uint64_t off, void *dst, uint64_t n, char *err, size_t errlen);
/* The shard's read-only fd, opened on first use (thread-safe) and kept until st_close;
 * -1 with a message if it cannot be opened or shrank since st_open. */
int st_shard_fd(StIndex *ix, int shard, char *err, size_t errlen);
#endif
