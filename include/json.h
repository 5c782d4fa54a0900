/* json.h — a small strict JSON DOM (RFC 8259). Used for config.json, safetensors
 * headers, tokenizer_config.json and chat history. No dependency beyond libc. */
#ifndef K3_JSON_H
#define K3_JSON_H
#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct Json Json;
struct Json {
    JsonType type;
    int boolean;
    double number;          /* JSON_NUMBER */
    int is_integer;         /* number had no fraction/exponent and fits int64 */
    int64_t integer;        /* valid when is_integer */
    char *str;              /* JSON_STRING: UTF-8, NUL-terminated (may contain \0: see len) */
    size_t len;             /* string length in bytes, or number of children */
    Json **items;           /* JSON_ARRAY / JSON_OBJECT children, in document order */
    char **keys;            /* JSON_OBJECT keys (NUL-terminated), parallel to items */
};

/* Parse text[0..n). Returns NULL on error and writes "line L col C: what" to err.
 * Rejects trailing garbage, invalid UTF-8 in strings, lone surrogates, depth > 512. */
Json *json_parse(const char *text, size_t n, char *err, size_t errlen);
void json_free(Json *j);
/* A JSON file: read (at most max bytes: k3_slurp) and parsed; NULL with "PATH: not valid
 * JSON: line L col C: what" (or the read's message) in err. hash, if not NULL, gets
 * k3_hash of the bytes (a config's identity in state files). */
Json *json_file(const char *path, size_t max, uint64_t *hash, char *err, size_t errlen);

/* Lookups return NULL when absent or of another type. Later duplicate keys win. */
const Json *json_get(const Json *obj, const char *key);
const Json *json_at(const Json *arr, size_t i);
const char *json_type_name(JsonType t);

/* Writes s as a JSON string literal (with quotes) into a malloc'd buffer. */
char *json_quote(const char *s, size_t n);
#endif
