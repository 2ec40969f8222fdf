/* A generated assistant reply read as it grows: each update reparses the
 * text produced so far with dsml_parse_message and says what is new since
 * the previous update — reasoning text, reply text, and for tool calls
 * their names as soon as an invoke's header is complete and their
 * arguments as they grow, one complete parameter at a time. The parser
 * holds back every tail that may still grow into a marker (</think>, the
 * tool-call block, the end-of-sentence token), so no delta ever carries
 * part of a marker.
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

/* News about one tool call. */
typedef struct {
    int index;             /* the call's place among the reply's calls */
    const char *name;      /* non-NULL: the call starts here, with this name */
    const char *arguments; /* bytes to append to its arguments */
    size_t n_arguments;
    int complete;          /* its arguments are complete after these bytes */
} dsml_call_delta;

typedef struct {
    const char *reasoning; /* new reasoning bytes */
    size_t n_reasoning;
    const char *content;   /* new reply bytes */
    size_t n_content;
    const dsml_call_delta *calls; /* in call order */
    int n_calls;
} dsml_delta;

typedef struct {
    int thinking;          /* the prompt ended in <think> */
    size_t n_reasoning, n_content; /* bytes already handed out */
    int n_done;            /* calls handed out completely */
    int open_started;      /* call n_done was announced (its name sent) */
    size_t open_sent;      /* bytes of its arguments sent */
    dsml_message m;        /* the latest parse: the whole reply so far */
    dsml_call_delta *cd;   /* the deltas of the latest update */
    int cap_cd;
} dsml_stream;

void dsml_stream_init(dsml_stream *s, int thinking);
/* text[0..len) is the whole reply so far (it only ever grows). final: no
 * more text will come. The delta's pointers stay valid until the next
 * update or dsml_stream_free. Fails only for out of memory. */
dsv4_status dsml_stream_update(dsml_stream *s, const char *text, size_t len, int final, dsml_delta *d);
void dsml_stream_free(dsml_stream *s);

#endif
