/* strbuf.h — a growing string (src/base/strbuf.c): the JSON that k3 serve writes, the
 * grammars and argument objects of src/text. Start from { 0 }; b stays NUL-terminated. An
 * allocation failure sets oom and drops every later append, so a writer checks once. */
#ifndef K3_STRBUF_H
#define K3_STRBUF_H
#include <stddef.h>

typedef struct { char *b; size_t n, cap; int oom; } Buf;
void buf_add(Buf *s, const char *p, size_t n);
void buf_str(Buf *s, const char *p);
void buf_fmt(Buf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_json(Buf *s, const char *p, size_t n);     /* as a JSON string literal */
void buf_free(Buf *s);
#endif
