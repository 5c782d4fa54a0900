/* kernels_neon.c — placeholder */
#include "kernels.h"
const K3KernelOps *k3_kernels_neon(void) { return 0; }
