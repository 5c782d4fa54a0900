/* batch_report.c — k3 --batch's run report (--out FILE, JSON; docs/BATCH.md). */
#include "batch_priv.h"
#include "json.h"
#include "mem.h"
#include "outfile.h"
#include "statefile.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int batch_write_report(const Batch *b, const char *path) {
    char oe[4400] = "out of memory";
    K3Out out;                                  /* outfile.h: never replaces a FIFO, a device */
    FILE *f = k3_out_open(&out, path, 0, 0666, oe, sizeof oe) ? NULL : k3_out_stdio(&out);
    if (!f) {
        if (out.name) k3_out_abort(&out);
        fprintf(stderr, "k3: --out %s\n", oe);
        return -1;
    }
    char *md = json_quote(b->o->model_dir, strlen(b->o->model_dir));
    fprintf(f, "{\n  \"version\": \"%s\",\n  \"model_dir\": %s,\n  \"mode\": \"batch\",\n",
            K3_VERSION, md ? md : "null");
    free(md);
    fprintf(f, "  \"n_prompts\": %d,\n  \"batch_size\": %d,\n  \"n_generated\": %ld,\n",
            b->n_lines, b->n_slots, b->n_generated);
    fprintf(f, "  \"kernels\": \"%s\",\n  \"threads\": %d,\n", k3_kernels_name(), k3_threads());
    fprintf(f, "  \"stops\": {\"eos\": %d, \"length\": %d},\n", b->n_eos, b->done - b->n_eos);
    fprintf(f, "  \"seconds\": %.6f,\n  \"tokens_per_second\": %.6f,\n", b->t_run,
            b->t_run > 0 ? b->n_generated / b->t_run : 0.0);
    if (b->dl)
        fprintf(f, "  \"draft_blocks\": %ld,\n  \"draft_proposed\": %ld,\n  \"draft_accepted\": "
                "%ld,\n  \"draft_rows_verified\": %ld,\n  \"draft_seconds\": %.6f,\n",
                b->ds.blocks, b->ds.proposed, b->ds.accepted, b->ds.rows, b->ds.seconds);
    if (b->o->spec)
        fprintf(f, "  \"spec_drafted\": %ld,\n  \"spec_accepted\": %ld,\n  \"spec_passes\": %ld,\n",
                b->drafted, b->accepted, b->passes);
    const K3StateFile *sf = k3_sched_statefile(b->sch);
    if (sf) {
        const K3StateFileStats *ss = k3_statefile_stats(sf);
        fprintf(f, "  \"state_file\": \"%s\",\n  \"state_file_bytes_read\": %llu,\n"
                "  \"state_file_bytes_written\": %llu,\n  \"state_file_wait_seconds\": %.6f,\n",
                k3_mem_state_mode(b->e.mem) == K3_STATES_ALL ? "all" : "kda",
                (unsigned long long)ss->read, (unsigned long long)ss->written, ss->wait_s);
    } else fprintf(f, "  \"state_file\": \"off\",\n");
    const long fails = k3_engine_expert_failures(&b->e);
    fprintf(f, "  \"expert_failures\": %ld,\n  \"valid\": %s,\n", fails, fails ? "false" : "true");
    k3_mem_json(b->e.mem, f, b->t_run);
    const K3SchedStats *st = k3_sched_stats(b->sch);
    k3_ranks_json(b->ranks, b->n_ranks, (int)(st->prompt_tokens + st->decode_tokens), 0, f);
    fprintf(f, "  \"vocab_size\": %d,\n  \"peak_rss_bytes\": %llu\n}\n", b->e.m.cfg.vocab_size,
            (unsigned long long)k3_peak_rss());
    if (k3_out_commit(&out, oe, sizeof oe)) {
        fprintf(stderr, "k3: --out %s\n", oe);
        return -1;
    }
    return 0;
}
