#include "serve/force.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int job_force(job *j, int32_t *const *alts, const int *lens, int n, int32_t force_after)
{
    size_t total = 0;
    for (int a = 0; a < n; a++) total += (size_t)lens[a];
    j->force = malloc((total + 1) * sizeof *j->force);
    j->force_off = malloc(((size_t)n + 1) * sizeof *j->force_off);
    j->allow = malloc(((size_t)n + 1) * sizeof *j->allow);
    j->allow_logit = malloc(((size_t)n + 1) * sizeof *j->allow_logit);
    if (!j->force || !j->force_off || !j->allow || !j->allow_logit) return -1;
    j->force_off[0] = 0;
    for (int a = 0; a < n; a++) {
        memcpy(j->force + j->force_off[a], alts[a], (size_t)lens[a] * sizeof *j->force);
        j->force_off[a + 1] = j->force_off[a] + lens[a];
    }
    j->n_force = n;
    j->force_after = force_after;
    return 0;
}

int force_waiting(const job *j) { return j->n_force && j->force_state == FORCE_WAIT; }

int force_take(job *j, int *n_allow)
{
    gen_req *g = &j->g;
    *n_allow = 0;
    if (!j->n_force || j->force_state == FORCE_DONE || g->end) return 0;
    if (j->force_state == FORCE_WAIT) {
        if (j->force_after >= 0 && !(g->n_ids && g->ids[g->n_ids - 1] == j->force_after)) return 0;
        j->force_state = FORCE_ON;
        j->force_at = g->n_ids;
    }
    int taken = 0;
    while (!g->end) {
        int pos = g->n_ids - j->force_at, n = 0;
        for (int a = 0; a < j->n_force; a++) {
            const int32_t *alt = j->force + j->force_off[a];
            int len = j->force_off[a + 1] - j->force_off[a], seen = 0;
            if (len < pos || memcmp(alt, g->ids + j->force_at, (size_t)pos * sizeof *alt)) continue;
            if (len == pos) { n = 0; break; } /* a whole opening is in the reply */
            for (int k = 0; k < n; k++) seen |= j->allow[k] == alt[pos];
            if (!seen) j->allow[n++] = alt[pos];
        }
        if (n == 0) { j->force_state = FORCE_DONE; break; }
        if (n > 1) { *n_allow = n; break; }
        gen_take(g, j->allow[0]);
        taken++;
    }
    return taken;
}

void force_allow_only(job *j, float *logits, int vocab, int n_allow)
{
    float *keep = j->allow_logit;
    for (int k = 0; k < n_allow; k++) keep[k] = logits[j->allow[k]];
    for (int v = 0; v < vocab; v++) logits[v] = -INFINITY;
    for (int k = 0; k < n_allow; k++) logits[j->allow[k]] = keep[k];
}
