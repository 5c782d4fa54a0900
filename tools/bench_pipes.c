/* bench_pipes.c — which AVX-512 instructions share execution pipes on this core: the
 * throughput of one instruction alone and of pairs (16 or 24 independent ones a loop
 * step; FMAs on 8 accumulators), in instructions a cycle, the clock taken from a chain of
 * dependent integer adds (1 a cycle). Best of 40 short bursts, so other tenants' load
 * mostly drops out. Why MXFP4's matvec stops where it does: docs/KERNELS_LOG.md.
 *   gcc -O2 -mavx512f -mavx512bw -mavx512vbmi tools/bench_pipes.c -o /tmp/bench_pipes
 *   nice -n -20 flock /var/tmp/bench.lock /tmp/bench_pipes
 * A pair at 2 a cycle shares both pipes, 3 shares one, 4 shares none (two 2-pipe kinds). */
#include "bench_pipes.h"
#define FMA(a) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #a "\n"
#define PERM(d) "vpermps %%zmm29, %%zmm28, %%zmm" #d "\n"
#define PMZX(d) "vpmovzxbd 64(%1), %%zmm" #d "\n"
#define SRL(d) "vpsrld $4, %%zmm28, %%zmm" #d "\n"
#define SRLV(d) "vpsrlvd %%zmm29, %%zmm28, %%zmm" #d "\n"
#define PERMB(d) "vpermb %%zmm29, %%zmm28, %%zmm" #d "\n"
#define PSHUFB(d) "vpshufb %%zmm29, %%zmm28, %%zmm" #d "\n"
#define CVT(d) "vcvtdq2ps %%zmm28, %%zmm" #d "\n"
#define AND(d) "vpandd %%zmm29, %%zmm28, %%zmm" #d "\n"
#define BC(d) "vbroadcasti32x4 64(%1), %%zmm" #d "\n"
#define MULP(d) "vmulps %%zmm29, %%zmm28, %%zmm" #d "\n"
#define PSHUFD(d) "vpshufd $0x55, %%zmm28, %%zmm" #d "\n"
#define UNPCK(d) "vpunpcklbw %%zmm29, %%zmm28, %%zmm" #d "\n"
#define PROLD(d) "vprold $8, %%zmm28, %%zmm" #d "\n"
#define R8(X) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
#define F8 FMA(0) FMA(1) FMA(2) FMA(3) FMA(4) FMA(5) FMA(6) FMA(7)
/* one MXFP4 32-block as the matvec runs it (accumulator k) */
#define BLK(k) "vpmovzxbd 64(%1), %%zmm1" #k "\n vpsrld $4, %%zmm1" #k ", %%zmm2" #k "\n" \
    "vpermps %%zmm29, %%zmm1" #k ", %%zmm1" #k "\n vpermps %%zmm29, %%zmm2" #k ", %%zmm2" #k "\n" \
    "vfmadd231ps %%zmm30, %%zmm1" #k ", %%zmm" #k "\n" \
    "vfmadd231ps %%zmm30, %%zmm2" #k ", %%zmm" #k "\n"
int main(void) {
    __asm__ volatile("vpternlogd $0xff,%%zmm31,%%zmm31,%%zmm31\n vpsrld $30,%%zmm31,%%zmm31\n"
                     "vcvtdq2ps %%zmm31,%%zmm30\n vmovaps %%zmm30,%%zmm31\n"
                     "vxorps %%zmm0,%%zmm0,%%zmm0\n vmovaps %%zmm0,%%zmm1\n vmovaps %%zmm0,%%zmm2\n"
                     "vmovaps %%zmm0,%%zmm3\n vmovaps %%zmm0,%%zmm4\n vmovaps %%zmm0,%%zmm5\n"
                     "vmovaps %%zmm0,%%zmm6\n vmovaps %%zmm0,%%zmm7\n vmovaps %%zmm30,%%zmm29\n"
                     "vmovaps %%zmm30,%%zmm28" ::: "memory");
    double hz = clock_hz();
    for (int rr = 0; rr < 40; rr++) {
        int ti = 0;
        T("vfmadd231ps", F8 F8, 16) T("vpermps", R8(PERM) R8(PERM), 16)
        T("vpmovzxbd m128", R8(PMZX) R8(PMZX), 16) T("vpsrld", R8(SRL) R8(SRL), 16)
        T("vpsrlvd", R8(SRLV) R8(SRLV), 16) T("vpermb", R8(PERMB) R8(PERMB), 16)
        T("vpshufb", R8(PSHUFB) R8(PSHUFB), 16) T("vcvtdq2ps", R8(CVT) R8(CVT), 16)
        T("vpandd", R8(AND) R8(AND), 16) T("vbroadcasti32x4 m", R8(BC) R8(BC), 16)
        T("vmulps", R8(MULP) R8(MULP), 16) T("vpshufd", R8(PSHUFD) R8(PSHUFD), 16)
        T("vpunpcklbw", R8(UNPCK) R8(UNPCK), 16) T("vprold", R8(PROLD) R8(PROLD), 16)
        T("vpermps + fma", R8(PERM) F8, 16) T("vpermps + vpmovzxbd", R8(PERM) R8(PMZX), 16)
        T("vpermps + vpsrld", R8(PERM) R8(SRL), 16) T("fma + vpsrld", F8 R8(SRL), 16)
        T("vpermps + vpshufb", R8(PERM) R8(PSHUFB), 16)
        T("vpermps + vbroadcasti32x4", R8(BC) R8(PERM), 16)
        T("fma + vprold", R8(PROLD) F8, 16) T("vpermps + vpshufd", R8(PSHUFD) R8(PERM), 16)
        T("MXFP4 block (6 ops)", BLK(0) BLK(1) BLK(2) BLK(3) BLK(4) BLK(5) BLK(6) BLK(7), 48)
    }
    print_table(hz, "", 40, 26);
    printf("MXFP4 block: %.2f cycles a 32-weight block\n", 6 / (N * 48.0 / (best[22] * hz)));
    return 0;
}
