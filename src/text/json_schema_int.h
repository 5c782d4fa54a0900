/* json_schema_int.h — what the schema compiler's files share (src/text/json_schema*.c):
 * the context (grammar text being written, rule numbering, memo, arena of the schema
 * objects allOf merging builds) and the emitters of strings, numbers and patterns. */
#ifndef K3_JSON_SCHEMA_INT_H
#define K3_JSON_SCHEMA_INT_H
#include "json.h"
#include "strbuf.h"
#include <stddef.h>
#include <stdint.h>

typedef Buf JscBuf;   /* held under 2 JSC_MAX_TEXT: past it, oom (jsc_addn) */
void jsc_add(JscBuf *o, const char *s);
void jsc_addn(JscBuf *o, const char *s, size_t n);
void jsc_fmt(JscBuf *o, const char *fmt, ...);
/* code point c inside a GBNF literal ("...") or class ([...]) */
void jsc_cp(JscBuf *o, uint32_t c);
/* a GBNF literal of the UTF-8 bytes s[0..n) */
void jsc_lit(JscBuf *o, const char *s, size_t n);

typedef struct { const Json *node; int depth, rule, busy; } JscMemo;
typedef struct {
    JscBuf out;                 /* the rules written so far */
    int nrule;
    const Json *root;
    JscMemo *memo; int nmemo, capmemo;
    void **arena; int narena, caparena;
    char *err; size_t errlen;
    int fail;                   /* an error was written */
    int level;                  /* value() calls open */
    int fmt;                    /* the formats' rules are written */
    int any[64];                /* rule of "any value" at depth d, 0: not yet */
} Jsc;

enum { JSC_NONE = -2 };          /* a schema no value satisfies (within the bounds) */
/* s for a message: at most 60 bytes, control bytes as '?' */
const char *jsc_clean(const char *s, char out[64]);
int jsc_error(Jsc *c, const char *path, const char *fmt, ...);
int jsc_new_rule(Jsc *c);
/* writes "rN ::= body" */
void jsc_rule(Jsc *c, int r, const char *body);
/* s with $ref and allOf resolved and merged into one object (s itself when it has
 * neither); NULL with *none set (no value satisfies it) or with an error */
const Json *jsc_norm(Jsc *c, const Json *s, const char *path, int *none);
/* s without its keyword kw, merged with the schema b (as allOf) */
const Json *jsc_with(Jsc *c, const Json *s, const char *kw, const Json *b, const char *path);
enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_NUM = 8, T_INT = 16, T_BOOL = 32, T_NULL = 64,
       T_ALL = 127 };
extern const char *const JSC_TYPE[7];   /* the names of the T_ bits, in order */
/* type's set of T_ bits (all when absent) */
int jsc_types(Jsc *c, const Json *s, unsigned *out, const char *path);
void jsc_ser(JscBuf *o, const Json *v);
/* the rule for a string under s's minLength, maxLength, pattern, format; JSC_NONE, or -1 */
int jsc_string(Jsc *c, const Json *s, const char *path);
/* integers (integer 1) or numbers under minimum, maximum, exclusiveMinimum/Maximum */
int jsc_number(Jsc *c, const Json *s, int integer, const char *path);
/* the rule for the characters (JSON-escaped, between the quotes) of a string that the
 * ECMA-262 regular expression re matches somewhere (unanchored, as JSON Schema says) */
int jsc_pattern(Jsc *c, const char *re, const char *path);
/* a non-negative count keyword (minLength...): 0 with *v set (dflt when absent), or -1 */
int jsc_count(Jsc *c, const Json *s, const char *kw, long dflt, long *v, const char *path);
#endif
