/* lineedit.h — a small raw-mode line editor for the chat REPL on a terminal (no readline).
 * Keys: printable UTF-8, Left/Right (Ctrl-B/F), Home/End (Ctrl-A/E), Backspace, Delete,
 * Ctrl-U/Ctrl-K (kill before/after the cursor), Ctrl-W (word before), Up/Down (Ctrl-P/N)
 * through this session's lines, Ctrl-L (clear screen), Enter. Ctrl-D on an empty line is
 * EOF (else it deletes the character under the cursor); Ctrl-C returns LE_INTR.
 * The terminal is raw only inside le_read and restored on every way out (return, exit,
 * SIGTERM/SIGHUP/SIGQUIT). Lines wider than the terminal wrap; each edit redraws the line. */
#ifndef K3_LINEEDIT_H
#define K3_LINEEDIT_H

enum { LE_INTR = -1, LE_EOF = 0, LE_LINE = 1 };
#define LE_MAX_LINE ((unsigned)16 << 20)

/* 1 when stdin and stdout are terminals (and TERM is not "dumb") and raw mode can be
 * set: then use le_read; 0: read stdin plainly. Call once. */
int le_init(void);
/* Shows prompt (ASCII) and edits one line. LE_LINE with the line in *out (malloc'd, no
 * newline; added to the history when not empty), LE_EOF, or LE_INTR (Ctrl-C, or a signal
 * interrupted the read). */
int le_read(const char *prompt, char **out);
/* Puts the terminal back as le_init found it; safe in a signal handler, idempotent. */
void le_restore(void);
#endif
