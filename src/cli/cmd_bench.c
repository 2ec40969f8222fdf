/* dsv4 bench: decode and prefill speed on a real or synthetic checkpoint,
 * against the memory-bandwidth limit measured (CPU) or nominal (GPU; the
 * GPU's read bandwidth and tensor peaks are measured in the same run and
 * printed beside it, prefill as a share of the peaks). */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/threadpool.h"
#include "cli/commands.h"
#include "engine/profile.h"
#include "engine/session.h"
#include "engine/spec.h"

#define HBM_PEAK_GBS 4800.0 /* H200 datasheet figure the targets use, where the GPU gives no peak */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dsv4 bench (--model DIR | --synthetic flash|pro [--layers N] [--experts N]\n"
            "                                              [--weights fp8-fp4|bf16|gguf-iq3_xxs])\n"
            "                  [--device cpu|cuda|auto] [--threads N] [--contexts 0,4096,32768,131072]\n"
            "                  [--cache exact|official|auto]\n"
            "                  [--decode N] [--prefill N] [--hf-compare] [--lanes 1,2,4,8]\n"
            "                  [--rows 1,2,6] [--spec mtp:K|dspark[:K] --accept P]\n"
            "Decode tokens/s at each context (state filled with random values, no prefill),\n"
            "prefill tokens/s for an N-token prompt, bytes read per decode token, achieved\n"
            "GB/s against the bandwidth limit, and the split of decode time by op family.\n"
            "On a GPU the limit is its memory's peak (memory clock x bus width); the bench\n"
            "first measures the device (memory read bandwidth, dense 4096^3 FP8 and BF16\n"
            "products through cuBLASLt) and gives prefill's share of both peaks.\n"
            "--weights: the synthetic weights' formats; fp8-fp4 (default) is the released\n"
            "checkpoints' mix (FP8 dense, MXFP4 routed experts), so bytes per token are real;\n"
            "gguf-iq3_xxs a GGUF file like the community UD-IQ3_XXS ones (IQ3_XXS routed\n"
            "experts, Q8_0 dense and shared expert, Q6_K head).\n"
            "--hf-compare (with --synthetic): also times transformers' eager bf16 model at\n"
            "the same shapes (tools/bench/hf_decode.py, python from $DSV4_PYTHON or python3)\n"
            "and prints our decode speed at the first context as a ratio to it.\n"
            "--lanes: aggregate tokens/s of batched steps (dsv4_decode_batch) with that many\n"
            "sessions at the first context, against the roofline of dense weights + the\n"
            "expected distinct experts of the lanes (uniform routing) + every lane's state.\n"
            "--rows: steps of that many token rows of one lane at the first context, every\n"
            "row's logits (a verify step's shape, without the drafting): ms a step against\n"
            "the first entry's, against the bytes the rows read (for per-kernel profiles of\n"
            "a verify step: tools/bench/profile_step.sh with --rows N).\n"
            "--spec mtp:K --accept P: batch-1 speculative decoding at the first context, the\n"
            "MTP head drafting K tokens per step and each draft kept with probability P (a\n"
            "speed model: the tokens are not the model's), against plain decoding.\n"
            "--spec dspark[:K] --accept P: the same with the DSpark drafter, one block\n"
            "drafting K tokens (default: dspark_block_size, 5 in Flash-0731); with\n"
            "--synthetic the model is built with Flash-0731's DSpark drafter instead of the\n"
            "MTP head (not with --weights gguf-iq3_xxs).\n");
}

typedef struct { const uint64_t *buf; int64_t n; uint64_t *sums; } bw_job;

static void bw_sum(void *ctx, int64_t b, int64_t e, int tid)
{
    bw_job *j = ctx;
    uint64_t s = 0;
    for (int64_t i = b; i < e; i++) s += j->buf[i];
    j->sums[tid] += s;
}

/* Host memory read bandwidth over 1 GiB with every thread, best of 3. */
static double host_read_gbs(int threads)
{
    int64_t n = (1ll << 30) / 8;
    uint64_t *buf = malloc((size_t)n * 8), sums[256] = {0};
    if (!buf) return 0;
    for (int64_t i = 0; i < n; i++) buf[i] = (uint64_t)i;
    dsv4_pool *p = pool_new(threads);
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        bw_job j = {buf, n, sums};
        double t0 = clock_s();
        pool_for(p, n, 1 << 16, bw_sum, &j);
        double gbs = (double)n * 8 / (clock_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    pool_free(p);
    free(buf);
    return best;
}

/* "a,b,c": each item through cli_int; returns the count, -1 after a message. */
static int parse_list(const char *opt, const char *s, long long lo, long long hi, int64_t *out, int max)
{
    int n = 0;
    for (;;) {
        size_t k = strcspn(s, ",");
        char item[32];
        if (n == max) { fprintf(stderr, "dsv4 bench: %s: more than %d values\n", opt, max); return -1; }
        snprintf(item, sizeof item, "%.*s", k < sizeof item ? (int)k : (int)sizeof item - 1, s);
        long long v;
        if (cli_int("bench", opt, k < sizeof item ? item : s, lo, hi, &v)) return -1;
        out[n++] = v;
        if (!s[k]) return n;
        s += k + 1;
    }
}

static int random_token(uint32_t *x, int vocab)
{
    *x ^= *x << 13; *x ^= *x >> 17; *x ^= *x << 5;
    return (int)(*x % (uint32_t)vocab);
}

/* The backend's graph counters at one moment (all 0 where it has none). */
typedef struct { long long cap, rep; double host_s, gpu_s; int on; } graph_mark;

static graph_mark graphs_now(const dsv4_model *m)
{
    graph_mark g = {0};
    if (!m->be->ops->graph_counts) return g;
    m->be->ops->graph_counts(m->be, &g.cap, &g.rep, &g.host_s, &g.gpu_s);
    g.on = 1;
    return g;
}

/* How `steps` measured steps ran where the backend records graphs, into buf
 * ("-" elsewhere): captured anew / replayed, then the host's recording and
 * the graphs' device time a step in ms. A step captured anew pays the
 * capture (milliseconds for a whole model); wall time beyond host + device
 * is the host between steps. */
static const char *graphs_since(const dsv4_model *m, graph_mark g0, int steps, char *buf, size_t n)
{
    graph_mark g = graphs_now(m);
    if (g.on && steps > 0)
        snprintf(buf, n, "%lld/%lld, host %.2f + device %.2f ms", g.cap - g0.cap, g.rep - g0.rep,
                 1e3 * (g.host_s - g0.host_s) / steps, 1e3 * (g.gpu_s - g0.gpu_s) / steps);
    else snprintf(buf, n, "-");
    return buf;
}

/* Seconds per decode token at context ctx (after 2 warm-up tokens); graphs
 * (may be NULL): graphs_since over the measured tokens. */
static double time_decode(dsv4_model *m, int64_t ctx, int n, float *logits, char *graphs, size_t graphs_n)
{
    dsv4_session *s = NULL;
    if (dsv4_session_new(m, &s)) return -1;
    double t = -1;
    uint32_t x = 12345u + (uint32_t)ctx;
    if (ctx && session_fill_random(s, ctx)) goto out;
    graph_mark g0 = {0};
    for (int i = 0; i < 2 + n; i++) {
        if (i == 2) {
            t = clock_s();
            g0 = graphs_now(m);
        }
        int32_t tok = random_token(&x, dsv4_model_vocab(m));
        if (dsv4_session_eval_last(s, &tok, 1, logits)) { t = -1; goto out; }
    }
    t = (clock_s() - t) / n;
    if (graphs) graphs_since(m, g0, n, graphs, graphs_n);
out:
    dsv4_session_free(s);
    return t;
}

/* Expected distinct routed experts a layer when n token rows each pick
 * n_active of n_experts uniformly (the bench's synthetic routing). */
static double expected_experts(const dsv4_config *cf, int n)
{
    double E = cf->n_experts, K = cf->n_active;
    return E * (1 - pow(1 - K / E, n));
}

/* Steps of n token rows of one lane at context ctx, for each n of nr (every
 * row's logits, as a verify step of n - 1 drafts has them): ms a step
 * against the first entry's, and the bytes n rows read (the dense weights,
 * the experts they are expected to choose, the lane's state). */
#define BENCH_MAX_ROWS 64
static int bench_rows(dsv4_model *m, const int64_t *nr, int cnt, int64_t ctx, int n_dec, double limit)
{
    const dsv4_config *cf = &m->cfg;
    printf("steps of several rows of one lane at context %lld (every row's logits, a verify step's shape):\n"
           "%-6s %10s %9s %14s %9s %8s %s\n", (long long)ctx, "rows", "ms/step", "x first", "bytes/step MB", "GB/s",
           "% limit", "steps new/replayed as graphs, host time before the GPU starts + device time a step");
    double first = 0;
    for (int i = 0; i < cnt; i++) {
        int n = (int)nr[i];
        dsv4_session *s = NULL;
        int32_t tok[BENCH_MAX_ROWS];
        float *lg = malloc((size_t)n * (size_t)cf->vocab * sizeof *lg);
        uint32_t x = 77u;
        int ok = lg && !dsv4_session_new(m, &s) && (!ctx || !session_fill_random(s, ctx));
        double t = 0;
        graph_mark g0 = {0};
        for (int step = 0; step < 2 + n_dec && ok; step++) { /* 2 warm-up steps */
            if (step == 2) {
                t = clock_s();
                g0 = graphs_now(m);
            }
            for (int k = 0; k < n; k++) tok[k] = random_token(&x, cf->vocab);
            dsv4_lane ln = {.session = s, .tokens = tok, .n_tokens = n, .logits_mode = DSV4_LOGITS_ALL, .logits = lg};
            ok = !dsv4_step(m, &ln, 1, NULL);
        }
        t = (clock_s() - t) / n_dec;
        char graphs[96];
        graphs_since(m, g0, n_dec, graphs, sizeof graphs);
        dsv4_session_free(s);
        free(lg);
        if (!ok) { cli_report("bench", "steps of several rows"); return -1; }
        uint64_t wb, sb;
        model_decode_traffic(m, ctx, expected_experts(cf, n), &wb, &sb);
        double bytes = (double)wb + (double)sb, gbs = bytes / t / 1e9;
        if (i == 0) first = t;
        printf("%-6d %10.3f %8.2fx %14.1f %9.1f %7.1f%% %s\n", n, 1e3 * t, t / first, bytes / 1e6, gbs,
               100 * gbs / limit, graphs);
        fflush(stdout);
    }
    return 0;
}

/* Aggregate decode speed of batched steps with n lanes at context ctx. */
static int bench_lanes(dsv4_model *m, const int64_t *nl, int cnt, int64_t ctx, int n_dec, double limit)
{
    const dsv4_config *cf = &m->cfg;
    printf("batched decode at context %lld:\n%-6s %12s %10s %10s %14s %9s %8s\n", (long long)ctx, "lanes",
           "agg tok/s", "ms/step", "speedup", "bytes/step MB", "GB/s", "% limit");
    double one = 0;
    for (int i = 0; i < cnt; i++) {
        int n = (int)nl[i];
        dsv4_session *s[DSV4_MAX_LANES] = {0};
        int32_t tok[DSV4_MAX_LANES];
        float *lg = malloc((size_t)n * (size_t)cf->vocab * sizeof *lg);
        uint32_t x = 99u;
        int ok = lg != NULL;
        for (int k = 0; k < n && ok; k++) {
            ok = !dsv4_session_new(m, &s[k]) && (!ctx || !session_fill_random(s[k], ctx));
            tok[k] = random_token(&x, cf->vocab);
        }
        double t = 0;
        for (int step = 0; step < 2 + n_dec && ok; step++) {
            if (step == 2) t = clock_s();
            ok = !dsv4_decode_batch(m, s, tok, n, lg, NULL);
            for (int k = 0; k < n; k++) tok[k] = random_token(&x, cf->vocab);
        }
        t = (clock_s() - t) / n_dec;
        for (int k = 0; k < n; k++) dsv4_session_free(s[k]);
        free(lg);
        if (!ok) { cli_report("bench", "batched decode"); return -1; }
        uint64_t wb, sb;
        model_decode_traffic(m, ctx, expected_experts(cf, n), &wb, &sb);
        double bytes = (double)wb + (double)n * (double)sb, gbs = bytes / t / 1e9;
        if (i == 0) one = n / t;
        printf("%-6d %12.2f %10.3f %9.2fx %14.1f %9.1f %7.1f%%\n", n, n / t, 1e3 * t, (n / t) / one, bytes / 1e6, gbs,
               100 * gbs / limit);
        fflush(stdout);
    }
    return 0;
}

/* Whether a spec lane with k drafts can run on m (a drafter, k within its
 * block), as the library says it: 0 after the message. */
static int spec_runs(dsv4_model *m, int k)
{
    dsv4_session *s = NULL;
    spec_lane l;
    memset(&l, 0, sizeof l);
    int ok = !dsv4_session_new(m, &s) && !spec_lane_init(&l, s, k, NULL);
    if (!ok) cli_report("bench", "speculative decoding");
    spec_lane_free(&l);
    dsv4_session_free(s);
    return ok;
}

/* Speculative decoding speed at context ctx with forced acceptance P, with
 * the model's drafter (the MTP head or the DSpark drafter). */
static int bench_spec(dsv4_model *m, int k, double P, int64_t ctx, int n_dec, double plain_t)
{
    dsv4_session *s = NULL;
    spec_lane l;
    memset(&l, 0, sizeof l);
    int32_t prompt[4];
    uint32_t x = 4242u;
    for (int i = 0; i < 4; i++) prompt[i] = random_token(&x, dsv4_model_vocab(m));
    int ok = !dsv4_session_new(m, &s) && (!ctx || !session_fill_random(s, ctx)) && !spec_lane_init(&l, s, k, NULL);
    l.force_accept = P;
    ok = ok && !spec_feed(&l, prompt, 4);
    long long produced = 0, kept0 = 0, drafted0 = 0;
    double t = 0, draft0 = 0, verify0 = 0, accept0 = 0;
    graph_mark g0 = {0};
    int steps = 0;
    for (int i = 0; i < 2 + n_dec && ok; i++) {
        if (i == 2) {
            t = clock_s();
            kept0 = l.n_kept;
            drafted0 = l.n_drafted;
            draft0 = l.s_draft;
            verify0 = l.s_verify;
            accept0 = l.s_accept;
            g0 = graphs_now(m);
        }
        spec_lane *lp = &l;
        ok = !spec_step(m, &lp, 1, NULL);
        if (i >= 2) { produced += l.n_out; steps++; }
    }
    t = clock_s() - t;
    if (!ok) { cli_report("bench", "speculative decoding"); spec_lane_free(&l); dsv4_session_free(s); return -1; }
    double tps = (double)produced / t, step_ms = 1e3 * t / steps;
    printf("speculative %s:%d, forced acceptance %.2f, context %lld: %.2f tok/s (%.2f tokens/step, %.3f ms/step = "
           "%.2fx a 1-token step; %lld of %lld drafts kept) -> %.2fx plain decoding\n",
           dsv4_model_has_dspark(m) ? "dspark" : "mtp", k, P, (long long)ctx, tps, (double)produced / steps, step_ms,
           step_ms / (1e3 * plain_t),
           l.n_kept - kept0, l.n_drafted - drafted0, tps * plain_t);
    /* the forced keeps are a few dozen draws: the speed model at their
     * expectation, 1 + P + ... + P^k tokens a step (when every proposal had
     * k drafts), says the same without their noise */
    if (l.n_drafted - drafted0 == (long long)k * steps) {
        double e = 0, pk = 1;
        for (int i = 0; i <= k; i++, pk *= P) e += pk;
        printf("at the expected %.2f tokens a step: %.2fx plain decoding\n", e, e / (t / steps) * plain_t);
    }
    printf("a speculative step: drafting %.3f ms, verify %.3f ms (of which the acceptance on the host %.3f ms), "
           "the rest %.3f ms; a 1-token step %.3f ms\n",
           1e3 * (l.s_draft - draft0) / steps, 1e3 * (l.s_verify - verify0) / steps, 1e3 * (l.s_accept - accept0) / steps,
           step_ms - 1e3 * (l.s_draft - draft0 + l.s_verify - verify0) / steps, 1e3 * plain_t);
    char g[96];
    printf("graphs over the speculative steps (captured anew/replayed, a speculative step's recording and device "
           "time): %s\n", graphs_since(m, g0, steps, g, sizeof g));
    /* the verify step's bytes against a 1-token step's (the main model's;
     * the drafter's are not counted): its k+1 rows read the dense weights
     * once, the routed experts they are expected to choose and about the
     * same state */
    const dsv4_config *cf = &m->cfg;
    int rows = k + 1;
    double dv = expected_experts(cf, rows);
    uint64_t wd, wo, wv, st;
    model_decode_traffic(m, ctx, 0, &wd, &st);
    model_decode_traffic(m, ctx, expected_experts(cf, 1), &wo, &st);
    model_decode_traffic(m, ctx, dv, &wv, &st);
    double one = (double)(wo + st), ver = (double)(wv + st);
    printf("verify step of %d rows: %.3f MB (dense %.3f + routed experts %.3f, %.2f of %d distinct a layer, + state %.3f)"
           " = %.2fx the bytes of a 1-token step (%.3f MB, routed experts %.3f)\n",
           rows, ver / 1e6, (double)wd / 1e6, (double)(wv - wd) / 1e6, dv, cf->n_experts, (double)st / 1e6, ver / one,
           one / 1e6, (double)(wo - wd) / 1e6);
    spec_lane_free(&l);
    dsv4_session_free(s);
    return 0;
}

/* ms per decode token of transformers' eager model (tools/bench/hf_decode.py). */
static double hf_decode_ms(const char *preset, int layers, int experts, int n)
{
    const char *py = getenv("DSV4_PYTHON") ? getenv("DSV4_PYTHON") : "python3";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s tools/bench/hf_decode.py --preset %s --layers %d --experts %d --decode %d", py,
             preset, layers, experts, n);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[256];
    double ms = -1;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "hf_ms_per_token %lf", &ms) == 1) break;
    pclose(p);
    return ms;
}

/* An n-token prompt as one step of a new session (random tokens), timed. */
static int time_prefill(dsv4_model *m, int n, float *logits, double *seconds)
{
    dsv4_session *s = NULL;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    uint32_t x = 777u;
    for (int i = 0; tok && i < n; i++) tok[i] = random_token(&x, m->cfg.vocab);
    if (!tok || dsv4_session_new(m, &s)) {
        free(tok);
        return 1;
    }
    double t = clock_s();
    dsv4_status st = dsv4_session_eval_last(s, tok, n, logits);
    *seconds = clock_s() - t;
    dsv4_session_free(s);
    free(tok);
    return st != DSV4_OK;
}

/* The profiled backend's time per op family, per `per` (steps of it). */
static void print_profile(const dsv4_backend *prof, const char *title, int steps, const char *per)
{
    const char *names[32];
    double sec[32], total = 0;
    long calls[32];
    int n = profile_report(prof, names, sec, calls, 32);
    for (int i = 0; i < n; i++) total += sec[i];
    printf("%s:\n", title);
    for (int i = 0; i < n; i++)
        printf("  %-30s %6.1f%%  %8.3f ms/%-4s %5ld calls/%s\n", names[i], 100 * sec[i] / total, 1e3 * sec[i] / steps,
               per, calls[i] / steps, per);
}

int cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"synthetic", required_argument, 0, 's'},
        {"layers", required_argument, 0, 'L'}, {"experts", required_argument, 0, 'E'},
        {"device", required_argument, 0, 'd'}, {"threads", required_argument, 0, 'j'},
        {"contexts", required_argument, 0, 'c'}, {"decode", required_argument, 0, 'n'},
        {"prefill", required_argument, 0, 'p'}, {"hf-compare", no_argument, 0, 'H'},
        {"lanes", required_argument, 0, 'l'}, {"weights", required_argument, 0, 'W'},
        {"cache", required_argument, 0, 'C'}, {"spec", required_argument, 0, 'S'},
        {"accept", required_argument, 0, 'A'}, {"rows", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = NULL, *synth = NULL, *device = NULL, *ctxs = "0,4096,32768,131072", *lanes_arg = NULL;
    const char *weights = NULL, *cache = NULL, *rows_arg = NULL;
    int layers = 0, experts = 0, threads = 0, n_dec = 16, n_pre = 4096, hf = 0, spec = 0, dspark = 0, c;
    double accept = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:s:L:E:d:j:c:n:p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 's': synth = optarg; break;
        case 'L': if (cli_int32("bench", "--layers", optarg, 0, DSV4_MAX_LAYERS, &layers)) return 2; break;
        case 'E': if (cli_int32("bench", "--experts", optarg, 0, 1 << 16, &experts)) return 2; break;
        case 'd': device = optarg; break;
        case 'j': if (cli_int32("bench", "--threads", optarg, 0, CLI_MAX_THREADS, &threads)) return 2; break;
        case 'c': ctxs = optarg; break;
        case 'n': if (cli_int32("bench", "--decode", optarg, 1, INT_MAX, &n_dec)) return 2; break;
        case 'p': if (cli_int32("bench", "--prefill", optarg, 0, INT_MAX, &n_pre)) return 2; break;
        case 'H': hf = 1; break;
        case 'l': lanes_arg = optarg; break;
        case 'W': weights = optarg; break;
        case 'C': cache = optarg; break;
        case 'S': if (cli_parse_spec("bench", optarg, &spec, &dspark)) return 2; break;
        case 'A': if (cli_real("bench", "--accept", optarg, 0, 1, &accept)) return 2; break;
        case 'R': rows_arg = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int64_t ctx[16];
    int n_ctx = parse_list("--contexts", ctxs, 0, INT_MAX, ctx, 16), n_lanes = 0, n_rows = 0;
    int64_t lanes[16], rows[16];
    if (n_ctx < 0 || (lanes_arg && (n_lanes = parse_list("--lanes", lanes_arg, 1, DSV4_MAX_LANES, lanes, 16)) < 0) ||
        (rows_arg && (n_rows = parse_list("--rows", rows_arg, 1, BENCH_MAX_ROWS, rows, 16)) < 0))
        return 2;
    if (!!model == !!synth || (hf && !synth) || (weights && !synth)) { usage(stderr); return 2; }
    if (!spec != (accept < 0)) { fprintf(stderr, "dsv4 bench: --spec and --accept go together\n"); return 2; }
    dsv4_model *m = NULL;
    double t0 = clock_s();
    if (synth) {
        dsv4_load_options opt = {0};
        opt.n_threads = threads;
        opt.device = device;
        if (cli_cache_arg("bench", cache, &opt.cache)) return 2;
        /* the drafter --spec names (an MTP head otherwise) */
        if (dsv4_model_synthetic(synth, layers, experts, weights, dspark ? "dspark" : NULL, &opt, &m)) {
            cli_report("bench", "synthetic model");
            return 1;
        }
    } else if (!(m = cli_load_model("bench", model, threads, device, cache))) {
        return 1;
    }
    const dsv4_config *cf = &m->cfg;
    /* a --spec the model cannot run fails now, not after the decode timings */
    if (spec && ((spec = cli_spec_k("bench", m, dspark, spec)) < 0 || !spec_runs(m, spec))) {
        dsv4_model_free(m);
        return 1;
    }
    /* every timed session must stay inside the model's context */
    for (int i = 0; i < n_ctx; i++)
        if (ctx[i] > (int64_t)cf->max_pos - 2 - n_dec) {
            fprintf(stderr, "dsv4 bench: --contexts %lld: with %d decode tokens (+2 warm-up) it passes the model's "
                    "context of %d positions (max_position_embeddings)\n", (long long)ctx[i], n_dec, cf->max_pos);
            dsv4_model_free(m);
            return 2;
        }
    for (int i = 0; i < n_rows; i++)
        if (ctx[0] > (int64_t)cf->max_pos - (2 + n_dec) * rows[i]) {
            fprintf(stderr, "dsv4 bench: --rows %lld: %d steps (+2 warm-up) from context %lld pass the model's context "
                    "of %d positions (max_position_embeddings)\n", (long long)rows[i], n_dec, (long long)ctx[0],
                    cf->max_pos);
            dsv4_model_free(m);
            return 2;
        }
    if (n_pre > cf->max_pos) {
        fprintf(stderr, "dsv4 bench: --prefill %d is longer than the model's context of %d positions "
                "(max_position_embeddings)\n", n_pre, cf->max_pos);
        dsv4_model_free(m);
        return 2;
    }
    int is_cpu = !strcmp(m->be->name, "cpu");
    /* the formats as bound (GGUF files choose them per tensor): layer 0's wq_a and first expert */
    printf("# dsv4 bench: %s on %s, %d layers, %d routed experts, vocab %d, weights %s dense / %s experts / %s head, "
           "%s cache (load %.1f s)\n", synth ? synth : model, m->be->name, cf->n_layers, cf->n_experts, cf->vocab,
           wformat_info(m->layers[0].wq_a.fmt)->name, wformat_info(m->layers[0].w1[0].fmt)->name,
           wformat_info(m->head.fmt)->name,
           dsv4_model_cache_mode(m) == DSV4_CACHE_OFFICIAL ? "official" : "exact", clock_s() - t0);
    if (!is_cpu) {
        dsv4_memory_info mi;
        dsv4_model_memory(m, &mi);
        printf("# weights resident on the device: %.1f MB (checkpoint bytes and scale grids, nothing dequantized)\n",
               mi.device_weight_bytes / 1e6);
    }
    /* the device's own ceilings, for the ratios below (GPU: its memory's
     * peak rate and measured read bandwidth, the tensor peaks for prefill) */
    dsv4_device_limits lim = {0};
    if (!is_cpu && m->be->ops->measure_limits &&
        m->be->ops->measure_limits(m->be, &lim)) { cli_report("bench", "measuring the device"); dsv4_model_free(m); return 1; }
    double limit = is_cpu ? host_read_gbs(threads) : lim.peak_gbs > 0 ? lim.peak_gbs : HBM_PEAK_GBS;
    if (lim.name[0]) printf("# device: %s\n", lim.name);
    printf("# bandwidth limit: %.1f GB/s (%s)\n", limit,
           is_cpu ? "host memory read, all threads, measured now"
           : lim.peak_gbs > 0 ? "this GPU's memory peak: memory clock x bus width" : "H200 HBM datasheet peak");
    if (lim.read_gbs > 0 || lim.fp8_tflops > 0)
        printf("# measured now: memory read %.1f GB/s (%.1f%% of the peak); dense 4096^3 products through "
               "cuBLASLt: FP8 %.1f TFLOP/s, BF16 %.1f TFLOP/s, FP8 under 128x128 / 1x128 block scales %.1f TFLOP/s "
               "(0: not measurable)\n",
               lim.read_gbs, 100 * lim.read_gbs / limit, lim.fp8_tflops, lim.bf16_tflops, lim.fp8_block_tflops);
    float *logits = malloc((size_t)cf->vocab * sizeof *logits);
    if (!logits) { dsv4_model_free(m); return 1; }
    printf("%-9s %10s %10s %12s %12s %9s %7s %s\n", "context", "tok/s", "ms/tok", "weights MB", "state MB", "GB/s",
           "% limit", "steps new/replayed as graphs, host time before the GPU starts + device time a token");
    double first_t = 0;
    for (int i = 0; i < n_ctx; i++) {
        char graphs[96];
        double t = time_decode(m, ctx[i], n_dec, logits, graphs, sizeof graphs);
        if (i == 0) first_t = t;
        if (t < 0) { cli_report("bench", "decode"); free(logits); dsv4_model_free(m); return 1; }
        uint64_t wb, sb;
        model_decode_traffic(m, ctx[i], cf->n_active, &wb, &sb);
        double gbs = (double)(wb + sb) / t / 1e9;
        printf("%-9lld %10.2f %10.3f %12.1f %12.1f %9.1f %6.1f%% %s\n", (long long)ctx[i], 1 / t, 1e3 * t, wb / 1e6,
               sb / 1e6, gbs, 100 * gbs / limit, graphs);
        fflush(stdout);
    }
    if (n_pre > 0) {
        double tp;
        if (time_prefill(m, n_pre, logits, &tp)) { cli_report("bench", "prefill"); free(logits); dsv4_model_free(m); return 1; }
        double fm, fa;
        model_prefill_flops(m, n_pre, 1, &fm, &fa);
        double tf = (fm + fa) / tp / 1e12;
        printf("prefill %d tokens: %.2f s, %.1f tok/s, %.2f TFLOP/s (products %.2f, attention %.2f)", n_pre, tp,
               n_pre / tp, tf, fm / tp / 1e12, fa / tp / 1e12);
        if (lim.fp8_tflops > 0 && lim.bf16_tflops > 0)
            printf(" = %.2f%% of the FP8 peak, %.2f%% of the BF16 peak measured now", 100 * tf / lim.fp8_tflops,
                   100 * tf / lim.bf16_tflops);
        if (lim.fp8_block_tflops > 0) /* the library's rate on the official block scales, no invariance rule */
            printf(", %.2f%% of the block-scaled FP8 product's", 100 * tf / lim.fp8_block_tflops);
        printf("\n");
    }
    if (n_lanes && bench_lanes(m, lanes, n_lanes, ctx[0], n_dec, limit)) { free(logits); dsv4_model_free(m); return 1; }
    if (n_rows && bench_rows(m, rows, n_rows, ctx[0], n_dec, limit)) { free(logits); dsv4_model_free(m); return 1; }
    if (spec && bench_spec(m, spec, accept, ctx[0], n_dec, first_t)) { free(logits); dsv4_model_free(m); return 1; }
    if (hf) {
        double hf_ms = hf_decode_ms(synth, cf->n_layers, cf->n_experts, n_dec);
        if (hf_ms > 0)
            printf("transformers eager bf16, same shapes: %.3f ms/tok; dsv4 at context %lld: %.3f ms/tok -> %.1fx faster\n",
                   hf_ms, (long long)ctx[0], 1e3 * first_t, hf_ms / (1e3 * first_t));
        else
            printf("transformers comparison failed (see stderr)\n");
    }
    /* split of decode (and prefill) time by op family (synchronized per op) */
    dsv4_backend *real = m->be, *prof = profile_wrap(real);
    if (prof) {
        m->be = prof;
        int n_prof = n_dec < 4 ? n_dec : 4, steps = n_prof + 2; /* time_decode runs 2 warm-up steps */
        double t = time_decode(m, ctx[0], n_prof, logits, NULL, 0);
        char title[160];
        snprintf(title, sizeof title, "decode time by op family at context %lld (profiled with a sync after every op: "
                 "%.3f ms/tok)", (long long)ctx[0], t * 1e3);
        print_profile(prof, title, steps, "tok");
        if (n_pre > 0) {
            profile_reset(prof);
            if (!time_prefill(m, n_pre, logits, &t)) {
                snprintf(title, sizeof title, "prefill time by op family, %d tokens in one step (profiled with a sync "
                         "after every op: %.2f s)", n_pre, t);
                print_profile(prof, title, 1, "step");
            }
        }
        m->be = real;
        prof->ops->destroy(prof);
    }
    free(logits);
    dsv4_model_free(m);
    return 0;
}
