/* Decode timing on a device: feeds a prompt, then times greedy single-token
 * steps (each one forward step; on CUDA a graph replay after the first).
 * usage: decode_time MODEL_DIR DEVICE [STEPS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dsv4.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: decode_time MODEL_DIR DEVICE [STEPS]\n"); return 2; }
    int steps = argc > 3 ? atoi(argv[3]) : 200;
    dsv4_load_options opt = {0};
    opt.device = argv[2];
    dsv4_model *m = NULL;
    dsv4_session *s = NULL;
    if (dsv4_model_load(argv[1], &opt, &m) || dsv4_session_new(m, &s)) {
        fprintf(stderr, "decode_time: %s\n", dsv4_last_error());
        return 1;
    }
    int V = dsv4_model_vocab(m);
    float *lg = malloc((size_t)V * sizeof *lg);
    int32_t prompt[16];
    for (int i = 0; i < 16; i++) prompt[i] = (i * 37 + 5) % V;
    if (dsv4_session_eval_last(s, prompt, 16, lg)) { fprintf(stderr, "decode_time: %s\n", dsv4_last_error()); return 1; }
    double first = 0, t0 = 0;
    for (int i = 0; i < steps; i++) {
        int32_t tok = 0;
        for (int v = 1; v < V; v++) if (lg[v] > lg[tok]) tok = v;
        double a = now_ms();
        if (i == 1) t0 = a;
        if (dsv4_session_eval_last(s, &tok, 1, lg)) { fprintf(stderr, "decode_time: %s\n", dsv4_last_error()); return 1; }
        if (i == 0) first = now_ms() - a;
    }
    double per = steps > 1 ? (now_ms() - t0) / (steps - 1) : first;
    printf("%s on %s: first decode step %.3f ms, then %.4f ms/token over %d steps (pos %lld)\n", argv[1], argv[2],
           first, per, steps - 1, (long long)dsv4_session_pos(s));
    dsv4_session_free(s);
    dsv4_model_free(m);
    free(lg);
    return 0;
}
