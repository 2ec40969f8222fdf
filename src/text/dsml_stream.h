/* A generated assistant reply read as it grows: each update reparses the
 * text produced so far with dsml_parse_message and says what is new since
 * the previous update — reasoning text, reply text, tool calls that became
 * complete. The parser holds back every tail that may still grow into a
 * marker (</think>, the tool-call block, the end-of-sentence token) and
 * reports only complete invokes, so no delta ever carries part of a marker.
 *
 * Tool calls written before </think> in thinking mode break the format; so
 * that they are not lost inside the reasoning, the text from the tool-call
 * block on is read as the reply (its calls become calls). On the final
 * update of a reply that breaks the format after its last good part (text
 * after the calls or after the end-of-sentence token), that trailing text is
 * passed on as reply text rather than dropped. */
#ifndef DSV4_TEXT_DSML_STREAM_H
#define DSV4_TEXT_DSML_STREAM_H
#include "text/dsml.h"

typedef struct {
    const char *reasoning; /* new reasoning bytes */
    size_t n_reasoning;
    const char *content;   /* new reply bytes */
    size_t n_content;
    const dsml_parsed_call *calls; /* tool calls complete since the last update */
    int n_calls;
    int first_call;        /* index of calls[0] among all of the reply's calls */
} dsml_delta;

typedef struct {
    int thinking;          /* the prompt ended in <think> */
    size_t n_reasoning, n_content; /* bytes already handed out */
    int n_calls;
    dsml_message m;        /* the latest parse: the whole reply so far */
} dsml_stream;

void dsml_stream_init(dsml_stream *s, int thinking);
/* text[0..len) is the whole reply so far (it only ever grows). final: no
 * more text will come. The delta's pointers stay valid until the next
 * update or dsml_stream_free. Fails only for out of memory. */
dsv4_status dsml_stream_update(dsml_stream *s, const char *text, size_t len, int final, dsml_delta *d);
void dsml_stream_free(dsml_stream *s);

#endif
