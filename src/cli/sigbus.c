/* sigbus.c — a shard truncated (or its disk failing) while a run uses it in place from its
 * mapping faults with SIGBUS. Without a handler that is exit 135 and nothing on stderr;
 * this one names the shard (k3_mapped_shard, k3.h) and exits 1. Only async-signal-safe
 * calls: write(2) and _exit(2). A fault outside every shard is not ours to explain: the
 * default action is restored and the access faults again (a core, as before). */
#include "cli.h"
#include "k3.h"
#include <signal.h>
#include <string.h>
#include <unistd.h>

static size_t add(char *b, size_t n, size_t cap, const char *s) {
    while (*s && n < cap) b[n++] = *s++;
    return n;
}

/* Several threads may fault on the same shard at once: the first to come prints the whole
 * message in one write (so no other line lands inside it) and exits; the others wait for
 * that exit. */
static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    static int taken;
    static char msg[4608];
    const char *path = k3_mapped_shard(si->si_addr);
    if (!path) { signal(sig, SIG_DFL); return; }
    if (__atomic_exchange_n(&taken, 1, __ATOMIC_ACQ_REL))
        for (;;) pause();
    size_t n = add(msg, 0, sizeof msg, "\nk3: ");
    n = add(msg, n, sizeof msg, path);
    n = add(msg, n, sizeof msg, " changed under the run: reading its mapping failed (SIGBUS: "
            "the file was truncated or replaced, or its disk failed). Restore the shard (k3 "
            "doctor MODEL_DIR checks every shard) and re-run\n");
    for (const char *p = msg; n;) {
        ssize_t w = write(2, p, n);
        if (w <= 0) break;
        p += w; n -= (size_t)w;
    }
    _exit(K3_ERR_RUNTIME);
}

void k3_sigbus_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}
