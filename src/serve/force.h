/* tool_choice's forced opening (scheduler.h: job.force): which tokens a
 * job's reply must continue with. Once the reply reaches the point where
 * its tool call must begin, it follows the alternatives (the openings of a
 * call of each offered tool): where every alternative it still matches has
 * the same next token, that token is taken as if sampled; where they part,
 * the model picks among their next tokens; once the reply holds a whole
 * opening, the model goes on alone. */
#ifndef DSV4_SERVE_FORCE_H
#define DSV4_SERVE_FORCE_H
#include "serve/scheduler.h"

enum { FORCE_WAIT, FORCE_ON, FORCE_DONE };

/* Sets the job's forced opening: n alternatives alts[a][0..lens[a]), copied;
 * before submission. -1: no memory. */
int job_force(job *j, int32_t *const *alts, const int *lens, int n, int32_t force_after);

/* The opening is still to come: the reply may not end yet. */
int force_waiting(const job *j);
/* Takes the tokens the opening determines at the reply's end (once due) and
 * returns how many; where the alternatives part, their next tokens go to
 * j->allow[0..*n_allow) (else *n_allow is 0). */
int force_take(job *j, int *n_allow);
/* Sets logits[0..vocab) to -inf except the ids in j->allow[0..n_allow). */
void force_allow_only(job *j, float *logits, int vocab, int n_allow);

#endif
