/* libFuzzer harness for the DSML parser and the Python-style JSON reader.
 *   clang -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
 *     -Iinclude -Isrc tests/fuzz/fuzz_dsml.c src/text/dsml.c src/text/chat_json.c \
 *     src/base/error.c -lcjson -o build/fuzz_dsml && build/fuzz_dsml -max_total_time=60
 * The first byte picks thinking mode; the rest is the completion text, in a
 * buffer of exactly its size so any overread is caught. Besides not crashing,
 * it checks the parser's promises: complete calls carry JSON object
 * arguments, and rendering parsed calls then parsing again gives them back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/dsml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int thinking = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    dsml_message m;
    if (dsml_parse_message(text, len, thinking, &m) != DSV4_OK) return 0;
    if (!m.content || !m.reasoning || !m.error) abort();
    if (m.status == DSML_MALFORMED && m.error_at > len) abort();

    for (int i = 0; i < m.n_calls; i++) {
        cJSON *j = NULL;
        if (chat_json_parse(m.calls[i].arguments, strlen(m.calls[i].arguments), "fuzz", &j))
            abort(); /* parsed arguments are always JSON */
        if (!cJSON_IsObject(j)) abort();
        cJSON_Delete(j);
    }

    /* An open invoke (streaming) has a name and arguments that start as a
     * JSON object; it exists only while the text is incomplete. */
    if (!!m.open_name != !!m.open_arguments || (m.open_arguments && m.open_arguments[0] != '{') ||
        (m.open_name && m.status != DSML_INCOMPLETE))
        abort();

    /* Render what was parsed and parse it again: the same calls come back
     * (arguments as Python would reprint them), unless a name holds a quote
     * or newline or the markup token (then the format is ambiguous). */
    if (m.n_calls > 0) {
        dsml_call *calls = calloc((size_t)m.n_calls, sizeof *calls);
        for (int i = 0; i < m.n_calls; i++) {
            calls[i].name = m.calls[i].name;
            calls[i].arguments = m.calls[i].arguments;
        }
        tbuf b = {0};
        tbuf_puts(&b, "\n\n");
        if (dsml_render_calls(calls, m.n_calls, &b) == DSV4_OK && !b.oom) {
            tbuf_puts(&b, DSML_EOS);
            dsml_message r;
            if (dsml_parse_message(b.p, b.len, 0, &r) == DSV4_OK) {
                int same = r.status == DSML_COMPLETE && r.n_calls == m.n_calls;
                for (int i = 0; same && i < r.n_calls; i++) {
                    cJSON *j = NULL;
                    tbuf norm = {0};
                    if (chat_json_parse(m.calls[i].arguments, strlen(m.calls[i].arguments), "fuzz", &j))
                        abort();
                    chat_json_dump(j, &norm);
                    cJSON_Delete(j);
                    same = !strcmp(r.calls[i].name, m.calls[i].name) && norm.p &&
                           !strcmp(r.calls[i].arguments, norm.p);
                    tbuf_free(&norm);
                }
                int ambiguous = 0;
                for (int i = 0; i < m.n_calls; i++)
                    if (strstr(m.calls[i].name, DSML_TOKEN) || strstr(m.calls[i].arguments, DSML_TOKEN) ||
                        strchr(m.calls[i].name, '"') || strchr(m.calls[i].name, '\n'))
                        ambiguous = 1;
                /* Numbers past the double range reprint as Infinity, as
                 * Python does, which JSON (and so our reader) refuses. */
                if (b.p && strstr(b.p, "Infinity")) ambiguous = 1;
                if (!same && !ambiguous) abort();
                dsml_message_free(&r);
            }
        }
        tbuf_free(&b);
        free(calls);
    }
    dsml_message_free(&m);
    dsv4_clear_error();
    return 0;
}
