/* bench_pipes_avx2.c — the ymm (AVX2) twin of bench_pipes.c: instructions a cycle of one
 * instruction alone, of mixes, and of the AVX2 MXFP4 matvec's 32-block (kernels_avx2.c:
 * mx_nib's blend, shift and mask, 2 pshufb, 6 unpacks, 4 FMAs) four blocks a loop step on
 * 8 accumulators; the clock from a chain of dependent integer adds. Best of 30 bursts.
 * Why the AVX2 MXFP4 matvec stops where it does: docs/KERNELS_LOG.md (issue 40, second pass).
 *   gcc -O2 tools/bench_pipes_avx2.c -o /tmp/bench_pipes_avx2
 *   nice -n -20 flock /var/tmp/bench.lock /tmp/bench_pipes_avx2 */
#include "bench_pipes.h"
#define FMA(a) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #a "\n"
#define LD(d) "vmovdqa 64(%1), %%ymm" #d "\n"
#define BQ(d) "vpbroadcastq 64(%1), %%ymm" #d "\n"
#define BLD(d) "vpblendd $0xf0, %%ymm13, %%ymm12, %%ymm" #d "\n"
#define SRLV(d) "vpsrlvq %%ymm13, %%ymm12, %%ymm" #d "\n"
#define PSHUFB(d) "vpshufb %%ymm13, %%ymm12, %%ymm" #d "\n"
#define UNPB(d) "vpunpcklbw %%ymm13, %%ymm12, %%ymm" #d "\n"
#define UNPW(d) "vpunpckhwd %%ymm13, %%ymm12, %%ymm" #d "\n"
#define AND(d) "vpand %%ymm13, %%ymm12, %%ymm" #d "\n"
#define ANDM(d) "vpand 64(%1), %%ymm12, %%ymm" #d "\n"
#define PERMQ(d) "vpermq $0x50, %%ymm12, %%ymm" #d "\n"
#define R8(X) X(0) X(1) X(2) X(3) X(0) X(1) X(2) X(3)
#define R4(X) X(0) X(1) X(2) X(3)
#define R2(X) X(0) X(1)
#define F8 FMA(4) FMA(5) FMA(6) FMA(7) FMA(8) FMA(9) FMA(10) FMA(11)
/* one 32-block into accumulators a, b; DEP 1: FMAs fed by the decode (the kernel),
 * 0: by constants (the decode's ops still run, off the FMA chains) */
#define NIB "vpblendd $0xf0, %%ymm15, %%ymm14, %%ymm8\n vpsrlvq %%ymm14, %%ymm8, %%ymm8\n" \
    "vpand %%ymm15, %%ymm8, %%ymm8\n vpshufb %%ymm8, %%ymm14, %%ymm9\n" \
    "vpshufb %%ymm8, %%ymm15, %%ymm8\n vpunpcklbw %%ymm9, %%ymm8, %%ymm10\n" \
    "vpunpckhbw %%ymm9, %%ymm8, %%ymm11\n"
#define U(op, w, a) op " %%ymm" #w ", %%ymm13, %%ymm12\n" \
    "vfmadd231ps %%ymm15, %%ymm12, %%ymm" #a "\n"
#define BLK(a, b) NIB U("vpunpcklwd", 10, a) U("vpunpcklwd", 11, a) \
    U("vpunpckhwd", 10, b) U("vpunpckhwd", 11, b)
#define BLKC(a, b) NIB U("vpunpcklwd", 14, a) U("vpunpcklwd", 15, a) \
    U("vpunpckhwd", 14, b) U("vpunpckhwd", 15, b)
#define B4(X) X(0, 1) X(2, 3) X(4, 5) X(6, 7)
int main(void) {
    __asm__ volatile("vxorps %%ymm0, %%ymm0, %%ymm0\n vmovaps %%ymm0, %%ymm1\n"
                     "vmovaps %%ymm0, %%ymm2\n vmovaps %%ymm0, %%ymm3\n vmovaps %%ymm0, %%ymm4\n"
                     "vmovaps %%ymm0, %%ymm5\n vmovaps %%ymm0, %%ymm6\n vmovaps %%ymm0, %%ymm7\n"
                     "vmovaps %%ymm0, %%ymm8\n vmovaps %%ymm0, %%ymm9\n vmovaps %%ymm0, %%ymm10\n"
                     "vmovaps %%ymm0, %%ymm11\n vmovaps %%ymm0, %%ymm12\n"
                     "vmovaps %%ymm0, %%ymm13\n vmovaps %%ymm0, %%ymm14\n"
                     "vmovaps %%ymm0, %%ymm15" ::: "memory");
    double hz = clock_hz();
    for (int rr = 0; rr < 30; rr++) {
        int ti = 0;
        T("vfmadd231ps (8 chains)", F8 F8, 16) T("vmovdqa m256", R8(LD) R8(LD), 16)
        T("vpbroadcastq m64", R8(BQ) R8(BQ), 16) T("vpshufb", R8(PSHUFB) R8(PSHUFB), 16)
        T("vpunpcklbw", R8(UNPB) R8(UNPB), 16) T("vpsrlvq", R8(SRLV) R8(SRLV), 16)
        T("vpblendd", R8(BLD) R8(BLD), 16) T("vpermq", R8(PERMQ) R8(PERMQ), 16)
        T("vpshufb + vpsrlvq", R8(PSHUFB) R8(SRLV), 16) T("fma + vpshufb", R8(PSHUFB) F8, 16)
        T("vmovdqa + 3 vpand", R8(LD) R8(AND) R8(AND) R8(AND), 32)
        T("vpand m256 + 3 vpand", R8(ANDM) R8(AND) R8(AND) R8(AND), 32)
        T("8fma+4pshufb+2srlv+16unp", F8 R4(PSHUFB) R2(SRLV) R8(UNPB) R8(UNPW), 30)
        T("MXFP4 block x4", B4(BLK), 60) T("MXFP4 block x4, FMAs of consts", B4(BLKC), 60)
    }
    print_table(hz, "ymm ", 30, 32);
    printf("MXFP4 block: %.2f cycles (FMAs fed by the decode), %.2f (FMAs of constants)\n",
           best[13] * hz / N / 4, best[14] * hz / N / 4);
    return 0;
}
