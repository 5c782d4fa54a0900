/* sampler.h — deterministic token sampling for batch and chat.
 *
 * Pipeline, for one row of logits (float[n]):
 *   1. greedy (temperature == 0 or greedy flag): argmax, lowest id on ties; the
 *      random stream is not advanced.
 *   2. x_i = logit_i / temperature, in double; p_i = exp(x_i - max x) with our own
 *      double exp (k3_exp_d: range reduction + fixed polynomial, no libm, no FMA),
 *      so the probabilities are bit-identical on every CPU and build.
 *   3. candidates sorted by p descending, ties by lower id first.
 *   4. top-k (k <= 0: off) keeps the first k; min-p (0: off) keeps p_i >= min_p * p_max;
 *      top-p (1: off) keeps the smallest prefix whose mass reaches top_p times the mass
 *      left after steps 4a-4b (HF order: the nucleus is taken on the renormalised rest).
 *   5. r = U * kept_mass with U in [0,1) from the top 53 bits of k3_rng_at(seed, pos);
 *      the first candidate whose cumulative mass (summed in sorted order) exceeds r is
 *      chosen.
 *
 * Random draws are counter-based (since the batch/speculation change; before it a
 * xoshiro256** stream was advanced per sampled token, so sampled outputs changed once):
 * the draw for the pos-th generated token of a sequence (pos = 0 for the first) is
 *   k3_rng_at(seed, pos) = mix(mix(seed) ^ (pos + 1) * 0xd1b54a32d192ed03)
 * with mix the splitmix64 output function (state += golden gamma, then its finaliser).
 * It depends only on the seed and the position, never on what was drawn before, so
 * batching prompts together or verifying speculative drafts cannot move a draw.
 * sampler_sample draws at an internal counter (the calls so far, greedy ones included);
 * sampler_sample_at takes the position explicitly. Chat derives one seed per assistant
 * turn: seed_turn = splitmix64(seed ^ (turn * 0x9e3779b97f4a7c15)), so replaying a
 * conversation with the same --seed reproduces every reply, whatever came before.
 * Same seed + same logits -> same tokens everywhere.
 *
 * Penalties and logit bias (src/text/penalty.c), applied before step 1 (greedy included)
 * to a float32 copy of the logits, in this order, every operation in float32 except (b):
 *   (a) logit_bias: l[id] += bias (OpenAI; bias in [-100, 100], at most K3_MAX_BIAS ids,
 *       an id given twice gets the sum);
 *   (b) frequency/presence (OpenAI): l[j] -= (float)(c[j] * frequency + (c[j] > 0) *
 *       presence), the bracket in double, c[j] = times j was generated so far (OpenAI's
 *       "sampled prior to the current position": the prompt does not count);
 *   (c) repetition (llama.cpp): each distinct j among the last repeat_last_n generated
 *       tokens (-1: all of them, 0: off) gets l[j] > 0 ? l[j] / rp : l[j] * rp.
 * (c) runs before (b), as llama.cpp's penalties sampler does. Unlike llama.cpp's server,
 * the prompt never enters the window: a reply's penalties depend on the reply only,
 * which keeps them identical in the one-shot command, batch, chat and the server.
 * The history is recorded by the sampler itself, by position: sampling at pos uses the
 * tokens it chose at positions 0..pos-1 (a speculative pass verifying drafts samples
 * position after position, so each draft is checked against the penalised distribution
 * its own prefix gives). */
#ifndef K3_SAMPLER_H
#define K3_SAMPLER_H
#include <stddef.h>
#include <stdint.h>

#define K3_MAX_BIAS 300

typedef struct {
    double temperature;   /* > 0; 0 = greedy */
    int top_k;            /* <= 0: off */
    double top_p;         /* (0, 1]; 1 = off */
    double min_p;         /* [0, 1); 0 = off */
    int greedy;           /* force argmax */
    double repeat_penalty;     /* > 0; 1 = off (llama.cpp --repeat-penalty) */
    int repeat_last_n;         /* window of generated tokens; -1 = all, 0 = off; 64 */
    double frequency_penalty;  /* [-2, 2]; 0 = off */
    double presence_penalty;   /* [-2, 2]; 0 = off */
    int n_bias;
    int bias_id[K3_MAX_BIAS];
    float bias[K3_MAX_BIAS];   /* [-100, 100] */
} SamplerParams;

typedef struct {
    SamplerParams p;
    uint64_t seed;
    long pos;             /* the position sampler_sample draws at next */
    int *idx;             /* workspace: candidate ids */
    double *prob;         /* workspace: probabilities by id */
    int cap;
    float *work;          /* the penalised logits (wcap floats) */
    int wcap;
    int *cnt;             /* workspace: counts (n) and window marks (n) */
    int *hist;            /* the tokens chosen at positions 0..nhist-1 */
    long nhist, hcap;
} Sampler;

uint64_t k3_splitmix64(uint64_t *state);
/* The counter-based draw of position pos under seed (above), and as U in [0,1), 53 bits. */
uint64_t k3_rng_at(uint64_t seed, long pos);
double k3_rng_uniform_at(uint64_t seed, long pos);

/* Defaults: temperature 1, top_k 0, top_p 1, min_p 0, not greedy. */
void sampler_defaults(SamplerParams *p);
/* 0, or -1 with a message naming the flag (temperature < 0, top_p outside (0,1],
 * min_p outside [0,1), NaN). */
int sampler_check(const SamplerParams *p, char *err, size_t errlen);
int sampler_is_greedy(const SamplerParams *p);
/* 0, or -1 with a message naming what (the flag or field) when a bias id is outside
 * [0, vocab). */
int sampler_check_vocab(const SamplerParams *p, int vocab, const char *what, char *err,
                        size_t errlen);
/* 1 when any penalty or bias is set. */
int penalty_active(const SamplerParams *p);
/* out[0..n) = in with (a)-(c) above, over the generated tokens hist[0..nhist);
 * mark[0..2n) all zero on entry and on return. */
void penalty_apply(const SamplerParams *p, const int *hist, long nhist, int *mark,
                   const float *in, float *out, int n);
/* 1 for --repeat-penalty --repeat-last-n --frequency-penalty --presence-penalty
 * --logit-bias: flags that do not by themselves turn greedy decoding into sampling. */
int sampler_is_penalty_flag(const char *flag);
/* One JSON request field (src/text/penalty_json.c): frequency_penalty, presence_penalty,
 * repetition_penalty | repeat_penalty, repeat_last_n, logit_bias {"ID": BIAS} (null:
 * left as is). 1 when consumed, 0 when key is none of them, -1 with a message naming the
 * field. */
struct Json;
int penalty_json_field(const char *key, const struct Json *v, SamplerParams *p, char *err,
                       size_t errlen);
/* Parses "ID=BIAS,ID=BIAS" (--logit-bias) into p; 0, or -1 with a message. */
int penalty_parse_bias(const char *v, SamplerParams *p, char *err, size_t errlen);

void sampler_init(Sampler *s, const SamplerParams *p, uint64_t seed);
void sampler_reseed(Sampler *s, uint64_t seed);   /* new seed, position back to 0 */
uint64_t sampler_turn_seed(uint64_t seed, int turn);
/* Picks an id from logits[0..n) with the draw of position s->pos, then s->pos++.
 * Returns -1 only when out of memory. */
int sampler_sample(Sampler *s, const float *logits, int n);
/* The same with the draw of position pos; s->pos is left alone. */
int sampler_sample_at(Sampler *s, const float *logits, int n, long pos);
/* The kept candidate distribution of the last non-greedy call is not exposed; this
 * computes it for tests: probs[0..n) after filtering and renormalising (greedy: one-hot).
 * Returns 0, or -1 when out of memory. */
int sampler_probs(Sampler *s, const float *logits, int n, double *probs);
void sampler_free(Sampler *s);

/* Parses one of the sampling flags (--temperature --top-k --top-p --min-p --seed
 * --greedy --repeat-penalty --repeat-last-n --frequency-penalty --presence-penalty
 * --logit-bias) at argv[*i]; value flags consume argv[*i+1] and advance *i.
 * Returns 1 when consumed, 0 when argv[*i] is not a sampling flag, -1 on a bad value
 * (message in err). *seed_set is set to 1 when --seed was given. */
int sampler_parse_flag(int argc, char **argv, int *i, SamplerParams *p, uint64_t *seed,
                       int *seed_set, char *err, size_t errlen);
#endif
