/* dsv4 serve: the OpenAI- and Anthropic-compatible HTTP server (src/serve). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "serve/server.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dsv4 serve (--model DIR | --synthetic flash|pro [--layers N] [--experts N] [--weights fp8-fp4|bf16] --tokenizer PATH)\n"
            "                  [options]\n"
            "  --synthetic P        random weights with the real dimensions of flash or pro (benchmarks)\n"
            "  --host ADDR          address to listen on (default 127.0.0.1: this machine only)\n"
            "  --port N             TCP port (default 8000; 0: any free port, printed)\n"
            "  --api-key KEY | --api-key-file F   require this key (Bearer or x-api-key)\n"
            "  --model-name NAME    the id /v1/models reports (default: the folder's name)\n"
            "  --max-sessions N     requests decoded together, 1..%d (default 16)\n"
            "  --max-queue N        requests waiting for a lane before 503 (default 256)\n"
            "  --ctx N              tokens a request may hold, prompt + output (default: the model's)\n"
            "  --cache-mb MB        memory for resident sessions and turn snapshots (default 1024)\n"
            "  --kv-dir DIR         store session states here; reloaded after a restart\n"
            "  --prefill-chunk N    prompt tokens per prefill step between decode steps (default 256)\n"
            "  --spec mtp[:K]       speculative decoding: the checkpoint's MTP head drafts K tokens (default 1)\n"
            "                       per step and one verify step keeps those the model agrees with; greedy\n"
            "                       output is unchanged, sampled output has the same distribution; at most\n"
            "                       %d sessions (each is two lanes of a step)\n"
            "  --spec dspark[:K]    the same with the checkpoint's DSpark drafter (K default: its block size)\n"
            "  --max-body BYTES     request body limit (default 4194304)\n"
            "  --max-depth N --max-messages N --max-prompt-tokens N --max-tokens N --max-stops N\n"
            "                       request limits (defaults 64, 1024, the context, 4096, 16)\n"
            "  --timeout S          close a connection idle this long (default 60)\n"
            "  --keepalive-ms MS    a stream quiet this long (a long prefill) gets a keep-alive (default 1000)\n"
            "  --max-connections N  (default 512)\n"
            "  --tokenizer PATH --threads N --device cpu|cuda|auto\n"
            CLI_CACHE_USAGE,
            DSV4_MAX_LANES, DSV4_MAX_LANES / 2);
}

/* --NAME through the CLI's one number parser */
static int num(const char *name, const char *s, long long lo, long long hi, long long *v)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name);
    return cli_int("serve", opt, s, lo, hi, v);
}

/* The key file's first line. */
static char *read_key(const char *path)
{
    char *t = cli_read_file("serve", path, 1 << 16, NULL); /* a key, not a document */
    if (!t) return NULL;
    t[strcspn(t, "\r\n")] = 0;
    if (!t[0]) {
        fprintf(stderr, "dsv4 serve: --api-key-file %s: empty\n", path);
        free(t);
        return NULL;
    }
    return t;
}

int cmd_serve(int argc, char **argv)
{
    enum { O_HOST = 1, O_PORT, O_KEY, O_KEYFILE, O_NAME, O_SESS, O_QUEUE, O_CTX, O_CACHE, O_KV, O_CHUNK, O_BODY,
           O_DEPTH, O_MSGS, O_PTOK, O_MAXTOK, O_STOPS, O_TIMEOUT, O_KEEPALIVE, O_CONNS, O_TOKENIZER, O_THREADS, O_DEVICE, O_SYNTH, O_LAYERS, O_EXPERTS, O_WEIGHTS, O_SPEC, O_CACHE_MODE, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"host", required_argument, 0, O_HOST},
        {"port", required_argument, 0, O_PORT}, {"api-key", required_argument, 0, O_KEY},
        {"api-key-file", required_argument, 0, O_KEYFILE}, {"model-name", required_argument, 0, O_NAME},
        {"max-sessions", required_argument, 0, O_SESS}, {"max-queue", required_argument, 0, O_QUEUE},
        {"ctx", required_argument, 0, O_CTX}, {"cache-mb", required_argument, 0, O_CACHE},
        {"kv-dir", required_argument, 0, O_KV}, {"prefill-chunk", required_argument, 0, O_CHUNK},
        {"max-body", required_argument, 0, O_BODY}, {"max-depth", required_argument, 0, O_DEPTH},
        {"max-messages", required_argument, 0, O_MSGS}, {"max-prompt-tokens", required_argument, 0, O_PTOK},
        {"max-tokens", required_argument, 0, O_MAXTOK}, {"max-stops", required_argument, 0, O_STOPS},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"keepalive-ms", required_argument, 0, O_KEEPALIVE},
        {"max-connections", required_argument, 0, O_CONNS},
        {"tokenizer", required_argument, 0, O_TOKENIZER}, {"threads", required_argument, 0, O_THREADS},
        {"device", required_argument, 0, O_DEVICE}, {"synthetic", required_argument, 0, O_SYNTH},
        {"layers", required_argument, 0, O_LAYERS}, {"experts", required_argument, 0, O_EXPERTS},
        {"weights", required_argument, 0, O_WEIGHTS}, {"spec", required_argument, 0, O_SPEC},
        {"cache", required_argument, 0, O_CACHE_MODE},
        {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    serve_options o = {0};
    o.host = "127.0.0.1";
    o.port = 8000;
    o.max_sessions = 16;
    o.max_queue = 256;
    o.cache_bytes = 1024ull << 20;
    o.prefill_chunk = 256;
    o.max_body = 4u << 20;
    o.max_prompt_tokens = INT_MAX;
    o.timeout_s = 60;
    o.keepalive_ms = 1000;
    o.max_connections = 512;
    o.lim = (api_limits){64, 1024, 4096, 16};
    char *key_file_text = NULL;
    long long v;
    int c, bad = 0;
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "m:", opts, NULL)) != -1) {
        switch (c) {
        case 'm': o.model_dir = optarg; break;
        case O_HOST: o.host = optarg; break;
        case O_PORT: bad = num("port", optarg, 0, 65535, &v); o.port = (int)v; break;
        case O_KEY: o.api_key = optarg; break;
        case O_KEYFILE:
            free(key_file_text);
            bad = !(key_file_text = read_key(optarg));
            o.api_key = key_file_text;
            break;
        case O_NAME: o.model_name = optarg; break;
        case O_SESS: bad = num("max-sessions", optarg, 1, DSV4_MAX_LANES, &v); o.max_sessions = (int)v; break;
        case O_QUEUE: bad = num("max-queue", optarg, 1, 1 << 20, &v); o.max_queue = (int)v; break;
        case O_CTX: bad = num("ctx", optarg, 1, INT_MAX, &v); o.ctx = (int)v; break;
        case O_CACHE: bad = num("cache-mb", optarg, 0, 1ll << 30, &v); o.cache_bytes = (uint64_t)v << 20; break;
        case O_KV: o.kv_dir = optarg; break;
        case O_CHUNK: bad = num("prefill-chunk", optarg, 1, 1 << 20, &v); o.prefill_chunk = (int)v; break;
        case O_BODY: bad = num("max-body", optarg, 1, 1ll << 32, &v); o.max_body = (size_t)v; break;
        case O_DEPTH: bad = num("max-depth", optarg, 2, 1000, &v); o.lim.max_depth = (int)v; break;
        case O_MSGS: bad = num("max-messages", optarg, 1, 1 << 20, &v); o.lim.max_messages = (int)v; break;
        case O_PTOK: bad = num("max-prompt-tokens", optarg, 1, INT_MAX, &v); o.max_prompt_tokens = (int)v; break;
        case O_MAXTOK: bad = num("max-tokens", optarg, 1, 1 << 30, &v); o.lim.max_tokens = (int)v; break;
        case O_STOPS: bad = num("max-stops", optarg, 0, 64, &v); o.lim.max_stops = (int)v; break;
        case O_TIMEOUT: bad = num("timeout", optarg, 1, 86400, &v); o.timeout_s = (int)v; break;
        case O_KEEPALIVE: bad = num("keepalive-ms", optarg, 10, 600000, &v); o.keepalive_ms = (int)v; break;
        case O_CONNS: bad = num("max-connections", optarg, 1, 1 << 16, &v); o.max_connections = (int)v; break;
        case O_TOKENIZER: o.tokenizer = optarg; break;
        case O_THREADS: bad = num("threads", optarg, 0, 4096, &v); o.threads = (int)v; break;
        case O_DEVICE: o.device = optarg; break;
        case O_SYNTH: o.synthetic = optarg; break;
        case O_LAYERS: bad = num("layers", optarg, 1, 4096, &v); o.synth_layers = (int)v; break;
        case O_EXPERTS: bad = num("experts", optarg, 1, 1 << 16, &v); o.synth_experts = (int)v; break;
        case O_WEIGHTS: o.synth_weights = optarg; break;
        case O_SPEC: bad = cli_parse_spec("serve", optarg, &o.spec_k, &o.spec_dspark) != 0; break;
        case O_CACHE_MODE: bad = cli_cache_arg("serve", optarg, &o.cache) != 0; break;
        case O_HELP: usage(stdout); free(key_file_text); return 0;
        default: bad = 1;
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "dsv4 serve: unexpected argument '%s'\n", argv[optind]);
        bad = 1;
    }
    if (!bad && !o.model_dir == !o.synthetic) {
        fprintf(stderr, "dsv4 serve: give exactly one of --model or --synthetic\n");
        bad = 1;
    }
    if (!bad && o.spec_k && o.max_sessions > DSV4_MAX_LANES / 2) {
        fprintf(stderr, "dsv4 serve: --max-sessions %d: at most %d with --spec (each session is two lanes of a step)\n",
                o.max_sessions, DSV4_MAX_LANES / 2);
        bad = 1;
    }
    if (bad) { /* the line above says what is wrong; --help lists the options */
        free(key_file_text);
        return 2;
    }
    int rc = serve_main(&o);
    free(key_file_text);
    return rc;
}
