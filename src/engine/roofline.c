/* roofline.c — the run against the machine (roofline.h): the FLOP model, the bytes a
 * decoded token reads, the machine's peak and bandwidth (probed once, cached per machine
 * in the user's cache folder) and the report line and --out fields. */
#include "roofline.h"
#include "kernels.h"
#include "pool.h"
#include "tensors.h"
#include "util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void k3_flops_model(const K3Config *c, K3Flops *f) {
    const double d = c->hidden_size, NL = c->num_hidden_layers;
    const double KH = c->kda_num_heads, KD = c->kda_head_dim, KC = KH * KD;
    const double NH = c->num_attention_heads, NOPE = c->qk_nope_head_dim;
    const double ROPE = c->qk_rope_head_dim, VD = c->v_head_dim, R = c->kv_lora_rank;
    const double QL = c->q_lora_rank, I = c->intermediate_size, MI = c->moe_intermediate_size;
    const double LAT = c->routed_expert_hidden_size, E = c->num_experts;
    memset(f, 0, sizeof *f);
    for (int L = 0; L < NL; L++) {             /* multiply-adds first, doubled below */
        if (c->is_kda[L]) {                    /* q k v, f_a, f_b, b, g, o */
            f->trunk += 4 * KC * d + KD * d + KC * KD + KH * d + d * KC;
            /* conv taps on q k v; the delta rule per head: decay, read, write, read */
            f->kda += 3 * KC * c->short_conv_kernel_size + 4 * KH * KD * KD;
        } else {                               /* q_a, q_b, kv_a, g, o */
            f->trunk += QL * d + NH * (NOPE + ROPE) * QL + (R + ROPE) * d + d * NH * VD +
                        (c->mla_use_output_gate ? NH * VD * d : 0);
            f->mla_fixed += NH * (NOPE + VD) * R;    /* kv_b folded into q, then into o */
            f->mla_key += NH * (2 * R + ROPE);       /* score (latent + rope), the sum */
        }
        if (!c->is_moe[L]) { f->trunk += 3 * I * d; continue; }
        /* router, shared experts at full width, the latent down and up projections */
        f->trunk += E * d + 3 * MI * c->num_shared_experts * d + 2 * LAT * d;
        f->routed += (double)c->num_experts_per_token * 3 * MI * LAT;
    }
    f->head = (double)c->vocab_size * d;
    f->trunk *= 2; f->routed *= 2; f->kda *= 2; f->mla_fixed *= 2; f->mla_key *= 2;
    f->head *= 2;
}

double k3_flops(const K3Config *c, long pos0, long n, long head_rows) {
    K3Flops f;
    k3_flops_model(c, &f);
    const double keys = (double)n * (pos0 + 1) + (double)n * (n - 1) / 2;   /* sum of p+1 */
    return n * (f.trunk + f.routed + f.kda + f.mla_fixed) + keys * f.mla_key +
           head_rows * f.head;
}

double k3_decode_bytes(const K3Model *m, double pos) {
    const K3Config *c = &m->cfg;
    double b = 0;
    for (size_t i = 0; m->st && i < m->st->n_tensors; i++) {
        const StTensor *t = &m->st->tensors[i];
        if (!k3_is_trunk_tensor(t->name) || k3_tensor_layer(t->name) >= c->num_hidden_layers)
            continue;                          /* experts apart; MTP layers unused */
        if (strstr(t->name, "embed_tokens")) b += (double)t->nbytes / c->vocab_size;  /* a row */
        else b += (double)t->nbytes;
    }
    for (int L = 0; L < c->num_hidden_layers; L++) {
        if (c->is_moe[L]) b += (double)c->num_experts_per_token * k3_expert_bytes(c);
        if (c->is_kda[L])
            b += 2.0 * 4 * c->kda_num_heads * c->kda_head_dim * c->kda_head_dim;
        else
            b += 4.0 * (pos + 1) * (c->kv_lora_rank + c->qk_rope_head_dim);
    }
    return b;
}

/* ---- the machine: cache key, file, probe ---- */

static unsigned long long flags_hash(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    unsigned long long h = 1469598103934665603ull;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) {
            for (const char *p = line; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
            break;
        }
    if (f) fclose(f);
    return h;
}

static void machine_key(char *key, size_t n) {
    char cpu[256];
    k3_cpu_model(cpu, sizeof cpu);
    for (char *p = cpu; *p; p++) if (*p == '\t' || *p == '\n') *p = ' ';
    snprintf(key, n, "%s|flags %016llx|%s|threads %d", cpu, flags_hash(), k3_kernels_name(),
             k3_threads());
}

/* The cache file's path, "" when off. Makes the folders of the default path. */
static void cache_path(char *p, size_t n) {
    const char *env = getenv("K3_MACHINE_CACHE"), *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    p[0] = 0;
    if (env && *env) { if (strcmp(env, "off")) snprintf(p, n, "%s", env); return; }
    if (x && *x) snprintf(p, n, "%s", x);
    else if (home && *home) snprintf(p, n, "%s/.cache", home);
    else return;
    mkdir(p, 0755);                            /* fails harmlessly where it exists */
    snprintf(p + strlen(p), n - strlen(p), "/k3");
    mkdir(p, 0755);
    snprintf(p + strlen(p), n - strlen(p), "/machine.txt");
}

/* Line format: KEY TAB fma_gflops TAB read_gbps. */
static int cache_find(const char *path, const char *key, K3Machine *mc) {
    FILE *f = fopen(path, "r");
    char line[1024];
    int found = 0;
    const size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == '\t' &&
            sscanf(line + kl + 1, "%lf\t%lf", &mc->fma_gflops, &mc->read_gbps) == 2 &&
            mc->fma_gflops > 0 && mc->read_gbps > 0)
            found = 1;                         /* the last such line wins */
    if (f) fclose(f);
    return found;
}

/* The other machines' lines kept, this key's replaced; written whole, then renamed. */
static void cache_put(const char *path, const char *key, const K3Machine *mc) {
    char tmp[4200], line[1024];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *in = fopen(path, "r"), *out = fopen(tmp, "w");
    const size_t kl = strlen(key);
    if (!out) { if (in) fclose(in); return; }
    while (in && fgets(line, sizeof line, in))
        if (strncmp(line, key, kl) || line[kl] != '\t') fputs(line, out);
    if (in) fclose(in);
    fprintf(out, "%s\t%.3f\t%.3f\n", key, mc->fma_gflops, mc->read_gbps);
    if (fclose(out) || rename(tmp, path)) unlink(tmp);
}

int k3_machine_get(K3Machine *mc, int reprobe) {
    char key[512], path[4200];
    memset(mc, 0, sizeof *mc);
    machine_key(key, sizeof key);
    cache_path(path, sizeof path);
    if (!reprobe && path[0] && cache_find(path, key, mc)) { mc->cached = 1; return 0; }
    const int t = k3_threads();
    /* about 0.2 s: 9 FMA loops of ~3 ms, each thread on a core of its own, the best (at
     * the end of a streamed run the pool's worker was woken onto the caller's core for
     * most of them: their median, half the peak, was cached for every later run); a 128
     * MiB buffer touched then read 3 times, the median (the bandwidth hardly moved then) */
    mc->fma_gflops = k3_fma_peak(t, 9, 2000000);
    mc->read_gbps = k3_mem_read_bw((size_t)128 << 20, t, 3);
    if (mc->fma_gflops <= 0 || mc->read_gbps <= 0) return -1;
    if (path[0]) cache_put(path, key, mc);
    return 0;
}

void k3_machine_save(double fma_gflops, double read_gbps) {
    char key[512], path[4200];
    K3Machine mc = { fma_gflops, read_gbps, 0 };
    machine_key(key, sizeof key);
    cache_path(path, sizeof path);
    if (path[0] && fma_gflops > 0 && read_gbps > 0) cache_put(path, key, &mc);
}

/* ---- the report ---- */

void k3_roofline(const K3Model *m, long n_prompt, long head_rows, double t_prefill, long n_dec,
                 double t_decode, const K3Machine *mc, K3Roofline *r) {
    memset(r, 0, sizeof *r);
    r->mc = *mc;
    r->prefill_flops = n_prompt > 0 ? k3_flops(&m->cfg, 0, n_prompt, head_rows) : 0;
    if (t_prefill > 0) r->prefill_gflops = r->prefill_flops / t_prefill / 1e9;
    if (mc->fma_gflops > 0) r->prefill_share = r->prefill_gflops / mc->fma_gflops;
    /* decoded tokens at positions n_prompt .. n_prompt + n_dec - 1: the mean one */
    r->decode_bytes = k3_decode_bytes(m, n_prompt + (n_dec > 0 ? (n_dec - 1) / 2.0 : 0));
    if (n_dec > 0 && t_decode > 0) r->decode_gbps = r->decode_bytes * n_dec / t_decode / 1e9;
    if (mc->read_gbps > 0) r->decode_share = r->decode_gbps / mc->read_gbps;
    /* the floor: the bytes over the bandwidth, the MXFP4 experts' part over the FMA peak
     * where that is slower (two weights a byte: 4 FLOPs a packed byte) */
    const K3Config *c = &m->cfg;
    int n_moe = 0;
    for (int L = 0; L < c->num_hidden_layers; L++) n_moe += c->is_moe[L] != 0;
    K3Flops f;
    k3_flops_model(c, &f);
    const double xb = (double)n_moe * c->num_experts_per_token * k3_expert_bytes(c);
    if (mc->read_gbps > 0 && mc->fma_gflops > 0) {
        const double bw = mc->read_gbps * 1e9, tx = xb / bw, tf = f.routed / (mc->fma_gflops * 1e9);
        r->decode_floor_s = (r->decode_bytes - xb) / bw + (tf > tx ? tf : tx);
    }
    if (n_dec > 0 && t_decode > 0) r->decode_s = t_decode / n_dec;
}

int k3_decode_beat_probe(const K3Roofline *r, int lone, double llc) {
    return lone && r->decode_share > 1 && r->decode_bytes > 8 * llc;
}

double k3_llc_bytes(void) {
    long b = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (b <= 0) b = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return b > 8L << 20 ? (double)b : b > 0 ? 8.0 * (1 << 20) : 32.0 * (1 << 20);
}

static const char *si(double v, double *s) {   /* FLOPs: T, G, M */
    if (v >= 1e12) { *s = v / 1e12; return "T"; }
    if (v >= 1e9) { *s = v / 1e9; return "G"; }
    *s = v / 1e6; return "M";
}

void k3_roofline_print(const K3Roofline *r, FILE *f) {
    double s;
    const char *u = si(r->prefill_flops, &s);
    char pre[160] = "no prefill", dec[200];      /* a run without that part says so */
    if (r->prefill_gflops > 0)
        snprintf(pre, sizeof pre, "%.3g %sFLOP at %.3g GFLOP/s, %.0f%% of the FMA peak", s, u,
                 r->prefill_gflops, 100 * r->prefill_share);
    if (r->decode_gbps > 0)
        snprintf(dec, sizeof dec, "%.3g GB a token from memory at %.3g GB/s, %.0f%% of the "
                 "read bandwidth", r->decode_bytes / 1e9, r->decode_gbps, 100 * r->decode_share);
    else
        snprintf(dec, sizeof dec, "no decode step (%.3g GB a token from memory)",
                 r->decode_bytes / 1e9);
    fprintf(f, "k3: machine: prefill %s (%.3g GFLOP/s); decode %s (%.3g GB/s)%s\n", pre,
            r->mc.fma_gflops, dec, r->mc.read_gbps, r->mc.cached ? "" : ", probed now");
    if (r->decode_s > 0 && r->decode_floor_s > 0)
        fprintf(f, "k3: machine: decode %.3g s a token, %.2fx the floor of %.3g s (the bytes "
                "over the read bandwidth, the MXFP4 experts' FLOPs over the peak where "
                "slower)\n", r->decode_s, r->decode_s / r->decode_floor_s, r->decode_floor_s);
}

void k3_roofline_json(const K3Roofline *r, FILE *f) {
    fprintf(f, "  \"prefill_flops\": %.6g,\n  \"prefill_gflops\": %.6g,\n"
            "  \"prefill_peak_share\": %.6g,\n  \"decode_bytes_per_token\": %.6g,\n"
            "  \"decode_gbps\": %.6g,\n  \"decode_bandwidth_share\": %.6g,\n"
            "  \"machine_fma_gflops\": %.6g,\n  \"machine_read_gbps\": %.6g,\n"
            "  \"decode_floor_s\": %.6g,\n  \"decode_floor_ratio\": %.6g,\n",
            r->prefill_flops, r->prefill_gflops, r->prefill_share, r->decode_bytes,
            r->decode_gbps, r->decode_share, r->mc.fma_gflops, r->mc.read_gbps,
            r->decode_floor_s, r->decode_floor_s > 0 ? r->decode_s / r->decode_floor_s : 0.0);
}
