/* kernels_avx2.c — placeholder */
#include "kernels.h"
const K3KernelOps *k3_kernels_avx2(void) { return 0; }
