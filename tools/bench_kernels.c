/* bench_kernels.c — `make bench` builds this into bin/k3-bench (see src/bench/bench.c). */
int k3_bench_kernels(int argc, char **argv);
int main(int argc, char **argv) { return k3_bench_kernels(argc, argv); }
