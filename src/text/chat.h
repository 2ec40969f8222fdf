/* Conversation -> prompt text, exactly as DeepSeek-V4's reference
 * encoding_dsv4.py (encode_messages) renders it. The steps, in its order:
 *
 *  1. Tool results (role tool) and user messages are merged: each run of
 *     consecutive user/tool messages becomes one user turn whose parts are
 *     joined by a blank line, tool results as <tool_result>...</tool_result>,
 *     ordered like the calls of the latest assistant turn that made calls.
 *  2. Reasoning: in thinking modes, assistant turns after the last user turn
 *     keep "reasoning</think>"; earlier ones lose reasoning and the
 *     </think> marker, and developer turns before the last user turn are
 *     dropped. If any message carries tools, or keep_reasoning is set,
 *     nothing is dropped and every assistant turn keeps its reasoning.
 *  3. Each turn: system text (+ "\n\n## Tools..." + "\n\n## Response
 *     Format..."), <｜User｜>text, <｜User｜> for developer too,
 *     assistant: [reasoning</think>]content[\n\n<DSML tool calls>]<｜end▁of▁sentence｜>.
 *     A user/developer turn followed by an assistant turn or by nothing is
 *     closed by <｜Assistant｜> and then <think> (thinking) or </think>
 *     (non-thinking, or an earlier turn when reasoning is dropped). So the
 *     generation prompt is always there when the conversation ends with a
 *     user turn: the reference has no add_generation_prompt switch.
 *  4. CHAT_THINK_MAX puts the reference's "Reasoning Effort: Absolute
 *     maximum..." paragraph before the first message. (This is the encoding
 *     released with DeepSeek-V4-Flash/Pro. The later "0731" checkpoint
 *     refresh is reported to move that text to a "high" tier and to add a
 *     stronger "max" text; that variant is not implemented here.)
 *
 * Strings are UTF-8 and copied as they are; tool schemas, response formats
 * and non-string tool arguments are reprinted as Python's json.dumps would
 * (see chat_json.h). The reference's internal "task" classification tokens
 * are not supported, and a NULL latest_reminder content renders as "" where
 * Python would print "None". */
#ifndef DSV4_TEXT_CHAT_H
#define DSV4_TEXT_CHAT_H
#include <stdbool.h>

#include "dsv4.h"
#include "text/dsml.h"

#define CHAT_TOK_BOS "<｜begin▁of▁sentence｜>"
#define CHAT_TOK_EOS "<｜end▁of▁sentence｜>"
#define CHAT_TOK_USER "<｜User｜>"
#define CHAT_TOK_ASSISTANT "<｜Assistant｜>"
#define CHAT_TOK_THINK_START "<think>"
#define CHAT_TOK_THINK_END "</think>"

typedef enum {
    CHAT_ROLE_SYSTEM,
    CHAT_ROLE_DEVELOPER, /* rendered as a user turn; content required */
    CHAT_ROLE_USER,
    CHAT_ROLE_ASSISTANT,
    CHAT_ROLE_TOOL,      /* a tool result: content + tool_call_id */
    CHAT_ROLE_LATEST_REMINDER,
} chat_role;

typedef enum {
    CHAT_NOTHINK,   /* reference thinking_mode="chat" */
    CHAT_THINK,     /* thinking_mode="thinking" */
    CHAT_THINK_MAX, /* thinking_mode="thinking", reasoning_effort="max" */
} chat_mode;

typedef dsml_call chat_tool_call;

/* One message. NULL strings are absent (rendered as ""). */
typedef struct {
    chat_role role;
    const char *content;
    const char *reasoning_content;    /* assistant */
    const chat_tool_call *tool_calls; /* assistant */
    int n_tool_calls;
    const char *tool_call_id;         /* tool: id of the call it answers */
    const char *tools_json;           /* system/developer: OpenAI "tools" array */
    const char *response_format_json; /* system/developer */
    bool wo_eos; /* assistant: leave the turn open (prefill a partial reply) */
} chat_msg;

typedef struct {
    chat_mode mode;
    bool keep_reasoning; /* reference drop_thinking=False */
    bool no_bos;         /* reference add_default_bos_token=False */
    /* The first n_context messages were already fed to the model: render
     * only the rest (reference `context`; no BOS then). */
    int n_context;
    /* OpenAI "tools" array for the conversation: attached to the first
     * message if it is a system message without tools, else to a new
     * empty system message put first. NULL: none. */
    const char *tools_json;
} chat_opts;

/* Renders msgs[0..n) to a malloc'd NUL-terminated prompt in *out. opt may be
 * NULL (non-thinking, BOS, drop reasoning). Bad input (unknown role, empty
 * developer content, tools that are not an array of {"function": {...}},
 * arguments that are JSON but not an object, invalid JSON schema text)
 * fails with DSV4_ERR_ARG/DSV4_ERR_FORMAT and a message naming the message
 * index. */
dsv4_status chat_render(const chat_msg *msgs, int n, const chat_opts *opt, char **out);

#endif
