/* DSML: the markup DeepSeek-V4 writes tool calls in. An assistant turn that
 * calls tools ends with
 *
 *   \n\n<｜DSML｜tool_calls>\n
 *   <｜DSML｜invoke name="NAME">\n
 *   <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>\n
 *   ...</｜DSML｜invoke>\n ... </｜DSML｜tool_calls>
 *
 * where string="true" values are raw text and string="false" values are JSON.
 * Rendering and parsing follow DeepSeek's reference encoding_dsv4.py
 * (encode_arguments_to_dsml / parse_tool_calls), so arguments come back as
 * the JSON object text Python's json.dumps would print. */
#ifndef DSV4_TEXT_DSML_H
#define DSV4_TEXT_DSML_H
#include <stddef.h>

#include "dsv4.h"
#include "text/chat_json.h"

#define DSML_TOKEN "｜DSML｜"
#define DSML_EOS "<｜end▁of▁sentence｜>"
#define DSML_THINK_END "</think>"
/* What separates a reply's text from its tool-call block. */
#define DSML_CALLS_START "\n\n<" DSML_TOKEN "tool_calls"

/* A tool call to render. arguments is JSON object text (as in OpenAI's
 * function.arguments); text that is not JSON is passed as one string
 * parameter named "arguments", as the reference does. id is used only to
 * order tool results (chat.c). */
typedef struct {
    const char *id;
    const char *name;
    const char *arguments;
} dsml_call;

/* Appends "<｜DSML｜tool_calls>\n...\n</｜DSML｜tool_calls>" (without the
 * leading blank line). Fails with DSV4_ERR_ARG when arguments is JSON but not
 * an object, or a name is NULL. */
dsv4_status dsml_render_calls(const dsml_call *calls, int n, tbuf *out);

/* How a reply's first tool call, of the tool name, begins after the reply
 * text, as the chat encoder writes it: DSML_CALLS_START
 * ">\n<｜DSML｜invoke name=\"NAME\">\n" (its parameters follow). What a
 * reply is made to begin with when the request demands a tool call. */
void dsml_render_opening(const char *name, tbuf *out);

typedef enum {
    DSML_COMPLETE = 0, /* everything seen is well formed and closed */
    DSML_INCOMPLETE,   /* the text stops inside a construct (streaming) */
    DSML_MALFORMED,    /* the text breaks the format at error_at */
} dsml_status;

typedef struct {
    char *name;
    char *arguments; /* JSON object text */
} dsml_parsed_call;

typedef struct {
    char *reasoning; /* text before </think> in thinking mode, else "" */
    char *content;   /* reply text, without a trailing partial marker */
    dsml_parsed_call *calls; /* complete invokes only, in order */
    int n_calls;
    /* INCOMPLETE inside an invoke whose header is complete (streaming):
     * its name and the start of its arguments, "{" and the complete
     * parameters so far (every later parse of the growing text extends it,
     * and the finished call's arguments are it plus the rest). NULL when
     * the text does not stop inside an invoke. */
    char *open_name;
    char *open_arguments;
    dsml_status status;
    size_t error_at;   /* byte offset of the fault when MALFORMED */
    const char *error; /* static one-line description, "" when none */
    int saw_eos;       /* the end-of-sentence token was in the text */
} dsml_message;

/* Parses one assistant completion: the text the model generated after the
 * prompt, with or without the final end-of-sentence token. thinking says
 * whether the prompt ended in <think> (the reply then starts with reasoning).
 * Partial or malformed text is not an error: out->status says which, and
 * out holds what was complete before it. Returns non-OK only for bad
 * arguments or out of memory. Free with dsml_message_free. */
dsv4_status dsml_parse_message(const char *text, size_t len, int thinking,
                               dsml_message *out);
void dsml_message_free(dsml_message *m);

#endif
