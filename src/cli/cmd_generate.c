/* dsv4 generate: greedy decoding from token ids, for one prompt or a batch
 * of prompts decoded together (one transaction per step). A text prompt
 * (-p / --prompt-file) goes to cmd_generate_text.c instead. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/argmax.h"
#include "base/size.h"
#include "cli/commands.h"
#include "engine/spec.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dsv4 generate --model DIR (--tokens 1,2,3 | --tokens-file F | --batch F) [-n N]\n"
            "                     [--serial] [--step-deadline-ms MS] [--spec mtp[:K]|dspark[:K]] [--threads N]\n"
            "       [--device cpu|cuda|auto]   (default auto: cuda when a GPU is usable)\n"
            CLI_CACHE_USAGE
            "Prefills the prompt, then decodes N tokens greedily (default 16) and prints\n"
            "the generated ids, comma-separated, on one line.\n"
            "--batch F: one prompt per line (token ids); all prompts decode together, one\n"
            "step per token for every lane; prints one line per prompt. --serial decodes\n"
            "them one at a time instead (same output: batching never changes results).\n"
            "--step-deadline-ms: a batched step that takes longer is vetoed (no lane\n"
            "advances) and generation stops with an error.\n"
            "--spec mtp[:K]: speculative decoding, the MTP head drafting K tokens per step\n"
            "(default 1), verified in one step (with --batch: all prompts' drafts together);\n"
            "prints the same ids. Acceptance goes to stderr. --spec dspark[:K]: the same with\n"
            "the DSpark drafter (K default: its block size).\n");
    generate_text_usage(f);
}

/* Whether the arguments ask for text mode (a -p or --prompt-file option). */
static int text_mode(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strncmp(argv[i], "-p", 2) || !strncmp(argv[i], "--prompt", 8)) return 1;
    return 0;
}

/* Prompts of a --batch file: one line each, blank lines skipped; at most
 * DSV4_MAX_LANES of at most max_pos tokens. */
static int read_batch(const char *path, int max_pos, int ***ids, int **lens, int *n)
{
    size_t len;
    char *text = cli_read_file("generate", path, size_mul3(DSV4_MAX_LANES, (size_t)max_pos, CLI_ID_BYTES), &len);
    if (!text) return -1;
    if (cli_no_nul("generate", path, text, len)) { free(text); return -1; }
    int cnt = 0, rc = 0;
    int **v = calloc(DSV4_MAX_LANES, sizeof *v), *l = calloc(DSV4_MAX_LANES, sizeof *l);
    if (!v || !l) { fprintf(stderr, "dsv4 generate: out of memory\n"); rc = -1; }
    for (char *line = strtok(text, "\n"); line && !rc; line = strtok(NULL, "\n")) {
        if (strspn(line, " \t\r,") == strlen(line)) continue;
        if (cnt == DSV4_MAX_LANES) {
            fprintf(stderr, "dsv4 generate: %s has more than %d prompts\n", path, DSV4_MAX_LANES);
            rc = -1;
            break;
        }
        char what[4200]; /* a PATH_MAX path and the line */
        snprintf(what, sizeof what, "%s line %d", path, cnt + 1);
        if (cli_parse_ids(line, &v[cnt], &l[cnt], what)) { rc = -1; break; }
        cnt++;
        if (cli_prompt_fits("generate", what, (size_t)l[cnt - 1], max_pos)) rc = -1;
    }
    free(text);
    if (rc || !cnt) {
        if (!cnt && !rc) fprintf(stderr, "dsv4 generate: %s: no prompts\n", path);
        for (int i = 0; v && i < cnt; i++) free(v[i]);
        free(v);
        free(l);
        return -1;
    }
    *ids = v;
    *lens = l;
    *n = cnt;
    return 0;
}

/* Greedy speculative decoding of n prompts together (cohort steps); n_gen
 * already fits the context. */
static int generate_spec(dsv4_model *m, int **ids, const int *lens, int n, int n_gen, int k, double deadline)
{
    int rc = 1;
    dsv4_session **s = calloc((size_t)n, sizeof *s);
    spec_lane *l = calloc((size_t)n, sizeof *l), **act = calloc((size_t)n, sizeof *act);
    int *got = calloc((size_t)n, sizeof *got);
    int32_t *out = calloc((size_t)n * (size_t)(n_gen + SPEC_MAX_K + 1), sizeof *out);
    if (!s || !l || !act || !got || !out) { fprintf(stderr, "dsv4 generate: out of memory\n"); goto done; }
    for (int i = 0; i < n; i++) {
        if (dsv4_session_new(m, &s[i]) || spec_lane_init(&l[i], s[i], k, NULL) ||
            spec_feed(&l[i], (const int32_t *)ids[i], lens[i])) {
            fprintf(stderr, "dsv4 generate: prompt %d: %s\n", i + 1, dsv4_last_error());
            goto done;
        }
        out[(size_t)i * (n_gen + SPEC_MAX_K + 1)] = l[i].out[0];
        got[i] = 1;
    }
    dsv4_gate gate = {NULL, NULL, deadline};
    for (;;) {
        int na = 0;
        for (int i = 0; i < n; i++)
            if (got[i] < n_gen) {
                l[i].budget = n_gen - got[i];
                act[na++] = &l[i];
            }
        if (!na) break;
        if (spec_step(m, act, na, &gate)) { cli_report("generate", "speculative step"); goto done; }
        for (int i = 0; i < na; i++) {
            int w = (int)(act[i] - l);
            memcpy(out + (size_t)w * (n_gen + SPEC_MAX_K + 1) + got[w], act[i]->out, (size_t)act[i]->n_out * sizeof *out);
            got[w] += act[i]->n_out;
        }
    }
    long long drafted = 0, kept = 0, steps = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n_gen; j++) printf("%d%s", out[(size_t)i * (n_gen + SPEC_MAX_K + 1) + j], j + 1 < n_gen ? "," : "");
        printf("\n");
        drafted += l[i].n_drafted;
        kept += l[i].n_kept;
        steps += l[i].n_steps;
    }
    cli_spec_stats(dsv4_model_has_dspark(m), k, steps, kept, drafted);
    rc = 0;
done:
    for (int i = 0; l && i < n; i++) spec_lane_free(&l[i]); /* calloc'd: unused lanes are empty */
    for (int i = 0; s && i < n; i++) dsv4_session_free(s[i]);
    free(s); free(l); free(act); free(got); free(out);
    return rc;
}

/* How many tokens a greedy run can print after a prompt of `longest`
 * tokens: each one but the last is fed back, so at most max_pos - longest + 1. */
static int room(int n_gen, int longest, int max_pos)
{
    int most = max_pos - longest + 1;
    return n_gen < most ? n_gen : most;
}

static int generate_batch(dsv4_model *m, int **ids, const int *lens, int n, int n_gen, int serial, double deadline,
                          int spec)
{
    int rc = 1, V = dsv4_model_vocab(m), longest = 0, max_pos = dsv4_model_max_positions(m);
    for (int i = 0; i < n; i++) longest = lens[i] > longest ? lens[i] : longest;
    int todo = room(n_gen, longest, max_pos);
    if (spec && todo > 0) {
        if (n > DSV4_MAX_LANES / 2) { /* a speculative lane is two lanes of the step */
            fprintf(stderr, "dsv4 generate: %d prompts; at most %d decode together with --spec\n", n, DSV4_MAX_LANES / 2);
            return 1;
        }
        rc = generate_spec(m, ids, lens, n, todo, spec, deadline);
        if (!rc && todo < n_gen) cli_context_full("generate", max_pos);
        return rc;
    }
    dsv4_session **s = calloc((size_t)n, sizeof *s);
    int32_t *next = calloc((size_t)n, sizeof *next);
    int32_t *out_ids = malloc(size_mul3((size_t)n, (size_t)todo + 1, sizeof *out_ids));
    float *logits = malloc(size_mul3((size_t)n, (size_t)V, sizeof *logits));
    if (!s || !next || !out_ids || !logits) { fprintf(stderr, "dsv4 generate: out of memory\n"); goto done; }
    for (int i = 0; i < n; i++) {
        if (dsv4_session_new(m, &s[i]) || dsv4_session_eval_last(s[i], (const int32_t *)ids[i], lens[i], logits)) {
            fprintf(stderr, "dsv4 generate: prompt %d: %s\n", i + 1, dsv4_last_error());
            goto done;
        }
        next[i] = argmax_f32(logits, V);
    }
    dsv4_gate gate = {NULL, NULL, deadline};
    for (int k = 0; k < todo; k++) {
        for (int i = 0; i < n; i++) out_ids[(size_t)i * todo + k] = next[i];
        if (k + 1 == todo) break;
        if (serial) {
            for (int i = 0; i < n; i++) {
                if (dsv4_session_eval_last(s[i], &next[i], 1, logits + (size_t)i * V)) {
                    fprintf(stderr, "dsv4 generate: prompt %d: %s\n", i + 1, dsv4_last_error());
                    goto done;
                }
            }
        } else if (dsv4_decode_batch(m, s, next, n, logits, &gate)) {
            fprintf(stderr, "dsv4 generate: step %d: %s\n", k + 1, dsv4_last_error());
            goto done;
        }
        for (int i = 0; i < n; i++) next[i] = argmax_f32(logits + (size_t)i * V, V);
    }
    for (int i = 0; i < n; i++) { /* one line per prompt, empty for -n 0 as with --tokens */
        for (int k = 0; k < todo; k++) printf("%s%d", k ? "," : "", out_ids[(size_t)i * todo + k]);
        printf("\n");
    }
    if (todo < n_gen) cli_context_full("generate", max_pos);
    rc = 0;
done:
    for (int i = 0; s && i < n; i++) dsv4_session_free(s[i]);
    free(s);
    free(next);
    free(out_ids);
    free(logits);
    return rc;
}

static int generate_one(dsv4_model *m, const int *ids, int n, int n_gen)
{
    int V = dsv4_model_vocab(m), rc = 1, max_pos = dsv4_model_max_positions(m), todo = room(n_gen, n, max_pos);
    float *logits = malloc((size_t)V * sizeof *logits);
    dsv4_session *s = NULL;
    if (!logits || dsv4_session_new(m, &s)) { cli_report("generate", NULL); goto done; }
    if (dsv4_session_eval_last(s, (const int32_t *)ids, n, logits)) { cli_report("generate", "prompt"); goto done; }
    for (int i = 0; i < todo; i++) {
        int32_t next = argmax_f32(logits, V);
        printf("%s%d", i ? "," : "", next);
        fflush(stdout);
        if (i + 1 < todo && dsv4_session_eval_last(s, &next, 1, logits)) {
            printf("\n");
            cli_report("generate", NULL);
            goto done;
        }
    }
    printf("\n");
    if (todo < n_gen) cli_context_full("generate", max_pos);
    rc = 0;
done:
    dsv4_session_free(s);
    free(logits);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"tokens", required_argument, 0, 't'},
        {"tokens-file", required_argument, 0, 'f'}, {"batch", required_argument, 0, 'b'},
        {"serial", no_argument, 0, 'S'}, {"step-deadline-ms", required_argument, 0, 'D'},
        {"spec", required_argument, 0, 's'},
        {"threads", required_argument, 0, 'j'}, {"device", required_argument, 0, 'd'},
        {"cache", required_argument, 0, 'c'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = NULL, *tokens = NULL, *file = NULL, *batch = NULL, *device = NULL, *cache = NULL;
    int n_gen = 16, threads = 0, serial = 0, spec = 0, dspark = 0, c;
    double deadline = 0;
    if (text_mode(argc, argv)) return cmd_generate_text(argc, argv);
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:t:f:n:b:SD:j:d:c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': tokens = optarg; break;
        case 'f': file = optarg; break;
        case 'b': batch = optarg; break;
        case 'S': serial = 1; break;
        case 's': if (cli_parse_spec("generate", optarg, &spec, &dspark)) return 2; break;
        case 'D': if (cli_real("generate", "--step-deadline-ms", optarg, 1e-9, 1e9, &deadline)) return 2; break;
        case 'n': if (cli_int32("generate", "-n", optarg, 0, INT_MAX, &n_gen)) return 2; break;
        case 'j': if (cli_int32("generate", "--threads", optarg, 0, CLI_MAX_THREADS, &threads)) return 2; break;
        case 'd': device = optarg; break;
        case 'c': cache = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!model) { usage(stderr); return 2; }
    if (spec && serial) { fprintf(stderr, "dsv4 generate: --spec decodes the batch together; drop --serial\n"); return 2; }
    if (batch && (tokens || file)) { fprintf(stderr, "dsv4 generate: --batch replaces --tokens/--tokens-file\n"); return 2; }
    int max_pos = cli_model_context("generate", model);
    if (max_pos < 0) return 1;
    int *ids = NULL, n = 0, **prompts = NULL, *lens = NULL;
    if (batch ? read_batch(batch, max_pos, &prompts, &lens, &n) : cli_token_arg("generate", tokens, file, max_pos, &ids, &n))
        return 2;
    dsv4_model *m = cli_load_model("generate", model, threads, device, cache);
    if (m && spec && (spec = cli_spec_k("generate", m, dspark, spec)) < 0) {
        dsv4_model_free(m);
        m = NULL;
    }
    int rc = !m ? 1 : batch ? generate_batch(m, prompts, lens, n, n_gen, serial, deadline, spec)
                      : spec && n_gen > 0 ? generate_batch(m, &ids, &n, 1, n_gen, 0, 0, spec)
                                          : generate_one(m, ids, n, n_gen);
    dsv4_model_free(m);
    for (int i = 0; prompts && i < n; i++) free(prompts[i]);
    free(prompts);
    free(lens);
    free(ids);
    return rc;
}
