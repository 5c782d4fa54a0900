/* test_st.c — safetensors indexing: valid single-file and sharded checkpoints, and
 * every header/index validation (each must fail with a clear message, never crash). */
#include "st.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static char dir[256];

static void rmdir_all(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

static void fresh_dir(void) {
    rmdir_all();
    mkdir(dir, 0755);
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void write_raw(const char *name, const void *b, size_t n) {
    char p[512]; path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); exit(1); }
    if (n && fwrite(b, 1, n, f) != n) { perror(p); exit(1); }
    fclose(f);
}

/* A safetensors file: 8-byte length, header, then data_len bytes (byte i = i & 255). */
static void write_st(const char *name, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    size_t n = 8 + hl + data_len;
    unsigned char *b = malloc(n ? n : 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (unsigned char)(i & 255);
    write_raw(name, b, n);
    free(b);
}

static void write_text(const char *name, const char *s) { write_raw(name, s, strlen(s)); }

/* Opens dir and expects failure with every needle in the message. */
static void expect_fail(const char *what, const char *n1, const char *n2) {
    char err[1024] = "";
    StIndex *ix = st_open(dir, err, sizeof err);
    CHECK(ix == NULL, "%s: should fail", what);
    CHECK(!n1 || strstr(err, n1), "%s: message lacks '%s': %s", what, n1, err);
    CHECK(!n2 || strstr(err, n2), "%s: message lacks '%s': %s", what, n2, err);
    if (getenv("ST_VERBOSE")) printf("    %-28s -> %s\n", what, err);
    st_close(ix);
}

/* Single-file checkpoint with one header; expects failure naming the tensor. */
static void bad_header(const char *what, const char *header, size_t data_len, const char *n1,
                       const char *n2) {
    fresh_dir();
    write_st("model.safetensors", header, data_len);
    expect_fail(what, n1, n2);
}

static const char *GOOD =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]},"
    "\"c\":{\"dtype\":\"U8\",\"shape\":[1,1,5],\"data_offsets\":[28,33]},"
    "\"s\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[33,35]},"
    "\"z\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[35,35]}}";

static void test_single(void) {
    fresh_dir();
    write_st("model.safetensors", GOOD, 35);
    char err[1024];
    StIndex *ix = st_open(dir, err, sizeof err);
    CHECK(ix, "single file opens: %s", err);
    if (!ix) return;
    CHECK(ix->n_shards == 1 && ix->n_tensors == 5, "counts %d %zu", ix->n_shards, ix->n_tensors);
    CHECK(st_find(ix, "__metadata__") == NULL, "__metadata__ is not a tensor");
    const StTensor *b = st_find(ix, "b");
    size_t hl = strlen(GOOD);
    CHECK(b && b->dtype == ST_F32 && b->ndim == 1 && b->shape[0] == 4 && b->nbytes == 16 &&
          b->offset == 8 + hl + 12, "tensor b fields");
    CHECK(ix->shards[0].data_start == 8 + hl && ix->shards[0].fd == -1, "shard fields");
    const StTensor *c = st_find(ix, "c");
    CHECK(c && st_numel(c) == 5 && c->ndim == 3, "numel");
    const StTensor *s = st_find(ix, "s");
    CHECK(s && s->ndim == 0 && st_numel(s) == 1 && s->nbytes == 2, "scalar");
    const StTensor *z = st_find(ix, "z");
    CHECK(z && st_numel(z) == 0 && z->nbytes == 0, "empty tensor");
    CHECK(st_find(ix, "d") == NULL && st_find(ix, "") == NULL, "absent names");
    unsigned char buf[16];
    CHECK(b && st_read(ix, b, buf, err, sizeof err) == 0, "st_read: %s", err);
    int ok = 1;
    for (int i = 0; i < 16; i++) ok &= buf[i] == (unsigned char)(12 + i);
    CHECK(ok, "st_read bytes");
    CHECK(st_pread(ix, 0, ix->shards[0].data_start + 28, buf, 5, err, sizeof err) == 0 &&
          buf[0] == 28 && buf[4] == 32, "st_pread");
    CHECK(st_pread(ix, 0, ix->shards[0].file_size - 2, buf, 3, err, sizeof err) == -1 &&
          strstr(err, "past the end"), "st_pread bounds: %s", err);
    CHECK(st_pread(ix, 1, 0, buf, 1, err, sizeof err) == -1, "st_pread bad shard");
    CHECK(st_dtype_size(ST_BF16) == 2 && st_dtype_size(ST_U8) == 1 && st_dtype_size(ST_F64) == 8 &&
          st_dtype_size(ST_BOOL) == 1, "dtype sizes");
    CHECK(!strcmp(st_dtype_name(ST_BF16), "BF16") && !strcmp(st_dtype_name(ST_U32), "U32"),
          "dtype names");

    /* truncated after open: the next read must fail, never return zeros */
    char p[512]; path_of(p, sizeof p, "model.safetensors");
    CHECK(truncate(p, (off_t)(8 + hl + 20)) == 0, "truncate");
    memset(buf, 0xAA, sizeof buf);
    CHECK(c && st_read(ix, c, buf, err, sizeof err) == -1 && strstr(err, "short read") &&
          strstr(err, "'c'"), "short read after truncation: %s", err);
    st_close(ix);

    /* truncated before the fd was opened: caught at open of the fd */
    write_st("model.safetensors", GOOD, 35);
    ix = st_open(dir, err, sizeof err);
    CHECK(ix, "reopen: %s", err);
    if (ix) {
        CHECK(truncate(p, (off_t)(8 + hl + 20)) == 0, "truncate");
        CHECK(st_read(ix, st_find(ix, "a"), buf, err, sizeof err) == -1 &&
              strstr(err, "truncated"), "shrunk file: %s", err);
        st_close(ix);
    }
    printf("single file, reads, truncation: ok\n");
}

static void test_header_errors(void) {
    fresh_dir();
    write_raw("model.safetensors", "\x10\0\0", 3);
    expect_fail("file shorter than 8 bytes", "too short", "model.safetensors");

    fresh_dir();
    write_raw("model.safetensors", "\xff\0\0\0\0\0\0\0{}", 10);
    expect_fail("header length past EOF", "past the end", "model.safetensors");

    fresh_dir();
    write_raw("model.safetensors", "\0\0\0\0\0\0\0\x01{}", 10);
    expect_fail("header length huge", "not sane", NULL);

    fresh_dir();
    write_raw("model.safetensors", "\0\0\0\0\0\0\0\0", 8);
    expect_fail("header length 0", "not sane", NULL);

    bad_header("bad JSON", "{\"a\":{\"dtype\":\"F32\",", 0, "malformed", "line 1");
    bad_header("header not an object", "[1,2]", 0, "expected an object", NULL);
    bad_header("entry not an object", "{\"a\":5}", 0, "'a'", "expected an object");
    /* a name with control bytes is refused and shown escaped, never raw */
    bad_header("control byte in a name",
               "{\"a\\u001b[2J\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
               "tensor name \"a\\u001b[2J\" holds a control character", NULL);
    bad_header("unknown dtype",
               "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}",
               2, "unknown dtype \"F8_E4M3\"", "'w'");
    bad_header("dtype missing", "{\"w\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "'dtype'",
               "'w'");
    bad_header("shape not array",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":2,\"data_offsets\":[0,2]}}", 2,
               "'shape'", "'w'");
    bad_header("size mismatch",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24,
               "needs 24 bytes", "'w'");
    bad_header("overlap",
               "{\"x\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
               "\"y\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
               16, "overlap", "'y'");
    bad_header("overlap (unsorted)",
               "{\"y\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]},"
               "\"z\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[12,14]},"
               "\"x\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",
               16, "overlap", "'x'");
    bad_header("offsets out of range",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", 10,
               "exceed the data section (10 bytes)", "'w'");
    bad_header("begin > end", "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,2]}}", 10,
               "begin > end", NULL);
    bad_header("negative offset",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[-2,0]}}", 10,
               "data_offsets", NULL);
    bad_header("offsets wrong arity",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2,4]}}", 10,
               "data_offsets", NULL);
    bad_header("ndim > 8",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
               "9 dimensions", NULL);
    bad_header("negative dim",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[-1,2],\"data_offsets\":[0,2]}}", 2,
               "shape[0]", NULL);
    bad_header("fractional dim",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[2,1.5],\"data_offsets\":[0,3]}}", 3,
               "shape[1]", NULL);
    bad_header("shape overflow",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904],"
               "\"data_offsets\":[0,0]}}", 0,
               "needs more than", NULL);
    bad_header("bytes overflow",
               "{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
               "\"data_offsets\":[0,0]}}", 0,
               "needs more than", NULL);
    bad_header("huge offsets",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],"
               "\"data_offsets\":[18446744073709551615,0]}}", 1, "data_offsets", NULL);
    bad_header("duplicate tensor",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
               2, "listed twice", "'w'");
    bad_header("empty header object", "{}", 0, "no tensors", NULL);

    fresh_dir();
    expect_fail("empty directory", "neither", NULL);
    printf("header validation: ok\n");
}

/* Two shards with an index. */
static const char *S1 = "{\"l.0.w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                        "\"l.0.b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
static const char *S2 = "{\"l.1.w\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}";
#define F1 "model-00001-of-000002.safetensors"
#define F2 "model-00002-of-000002.safetensors"

static void write_sharded(const char *index) {
    fresh_dir();
    write_st(F1, S1, 12);
    write_st(F2, S2, 3);
    write_text("model.safetensors.index.json", index);
}

static void test_sharded(void) {
    /* index lists F2 first: shard ids must still follow file-name order */
    write_sharded("{\"metadata\":{\"total_size\":15},\"weight_map\":{"
                  "\"l.1.w\":\"" F2 "\",\"l.0.w\":\"" F1 "\",\"l.0.b\":\"" F1 "\"}}");
    char err[1024];
    StIndex *ix = st_open(dir, err, sizeof err);
    CHECK(ix, "sharded opens: %s", err);
    if (ix) {
        CHECK(ix->n_shards == 2 && ix->n_tensors == 3, "counts");
        CHECK(strstr(ix->shards[0].path, F1) && strstr(ix->shards[1].path, F2), "shard order");
        const StTensor *t = st_find(ix, "l.1.w");
        unsigned char b[3];
        CHECK(t && t->shard == 1 && st_read(ix, t, b, err, sizeof err) == 0 && b[0] == 0 &&
              b[2] == 2, "read from shard 2");
        t = st_find(ix, "l.0.b");
        CHECK(t && t->shard == 0 && t->offset == 8 + strlen(S1) + 8, "offset in shard 1");
        int fd = st_shard_fd(ix, 0, err, sizeof err);
        CHECK(fd >= 0 && st_shard_fd(ix, 0, err, sizeof err) == fd, "st_shard_fd stable");
        st_close(ix);
    }

    write_sharded("{\"weight_map\":{\"l.1.w\":\"" F2 "\",\"l.0.w\":\"" F1 "\","
                  "\"l.0.b\":\"model-00007-of-000002.safetensors\"}}");
    expect_fail("index names a missing shard", "model-00007-of-000002.safetensors", "missing");

    write_sharded("{\"weight_map\":{\"l.1.w\":\"" F2 "\",\"l.0.w\":\"" F1 "\",\"l.0.b\":\"" F1 "\","
                  "\"l.9.w\":\"" F2 "\"}}");
    expect_fail("mapped tensor absent from shard", "'l.9.w'", F2);

    write_sharded("{\"weight_map\":{\"l.1.w\":\"" F2 "\",\"l.0.w\":\"" F2 "\","
                  "\"l.0.b\":\"" F1 "\"}}");
    expect_fail("tensor in the wrong shard", "'l.0.w'", "stored in " F1);

    write_sharded("{\"weight_map\":{\"l.1.w\":\"" F2 "\",\"l.0.w\":\"" F1 "\"}}");
    expect_fail("shard tensor not in weight_map", "'l.0.b'", "not listed");

    write_sharded("{\"weight_map\":{\"l.1.w\":\"../" F2 "\",\"l.0.w\":\"" F1 "\","
                  "\"l.0.b\":\"" F1 "\"}}");
    expect_fail("path in weight_map", "not a plain file name", NULL);

    write_sharded("{\"weight_map\":{\"l.1.w\\u0007\":\"" F2 "\"}}");
    expect_fail("control byte in a weight_map key", "weight_map key \"l.1.w\\u0007\"", NULL);
    write_sharded("{\"weight_map\":{\"l.1.w\":\"\\u001b]0;x\\u0007\"}}");
    expect_fail("control byte in a weight_map value", "value \"\\u001b]0;x\\u0007\"", NULL);

    write_sharded("{\"weight_map\":{\"l.1.w\":3}}");
    expect_fail("weight_map value not a string", "'l.1.w'", NULL);

    write_sharded("{\"metadata\":{}}");
    expect_fail("index without weight_map", "weight_map", NULL);

    write_sharded("{\"weight_map\":{\"l.1.w\":\"" F2 "\",");
    expect_fail("index malformed JSON", "malformed", "model.safetensors.index.json");

    /* the same tensor stored in two shards */
    fresh_dir();
    write_st(F1, S1, 12);
    write_st(F2, "{\"l.0.b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);
    write_text("model.safetensors.index.json",
               "{\"weight_map\":{\"l.0.w\":\"" F1 "\",\"l.0.b\":\"" F1 "\"}}");
    /* F2 is not named by the index, so it is not read: this opens fine */
    ix = st_open(dir, err, sizeof err);
    CHECK(ix && ix->n_shards == 1, "unnamed shard ignored: %s", err);
    st_close(ix);
    write_text("model.safetensors.index.json",
               "{\"weight_map\":{\"l.0.w\":\"" F1 "\",\"l.0.b\":\"" F2 "\"}}");
    expect_fail("tensor in two shards", "'l.0.b'", "also in");

    /* a corrupt shard behind a valid index: error names the shard and the tensor */
    fresh_dir();
    write_st(F1, S1, 10);
    write_st(F2, S2, 3);
    write_text("model.safetensors.index.json",
               "{\"weight_map\":{\"l.1.w\":\"" F2 "\",\"l.0.w\":\"" F1 "\",\"l.0.b\":\"" F1 "\"}}");
    expect_fail("truncated shard", F1, "'l.0.b'");

    /* st_add_file used directly; a failing file leaves the index as it was */
    StIndex *s = st_new();
    char p[512];
    write_st(F2, S2, 3);
    path_of(p, sizeof p, F2);
    CHECK(st_add_file(s, p, err, sizeof err) == 0 && s->n_tensors == 1, "st_add_file: %s", err);
    path_of(p, sizeof p, F1);
    CHECK(st_add_file(s, p, err, sizeof err) == -1 && s->n_tensors == 1 && s->n_shards == 1,
          "failed add rolls back");
    CHECK(st_find(s, "l.1.w") && !st_find(s, "l.0.w"), "lookups after rollback");
    CHECK(st_add_file(s, "/nonexistent/x.safetensors", err, sizeof err) == -1 &&
          strstr(err, "cannot open"), "missing file");
    st_close(s);
    printf("sharded index validation: ok\n");
}

static void test_many(void) {
    /* many tensors: exercises hash growth */
    fresh_dir();
    size_t n = 20000, cap = n * 96 + 16, o = 0;
    char *h = malloc(cap);
    o += (size_t)sprintf(h + o, "{");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(h + o, "%s\"t.%zu\":{\"dtype\":\"U8\",\"shape\":[2],"
                             "\"data_offsets\":[%zu,%zu]}", i ? "," : "", i, 2 * i, 2 * i + 2);
    sprintf(h + o, "}");
    write_st("model.safetensors", h, 2 * n);
    free(h);
    char err[1024];
    StIndex *ix = st_open(dir, err, sizeof err);
    CHECK(ix && ix->n_tensors == n, "many tensors: %s", err);
    int ok = 1;
    for (size_t i = 0; ix && i < n; i++) {
        char nm[32]; snprintf(nm, sizeof nm, "t.%zu", i);
        const StTensor *t = st_find(ix, nm);
        ok &= t && t->offset == ix->shards[0].data_start + 2 * i;
    }
    CHECK(ok, "every lookup");
    CHECK(!ix || !st_find(ix, "t.20000"), "absent");
    st_close(ix);
    printf("hash with %zu tensors: ok\n", n);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/k3_test_st_%d", (int)getpid());
    test_single();
    test_header_errors();
    test_sharded();
    test_many();
    rmdir_all();
    if (fails) { printf("test_st: %d failures\n", fails); return 1; }
    printf("test_st: all passed\n");
    return 0;
}
