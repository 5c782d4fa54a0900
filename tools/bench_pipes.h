/* bench_pipes.h — the harness bench_pipes.c (zmm) and bench_pipes_avx2.c (ymm) share: a
 * burst T(name, asm body, instructions a step) of N loop steps, the best of the bursts
 * kept; the clock from a chain of dependent integer adds (1 a cycle); the table printed
 * in instructions a cycle. */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static uint8_t mem[4096] __attribute__((aligned(64)));
#define N 400000L
#define NT 64
static double best[NT];
static const char *nm[NT];
static int nops[NT];
#define T(NAME, BODY, ops) { double t0 = now(); \
    for (long k = 0; k < N; k++) __asm__ volatile(BODY :: "r"(k), "r"(mem) : "rax", "memory"); \
    double t = now() - t0; if (!best[ti] || t < best[ti]) best[ti] = t; \
    nm[ti] = NAME; nops[ti] = ops; ti++; }
#define ADDC "add $1, %%rax\n"
#define A8 ADDC ADDC ADDC ADDC ADDC ADDC ADDC ADDC

static double clock_hz(void) {               /* best of 20 runs of 24 dependent adds */
    double hz = 0;
    for (int r = 0; r < 20; r++) {
        double t0 = now();
        for (long k = 0; k < N; k++)
            __asm__ volatile(A8 A8 A8 :: "r"(k), "r"(mem) : "rax", "memory");
        double f = N * 24.0 / (now() - t0);
        if (f > hz) hz = f;
    }
    return hz;
}

static void print_table(double hz, const char *what, int bursts, int width) {
    printf("clock %.2f GHz (dependent adds); %sinstructions a cycle, best of %d bursts:\n",
           hz / 1e9, what, bursts);
    for (int i = 0; i < NT && nm[i]; i++)
        printf("%-*s %.2f\n", width, nm[i], N * (double)nops[i] / (best[i] * hz));
}
