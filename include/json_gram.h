/* json_gram.h — JSON mode's incremental validator (src/text/json_gram.c): a schema
 * compiled from a subset of JSON Schema, and a state fed the reply's bytes that says
 * whether they are still a prefix of some valid document and whether they are one.
 * Constrained sampling (docs/SAMPLING.md) masks, at each step, every token whose bytes
 * would leave that set; the end token only once the value is complete.
 *
 * The subset: type (object, array, string, number, integer, boolean, null, or a list of
 * them; absent: any), properties, required (names in properties), additionalProperties
 * (false, true or a schema; absent: true, any value), items, minItems, maxItems,
 * minLength, maxLength (code points; an escape counts one), enum, const; and the
 * annotations title, description, default, examples, $schema, $id, $comment, which change
 * nothing. Any other keyword is refused with its name. enum and const values match as
 * their compact serialisation (json_quote's strings, the shortest round-trip number), byte
 * for byte; object keys match the properties' names likewise.
 *
 * Bounds, so a constrained reply cannot run forever inside what is allowed: a run of
 * whitespace is at most JG_MAX_WS bytes, each part of a number at most JG_MAX_DIGITS
 * digits, nesting at most JG_DEPTH; nothing may follow the top-level value but the end.
 * Strings (without maxLength), arrays (without maxItems) and objects with
 * additionalProperties are bounded by max_tokens only. */
#ifndef K3_JSON_GRAM_H
#define K3_JSON_GRAM_H
#include <stddef.h>
#include <stdint.h>

#define JG_DEPTH 32
#define JG_MAX_WS 16
#define JG_MAX_DIGITS 32
#define JG_MAX_PROPS 64           /* properties of one object; values of one enum */

typedef struct JgSchema JgSchema;
struct Json;
struct Tok;

/* The schema s compiled; NULL with err naming the keyword (or value) refused and where
 * (a path such as properties.a.items). A schema beyond the subset above (anyOf, $ref,
 * pattern, format, minimum, ...: docs/SAMPLING.md "JSON Schema") is compiled to a GBNF
 * grammar (json_schema.h) instead: jg_grammar then gives it, and the state functions
 * below refuse every byte, so such a schema must be run through constrain.h (which
 * takes the grammar). The subset keeps this automaton: its outputs do not change. */
JgSchema *jg_compile(const struct Json *s, char *err, size_t errlen);
struct GrGrammar;
/* The grammar a schema beyond the subset became; NULL for the automaton's schemas. */
const struct GrGrammar *jg_grammar(const JgSchema *g);
/* json_object mode: any object. */
JgSchema *jg_any_object(void);
/* A request's response_format rf (the server's field, a batch line's): {"type": "text"}
 * (*out NULL), {"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema":
 * {...}, "name", "strict", "description"}}. 0, or -1 with err naming what is wrong. */
int jg_response_format(const struct Json *rf, JgSchema **out, char *err, size_t errlen);
void jg_free(JgSchema *g);

typedef struct {
    uint16_t node;                /* the schema node of this value */
    uint8_t kind, phase;
    uint8_t esc, utf, lo, hi;     /* a string: escape state, UTF-8 continuation due */
    uint8_t surr;                 /* a high surrogate escape wants its low half */
    uint16_t hex;                 /* \u digits so far */
    int16_t prop;                 /* an object: the property being given, -1 another */
    uint32_t count;               /* items, code points, digits of this part */
    uint32_t pos;                 /* bytes matched of a key, literal or enum value */
    uint64_t seen, cand;          /* an object's properties given; candidates matching */
} JgFrame;

typedef struct {
    const JgSchema *g;
    int depth;                    /* f[0] is the document, f[depth] the innermost */
    int ws;                       /* the whitespace run so far */
    JgFrame f[JG_DEPTH + 2];
} JgState;

void jg_init(JgState *s, const JgSchema *g);
/* Feeds b[0..n): 0 while the bytes so far are a prefix of a valid document, -1 when
 * they are not (s is then undefined: feed a copy). */
int jg_put(JgState *s, const unsigned char *b, size_t n);
/* 1 when the bytes so far are a whole valid document. */
int jg_complete(const JgState *s);
void jg_copy(JgState *dst, const JgState *src);
/* Sets logits[id] = -inf for every id in [0, V) that may not come next: a text token
 * (id < tok_n_ranks) whose bytes would not keep a valid prefix, any reserved id but
 * end_id, and end_id until the document is complete. Returns the ids left. */
int jg_mask(const JgState *s, const struct Tok *t, int V, int end_id, float *logits);
/* A verify pass's rows lg[0..k] (V each) masked as a step-by-step run would mask them:
 * row i with s advanced by draft[0..i). Past a draft token the grammar refuses (it cannot
 * be drawn there, so sampling stops at that row) or the end token, rows are left as they
 * are. Returns the first row where no token is left (a drawing that reaches it is the
 * step-by-step run's "no token can continue"), or k + 1. */
int jg_mask_drafts(const JgState *s, const struct Tok *t, int V, int end_id, float *lg,
                   const int *draft, int k);
#endif
