/* Tokenizer benchmark: load time, then encode and decode throughput on one
 * text file (best of N runs, single thread).
 * Build: make build/libdsv4.a && cc -O2 -Iinclude -Isrc -o build/tokbench tools/tokbench.c \
 *            build/libdsv4.a -lcjson -lpcre2-8 -lm -pthread
 * Usage: build/tokbench TOKENIZER_JSON TEXT_FILE [RUNS] [--ids OUT]  (--ids writes the ids, one per line) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/tokenizer.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tokbench TOKENIZER_JSON TEXT_FILE [RUNS] [--ids OUT]\n");
        return 2;
    }
    int runs = argc > 3 && argv[3][0] != '-' ? atoi(argv[3]) : 5;
    const char *ids_out = argc > 5 && !strcmp(argv[4], "--ids") ? argv[5] : NULL;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) { fprintf(stderr, "read failed\n"); return 1; }
    fclose(f);

    double t0 = now();
    tok_t *tok;
    if (tok_load(argv[1], &tok)) { fprintf(stderr, "tokbench: %s\n", dsv4_last_error()); return 1; }
    double load_s = now() - t0;

    double best_enc = 1e30, best_dec = 1e30;
    int32_t *ids = NULL;
    size_t n = 0;
    for (int r = 0; r < runs; r++) {
        free(ids);
        t0 = now();
        if (tok_encode(tok, text, (size_t)len, TOK_PARSE_SPECIAL, &ids, &n)) {
            fprintf(stderr, "tokbench: %s\n", dsv4_last_error());
            return 1;
        }
        double dt = now() - t0;
        if (dt < best_enc) best_enc = dt;
        char *back;
        size_t blen;
        t0 = now();
        if (tok_decode(tok, ids, n, 0, &back, &blen)) { fprintf(stderr, "tokbench: %s\n", dsv4_last_error()); return 1; }
        dt = now() - t0;
        if (dt < best_dec) best_dec = dt;
        if (blen != (size_t)len || memcmp(back, text, blen)) { fprintf(stderr, "tokbench: round trip failed\n"); return 1; }
        free(back);
    }
    if (ids_out) {
        FILE *o = fopen(ids_out, "w");
        if (!o) { perror(ids_out); return 1; }
        for (size_t i = 0; i < n; i++) fprintf(o, "%d\n", ids[i]);
        fclose(o);
    }
    printf("load_s=%.3f bytes=%ld tokens=%zu encode_s=%.4f encode_MBps=%.2f encode_Mtokps=%.2f decode_MBps=%.1f\n",
           load_s, len, n, best_enc, len / best_enc / 1e6, n / best_enc / 1e6, len / best_dec / 1e6);
    free(ids);
    free(text);
    tok_free(tok);
    return 0;
}
