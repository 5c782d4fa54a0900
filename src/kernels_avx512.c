/* kernels_avx512.c — placeholder */
#include "kernels.h"
const K3KernelOps *k3_kernels_avx512(void) { return 0; }
