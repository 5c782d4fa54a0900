/* logprob.h — log-probabilities of the raw logits (src/text/logprob.c), for the server's
 * logprobs / top_logprobs / echo and the one-shot command's --logprobs.
 *
 * The values are the log-softmax of the model's logits as they come out of the forward
 * (float32), before temperature, penalties, logit bias or a JSON-mode mask:
 *   m = max_i l_i;  s = sum_i exp(l_i - m) in double, ids in order, k3_exp_d;
 *   logprob_j = (float)((double)l_j - (m + k3_log_d(s))).
 * NaN logits count as probability 0 (as in the sampler). Fixed order, no libm: the same
 * bits on every CPU, build and SIMD path, like the logits. */
#ifndef K3_LOGPROB_H
#define K3_LOGPROB_H

#define K3_MAX_TOP_LOGPROBS 20

/* Natural log of x > 0 (finite), in double: range reduction + a fixed series, no libm. */
double k3_log_d(double x);
/* m + log(sum exp(l_i - m)) of l[0..n) as above; -inf when every logit is NaN or -inf. */
double k3_logsumexp(const float *l, int n);
/* The logprob of l[j] given lse = k3_logsumexp(l, n). */
float k3_logprob(const float *l, int j, double lse);

/* One position: the chosen id's logprob and the k most likely ids (largest logit first,
 * lower id on ties; NaN logits last). */
typedef struct {
    int id;
    float logprob;
    int n_top;
    int top[K3_MAX_TOP_LOGPROBS];
    float top_logprob[K3_MAX_TOP_LOGPROBS];
} K3Logprob;

/* Fills *e for id chosen from row l[0..n) with k (0..K3_MAX_TOP_LOGPROBS) alternatives. */
void k3_logprob_at(const float *l, int n, int id, int k, K3Logprob *e);
#endif
