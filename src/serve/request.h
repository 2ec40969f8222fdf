/* Request bodies of the three generation endpoints — OpenAI chat
 * completions, OpenAI completions, Anthropic messages — read into one
 * api_request: the rendered prompt text and the generation settings. No
 * model or tokenizer is involved, so this is what the fuzzer drives.
 *
 * Bodies are parsed with chat_json_parse (numbers kept as Python prints
 * them, so tool schemas and arguments render into the prompt byte for byte
 * as DeepSeek's reference encoding would). Every field is checked for type
 * and range; the first problem is reported as an HTTP status (400, 413) and
 * a one-line message naming the field. */
#ifndef DSV4_SERVE_REQUEST_H
#define DSV4_SERVE_REQUEST_H
#include <stddef.h>

#include "text/sampling.h"

typedef enum { API_CHAT, API_COMPLETIONS, API_MESSAGES } api_kind;

/* Caps on what one request may ask for (413 beyond the size caps). */
typedef struct {
    int max_depth;      /* JSON nesting */
    int max_messages;
    int max_tokens;     /* largest max_tokens accepted; also the default for chat */
    int max_stops;
} api_limits;

typedef struct {
    api_kind kind;
    char *prompt;         /* rendered prompt text (chat: with BOS; completions: without) */
    int thinking;         /* the prompt ends in <think>: the reply starts with reasoning */
    int add_bos;          /* completions: the tokenizer's BOS goes first */
    sampling_params sp;
    int seed_given;
    int max_tokens;
    char **stops;
    int n_stops;
    int logprobs;         /* report per-token logprobs */
    int top_logprobs;     /* alternatives per token */
    int stream;
    int include_usage;    /* stream_options.include_usage */
    int ignore_eos;       /* vLLM's extension: do not stop at the end-of-sentence token */
    int tools_given;      /* tools were offered (and tool_choice is not none) */
    /* tool_choice required/any/named: the reply begins with one of these
     * texts (the opening of a call of one of the tools, up to its first
     * parameter), after the reasoning in thinking mode */
    char **force;
    int n_force;
    char model[128];      /* as the client named it (echoed back) */
} api_request;

typedef struct {
    int status;           /* HTTP status: 400, 413 */
    char message[256];
    char param[64];       /* offending field, "" if none */
} api_error;

/* Returns 0 and fills *r (free with api_request_free), or -1 and fills *e. */
int api_parse(api_kind kind, const char *body, size_t len, const api_limits *lim, api_request *r,
              api_error *e);
void api_request_free(api_request *r);

#endif
