/* libFuzzer harness for the server's request parser (src/serve/request.c):
 * the first byte picks the API (chat completions, completions, messages),
 * the rest is the body, in a buffer of exactly its size. Besides not
 * crashing or leaking: an accepted request has a prompt, settings in range
 * and stops that are non-empty; a refused one has a 400/413 status and a
 * message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    api_kind kind = (api_kind)(data[0] % 3);
    char *body = malloc(size - 1 ? size - 1 : 1);
    if (!body) return 0;
    memcpy(body, data + 1, size - 1);
    api_limits lim = {16, 64, 256, 4};
    api_request r;
    api_error e;
    if (api_parse(kind, body, size - 1, &lim, &r, &e) == 0) {
        if (!r.prompt || r.max_tokens < 0 || r.max_tokens > lim.max_tokens || r.n_stops > lim.max_stops) abort();
        if (r.top_logprobs < 0 || r.top_logprobs > 20 || r.sp.temperature < 0 || r.sp.temperature > 2) abort();
        for (int i = 0; i < r.n_stops; i++)
            if (!r.stops[i] || !r.stops[i][0]) abort();
        api_request_free(&r);
    } else if ((e.status != 400 && e.status != 413 && e.status != 500) || !e.message[0]) {
        abort();
    }
    free(body);
    return 0;
}
