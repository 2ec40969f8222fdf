/* dsv4 generate -p TEXT: text in, text out. The prompt is tokenized (raw
 * completion, or rendered as one chat user turn with --chat), prefilled, and
 * the sampled continuation is printed as it is produced. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/textgen.h"
#include "text/chat.h"

void generate_text_usage(FILE *f)
{
    fprintf(f,
            "\ntext mode: dsv4 generate --model DIR (-p TEXT | --prompt-file F) [-n N] [options]\n"
            "Tokenizes the prompt, prefills it, samples up to N tokens (default 256) and prints\n"
            "their text as it is produced, then a newline. Stops at the end-of-sentence token\n"
            "(config eos_token_id and the tokenizer's), a --stop string or id, or a full context.\n"
            "  -p TEXT / --prompt-file F   the prompt (special tokens written in it are recognized)\n"
            "  --no-bos             raw mode: do not put the BOS token first (default: config bos_token_id)\n"
            "  --chat               render the prompt as a chat user turn (BOS included)\n"
            "  --no-think | --think | --think-max   chat reasoning mode (default --no-think)\n"
            "  --system TEXT        chat: a system message first\n");
    textgen_usage(f);
}

enum { OPT_PROMPT_FILE = 1, OPT_CHAT, OPT_NOTHINK, OPT_THINK, OPT_THINKMAX, OPT_SYSTEM, OPT_NOBOS };

/* The prompt's token ids: raw text (+BOS) or a rendered chat turn. */
static int prompt_ids(const textgen *g, const char *text, size_t len, int chat, chat_mode mode, const char *system,
                      int no_bos, int32_t **ids, size_t *n)
{
    int32_t *raw;
    size_t n_raw;
    if (textgen_encode(g, text, len, &raw, &n_raw)) return -1; /* checks the UTF-8 of the text itself */
    if (!chat) {
        int bos = !no_bos && g->bos_id >= 0;
        *ids = malloc((n_raw + 1) * sizeof **ids);
        if (!*ids) { free(raw); fprintf(stderr, "dsv4 generate: out of memory\n"); return -1; }
        if (bos) (*ids)[0] = g->bos_id;
        if (n_raw) memcpy(*ids + bos, raw, n_raw * sizeof *raw);
        *n = n_raw + (size_t)bos;
        free(raw);
        return 0;
    }
    free(raw);
    if (memchr(text, 0, len)) { fprintf(stderr, "dsv4 generate: --chat: the prompt holds a NUL byte\n"); return -1; }
    chat_msg msgs[2] = {{.role = CHAT_ROLE_SYSTEM, .content = system}, {.role = CHAT_ROLE_USER, .content = text}};
    chat_opts o = {.mode = mode};
    char *rendered;
    int k = system ? 0 : 1;
    if (chat_render(msgs + k, 2 - k, &o, &rendered)) { cli_report("generate", "--chat"); return -1; }
    int rc = textgen_encode(g, rendered, strlen(rendered), ids, n);
    free(rendered);
    return rc;
}

int cmd_generate_text(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"prompt", required_argument, 0, 'p'},
        {"prompt-file", required_argument, 0, OPT_PROMPT_FILE}, {"chat", no_argument, 0, OPT_CHAT},
        {"no-think", no_argument, 0, OPT_NOTHINK}, {"think", no_argument, 0, OPT_THINK},
        {"think-max", no_argument, 0, OPT_THINKMAX}, {"system", required_argument, 0, OPT_SYSTEM},
        {"no-bos", no_argument, 0, OPT_NOBOS}, {"help", no_argument, 0, 'h'}, TEXTGEN_LONG_OPTIONS, {0, 0, 0, 0}};
    const char *model = NULL, *prompt = NULL, *pfile = NULL, *system = NULL;
    int n_gen = 256, chat = 0, no_bos = 0, c, r;
    chat_mode mode = CHAT_NOTHINK;
    textgen_args a;
    textgen_args_init(&a);
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:p:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': prompt = optarg; break;
        case OPT_PROMPT_FILE: pfile = optarg; break;
        case OPT_CHAT: chat = 1; break;
        case OPT_NOTHINK: mode = CHAT_NOTHINK; break;
        case OPT_THINK: mode = CHAT_THINK; break;
        case OPT_THINKMAX: mode = CHAT_THINK_MAX; break;
        case OPT_SYSTEM: system = optarg; break;
        case OPT_NOBOS: no_bos = 1; break;
        case 'n':
            if (cli_int32("generate", "-n", optarg, 0, INT_MAX, &n_gen)) { textgen_args_free(&a); return 2; }
            break;
        case 'h': generate_text_usage(stdout); textgen_args_free(&a); return 0;
        default:
            r = textgen_option("generate", &a, c, optarg);
            if (r != 1) {
                if (r == 0) generate_text_usage(stderr);
                textgen_args_free(&a);
                return 2;
            }
        }
    }
    if (a.spec_k && a.logprobs) {
        fprintf(stderr, "dsv4 generate: --logprobs with --spec is not supported\n");
        textgen_args_free(&a);
        return 2;
    }
    if (!model || !!prompt == !!pfile || optind < argc) {
        if (model && prompt && pfile) fprintf(stderr, "dsv4 generate: give -p or --prompt-file, not both\n");
        else generate_text_usage(stderr);
        textgen_args_free(&a);
        return 2;
    }
    textgen g;
    int rc = 1;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t len = prompt ? strlen(prompt) : 0, n = 0;
    float *logits = NULL;
    dsv4_session *s = NULL;
    sampler *smp = NULL;
    textgen_result res = {0};
    if (textgen_open(&g, "generate", model, &a)) { textgen_args_free(&a); return 1; }
    if (pfile && !(text = cli_read_file("generate", pfile, textgen_max_text(&g), &len))) goto done;
    if (prompt_ids(&g, prompt ? prompt : text, len, chat, mode, system, no_bos, &ids, &n)) goto done;
    if (n == 0) { fprintf(stderr, "dsv4 generate: the prompt is empty (no tokens)\n"); goto done; }
    if (cli_prompt_fits("generate", "the prompt", n, g.max_pos)) goto done;
    if (n_gen > g.max_pos) n_gen = g.max_pos;
    if (textgen_load_model(&g, model, &a)) goto done;
    logits = malloc((size_t)g.vocab * sizeof *logits);
    if (!logits || dsv4_session_new(g.model, &s) || sampler_new(&g.sp, g.vocab, &smp)) {
        cli_report("generate", NULL);
        goto done;
    }
    int bad;
    if (a.spec_k) {
        spec_lane l;
        if (textgen_spec_lane(&g, &l, s, a.spec_dspark, a.spec_k, smp)) goto done;
        if (spec_feed(&l, ids, (int)n)) { cli_report("generate", "prompt"); spec_lane_free(&l); goto done; }
        bad = textgen_run_spec(&g, &l, n_gen, stdout, NULL, &res);
        cli_spec_stats(a.spec_dspark, l.k, l.n_steps, l.n_kept, l.n_drafted);
        spec_lane_free(&l);
    } else {
        if (dsv4_session_eval_last(s, ids, (int)n, logits)) { cli_report("generate", "prompt"); goto done; }
        bad = textgen_run(&g, s, smp, logits, n_gen, stdout, NULL, &res);
    }
    printf("\n");
    if (!bad && res.end == GEN_END_CONTEXT) cli_context_full("generate", g.max_pos);
    rc = bad ? 1 : 0;
done:
    textgen_result_free(&res);
    sampler_free(smp);
    dsv4_session_free(s);
    free(logits);
    free(ids);
    free(text);
    textgen_close(&g);
    textgen_args_free(&a);
    return rc;
}
