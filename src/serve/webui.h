/* webui.h — the chat page's files, embedded at build time (src/serve/webui/embed.c writes
 * $(BUILD)/serve/webui_assets.c from src/serve/webui/); served by serve_web.c. */
#ifndef K3_SERVE_WEBUI_H
#define K3_SERVE_WEBUI_H
#include <stddef.h>
typedef struct { const char *path, *ctype; const unsigned char *data; size_t len; } WebAsset;
extern const WebAsset k3_webui_assets[];      /* ends with a NULL path */
#endif
