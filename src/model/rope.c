/* RoPE inverse frequencies, computed in fp32 the way transformers does
 * (base^(2i/d) in fp32, reciprocal, optional YaRN blend), so angles match. */
#include <math.h>

#include "model/model.h"

static double correction_dim(double rotations, int dim, double base, double orig)
{
    return (dim * log(orig / (rotations * 2.0 * M_PI))) / (2.0 * log(base));
}

void rope_inv_freq(const dsv4_rope_params *p, int rope_dim, float *out)
{
    int half = rope_dim / 2;
    double lo = 0, hi = 0;
    if (p->yarn) {
        lo = floor(correction_dim(p->beta_fast, rope_dim, p->theta, p->orig_max_pos));
        hi = ceil(correction_dim(p->beta_slow, rope_dim, p->theta, p->orig_max_pos));
        if (lo < 0) lo = 0;
        if (hi > rope_dim - 1) hi = rope_dim - 1;
        if (lo == hi) hi += 0.001; /* avoid a zero-width ramp */
    }
    for (int i = 0; i < half; i++) {
        float pos_freq = powf((float)p->theta, (float)(2 * i) / (float)rope_dim);
        float extrap = 1.0f / pos_freq;
        if (!p->yarn) { out[i] = extrap; continue; }
        float interp = 1.0f / ((float)p->factor * pos_freq);
        float ramp = (float)(((double)i - lo) / (hi - lo));
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        float keep = 1.0f - ramp; /* share of the unscaled frequency */
        out[i] = interp * (1.0f - keep) + extrap * keep;
    }
}
