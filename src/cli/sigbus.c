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

static void put(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w; n -= (size_t)w;
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const char *path = k3_mapped_shard(si->si_addr);
    if (!path) { signal(sig, SIG_DFL); return; }
    put("\nk3: ");
    put(path);
    put(" changed under the run: reading its mapping failed (SIGBUS: the file was truncated "
        "or replaced, or its disk failed). Restore the shard (k3 doctor MODEL_DIR checks "
        "every shard) and re-run\n");
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
