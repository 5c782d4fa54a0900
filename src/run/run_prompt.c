/* run_prompt.c — the one-shot command's inputs before the engine opens: the prompt as
 * ids (the chat template around it with --system-file, the --image files read and placed),
 * and the JSON mode's constraint (--json, --json-schema, --grammar). Apart from run.c so
 * the run's flow and its output stay in one file under the size limit. */
#include "run_priv.h"
#include "json.h"
#include "util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --system-file and --image: the XTML chat template (thinking off, as chat --no-think)
 * around the system file's text (if any) and the prompt as the user message, the images
 * first (or at their placeholders in it), with the generation prompt. */
static int chat_template(const Opts *o, const Tok *tok, const char *user, size_t len,
                         RunImages *ri, int32_t **ids, size_t *n) {
    char err[4096];
    size_t sl = 0;
    char *sys = o->system_file ? k3_slurp(o->system_file, CHAT_TEXT_MAX, &sl, err, sizeof err)
                               : strdup("");
    if (!sys) { fprintf(stderr, "k3: --system-file %s\n", err); return K3_ERR_USAGE; }
    if (strlen(sys) != sl) {
        fprintf(stderr, "k3: --system-file: the system file holds a NUL byte, which the chat "
                "template cannot carry\n");
        free(sys); return K3_ERR_USAGE;
    }
    for (int i = 0; i < o->n_images; i++, ri->n++) {
        int rc = k3_image_in_file(o->images[i], tok, &ri->im[i], err, sizeof err);
        if (rc) { fprintf(stderr, "k3: --image %s\n", err); free(sys); return rc; }
    }
    int rc = k3_image_render(tok, o->system_file ? sys : NULL, user, len, ri->im, ri->n, ids,
                             n, ri->span, err, sizeof err);
    free(sys);
    if (rc) {
        fprintf(stderr, "k3: %s: %s\n", o->system_file ? "--system-file" : "--image", err);
        return K3_ERR_USAGE;
    }
    return 0;
}

/* The prompt as ids: --ids, or --prompt/--prompt-file through the tokenizer. */
int run_read_prompt(const Opts *o, const Tok *tok, RunImages *ri, int **prompt,
                    int *n_prompt) {
    char err[4096];
    if (o->ids) {
        if (k3_parse_ids(o->ids, prompt, n_prompt, err, sizeof err)) {
            fprintf(stderr, "k3: %s\n", err);
            return K3_ERR_USAGE;
        }
    } else {
        size_t len = 0, n = 0;
        char *text = o->prompt ? strdup(o->prompt)
                               : k3_slurp(o->prompt_file, SIZE_MAX, &len, err, sizeof err);
        if (!text) { fprintf(stderr, "k3: --prompt-file %s\n", err); return K3_ERR_USAGE; }
        if (o->prompt) len = strlen(text);
        int32_t *ids = NULL;
        if (o->system_file || o->n_images) {
            int rc = chat_template(o, tok, text, len, ri, &ids, &n);
            if (rc) { free(text); return rc; }
        } else ids = tok_encode(tok, text, len, 0, &n);
        free(text);
        if (!ids) {
            fprintf(stderr, "k3: out of memory tokenizing the prompt\n");
            return K3_ERR_RUNTIME;
        }
        *prompt = malloc(sizeof(int) * (n ? n : 1));
        if (!*prompt) {
            free(ids);
            fprintf(stderr, "k3: out of memory\n");
            return K3_ERR_RUNTIME;
        }
        for (size_t i = 0; i < n; i++) (*prompt)[i] = ids[i];
        *n_prompt = (int)n;
        free(ids);
    }
    if (*n_prompt == 0) {
        fprintf(stderr, "k3: the prompt is empty: give at least one token\n");
        return K3_ERR_USAGE;
    }
    return 0;
}

/* --json: any object; --json-schema FILE: its schema (exit 2 naming the file and the
 * keyword refused). The masked row's buffer in *mask. */
int run_json_mode(const Opts *o, JgSchema **g, GrGrammar **gr, float **mask, int V) {
    char err[600];
    if (o->grammar || o->grammar_file) {           /* --grammar TEXT, --grammar-file FILE */
        *gr = o->grammar ? gr_parse(o->grammar, strlen(o->grammar), err, sizeof err)
                         : gr_parse_file(o->grammar_file, err, sizeof err);
        if (!*gr) { fprintf(stderr, "k3: --grammar%s: %s\n", o->grammar ? "" : "-file", err);
                    return K3_ERR_USAGE; }
    } else if (!o->json_schema) *g = jg_any_object();
    else {
        size_t n = 0;
        char *text = k3_read_file(o->json_schema, &n);
        if (!text) {
            fprintf(stderr, "k3: --json-schema %s: %s\n", o->json_schema, strerror(errno));
            return K3_ERR_USAGE;
        }
        char jerr[256];
        Json *j = json_parse(text, n, jerr, sizeof jerr);
        free(text);
        if (!j) {
            fprintf(stderr, "k3: --json-schema %s: not JSON: %s\n", o->json_schema, jerr);
            return K3_ERR_USAGE;
        }
        *g = jg_compile(j, err, sizeof err);
        json_free(j);
        if (!*g) {
            fprintf(stderr, "k3: --json-schema %s: %s\n", o->json_schema, err);
            return K3_ERR_USAGE;
        }
    }
    if ((!*g && !*gr) || !(*mask = malloc(sizeof(float) * (size_t)V))) {
        fprintf(stderr, "k3: out of memory\n");
        return K3_ERR_RUNTIME;
    }
    return 0;
}
