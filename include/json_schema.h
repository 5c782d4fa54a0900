/* json_schema.h — JSON Schema compiled to a GBNF grammar (src/text/json_schema*.c), for
 * the schemas JSON mode's own automaton (json_gram.h) refuses: the grammar engine
 * (grammar.h) then constrains the reply. docs/SAMPLING.md "JSON Schema" lists the
 * keywords and what each becomes.
 *
 * Every document the grammar derives is valid under the schema (the grammar may be
 * narrower: properties in their declared order, one spelling of each string character,
 * oneOf as anyOf). The bounds of json_gram.h hold: a whitespace run is at most JG_MAX_WS
 * bytes, an integer part, fraction or exponent at most JG_MAX_DIGITS digits, nesting at
 * most JG_DEPTH (a recursive $ref is unrolled to that depth). */
#ifndef K3_JSON_SCHEMA_H
#define K3_JSON_SCHEMA_H
#include "grammar.h"
#include <stddef.h>

struct Json;

#define JSC_MAX_TEXT GR_MAX_TEXT     /* bytes of grammar text, past which a schema is refused */
#define JSC_MAX_REPEAT GR_MAX_REP    /* minLength, minItems, {m,n}; a larger maximum: this */

/* The grammar (GBNF text, malloc'd, start rule "root") of schema s; NULL with err naming
 * the keyword refused and where (a path such as properties.a.anyOf[1]). */
char *jsc_gbnf(const struct Json *s, char *err, size_t errlen);
#endif
