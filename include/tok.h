/* tok.h — Kimi K3's tokenizer (tiktoken BPE + K3's pre-tokenizer), byte-exact.
 * See docs/TOKENIZER.md §1–§5.
 *
 * Files: DIR/tiktoken.model (one "base64(token bytes) SPACE rank" per line, ranks
 * 0..n_ranks-1) and DIR/tokenizer_config.json (added_tokens_decoder names some of the
 * 256 reserved ids [n_ranks, n_ranks+256); the others are <|reserved_token_ID|>).
 *
 * Encoding reproduces TikTokenTokenizer.encode of tokenization_kimi.py: the text is
 * cut into 400,000-character windows, each window into chunks with at most 25,000
 * consecutive whitespace / non-whitespace characters (Python str.isspace), and each
 * chunk goes through tiktoken (special tokens matched leftmost if enabled, then
 * K3's pat_str pre-tokenizer, then rank BPE).
 *
 * Invalid UTF-8 in the input never fails and is never altered: every byte that is not
 * part of a well-formed UTF-8 sequence (stray continuation byte, overlong form,
 * surrogate, > U+10FFFF, truncated sequence, C0/C1/F5..FF) counts as one character of
 * the "other" class (like a symbol: not letter, number or whitespace) and is BPE'd as
 * its raw byte. Hence decode(encode(x)) == x for every byte string x.
 *
 * Thread safety: a loaded Tok is read-only; encode/decode may run concurrently. */
#ifndef K3_TOK_H
#define K3_TOK_H
#include <stddef.h>
#include <stdint.h>

#define TOK_N_RESERVED 256

typedef struct Tok Tok;

/* Loads DIR/tiktoken.model and DIR/tokenizer_config.json (the config is optional:
 * without it every reserved id is <|reserved_token_ID|>). NULL on error, with a
 * message naming the file, line and fix in err. */
Tok *tok_load(const char *dir, char *err, size_t errlen);
/* Same with explicit paths; config_path may be NULL. */
Tok *tok_load_files(const char *model_path, const char *config_path, char *err, size_t errlen);
void tok_free(Tok *t);

int tok_n_ranks(const Tok *t);      /* number of BPE ranks (163584 for K3) */
int tok_vocab_size(const Tok *t);   /* n_ranks + 256 */
/* id of a reserved token by its exact name ("<|end_of_msg|>"), or -1. */
int tok_special_id(const Tok *t, const char *name);

/* Encodes text[0..len). special != 0: the 256 reserved names become their ids
 * (tiktoken allowed_special="all"); special == 0: they are ordinary text.
 * Returns a malloc'd id array (free() it) and its length in *n; NULL only when out
 * of memory (*n = 0). An empty text gives a non-NULL array with *n = 0. */
int32_t *tok_encode(const Tok *t, const char *text, size_t len, int special, size_t *n);

/* Raw bytes of one id (a reserved id gives its literal name). NULL if id is out of
 * range. The bytes are not NUL-terminated and need not be valid UTF-8. */
const char *tok_token_bytes(const Tok *t, int32_t id, size_t *len);
/* Concatenated bytes of ids[0..n) into a malloc'd, NUL-terminated buffer (length in
 * *len). Ids out of range are skipped and counted in *n_bad (if not NULL). */
char *tok_decode(const Tok *t, const int32_t *ids, size_t n, size_t *len, size_t *n_bad);

/* Streaming decoder for a terminal: bytes of an incomplete UTF-8 sequence at the end
 * of what was fed so far are held back until the next token completes it (or proves
 * it invalid: invalid bytes are passed through unchanged, never dropped). */
typedef struct {
    unsigned char held[4];
    int nheld;
    char *buf;           /* output buffer owned by the stream */
    size_t cap;
} TokStream;
void tok_stream_init(TokStream *s);
/* Feeds one id; *out and *outlen receive the bytes that are safe to print now (valid
 * until the next call). Returns 0, or -1 if id is out of range (nothing changes). */
int tok_stream_put(TokStream *s, const Tok *t, int32_t id, const char **out, size_t *outlen);
/* End of stream: returns whatever is still held (an incomplete sequence, raw). */
void tok_stream_flush(TokStream *s, const char **out, size_t *outlen);
void tok_stream_free(TokStream *s);

/* CLI: argv[0] is "tokenize" or "detokenize".
 *   tokenize   --tok DIR [--special] FILE...   one line of comma-separated ids per FILE
 *   detokenize --tok DIR --ids LIST            decoded bytes to stdout
 * --tok defaults to $K3_TOK_FILES. Returns 0 ok, 1 runtime error (a FILE cannot be read,
 * stdout fails), 2 usage error or a tokenizer that is missing or malformed. */
int tok_cli(int argc, char **argv);

/* ---- internals, exposed for tests, fuzzers and benchmarks ---- */

/* Character classes of the pre-tokenizer (src/unicode_tab.c, Unicode 16.0.0). */
enum {
    TOKU_HAN = 1,   /* Script=Han */
    TOKU_UP = 2,    /* Lu, Lt, not Han: only in U */
    TOKU_LO = 4,    /* Ll, not Han: only in W */
    TOKU_BOTH = 8,  /* Lm, Lo, M, not Han: in U and W */
    TOKU_L = 16,    /* \p{L} */
    TOKU_N = 32,    /* \p{N} */
    TOKU_WS = 64,   /* White_Space (regex \s) */
    TOKU_PYSP = 128 /* Python str.isspace() */
};
extern const char k3_unicode_version[];
extern const uint16_t k3_uni_stage1[];
extern const uint8_t k3_uni_stage2[];
static inline unsigned tok_uflags(uint32_t cp) {
    return cp < 0x110000 ? k3_uni_stage2[(size_t)k3_uni_stage1[cp >> 8] * 256 + (cp & 255)] : 0;
}
/* Decodes one UTF-8 character at s[0..n), n >= 1. Returns its length (1..4) and the
 * code point in *cp; an ill-formed byte gives length 1 and *cp = 0xFFFFFFFF. */
int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* Pre-tokenizer (K3 pat_str) over one chunk: writes the byte end offset of each piece
 * to a malloc'd *ends; returns the number of pieces, or -1 when out of memory. */
long tok_split(const char *text, size_t len, size_t **ends);
/* Python-wrapper chunking: byte end offsets of the chunks (400k windows, 25k runs). */
long tok_chunks(const char *text, size_t len, size_t **ends);
/* BPE of one piece (no whole-piece shortcut), appending ranks to out (cap >= len);
 * returns the count. algo: 0 auto, 1 tiktoken's O(n^2) loop, 2 heap O(n log n). */
size_t tok_bpe(const Tok *t, const unsigned char *p, size_t len, int32_t *out, int algo);
/* Rank of exactly these bytes, or -1. */
int32_t tok_rank(const Tok *t, const unsigned char *p, size_t len);
#endif
