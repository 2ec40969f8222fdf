/* dsv4 chat: an interactive multi-turn conversation.
 *
 * The session keeps the model state between turns, and each turn renders
 * only the end of the transcript (chat_opts.n_context): from the previous
 * user message on, i.e. the previous user turn, the reply to it and the new
 * user turn. Everything before the previous user message renders the same
 * whatever follows it, so the transcript's tokens are the ones the session
 * already holds up to there, then the tail's. The longest prefix of that the
 * session holds is kept and only the tokens after it are evaluated, so the
 * session always holds what a from-scratch rendering of the transcript
 * tokenizes to (--check-session verifies it). Usually all held tokens are
 * kept; fewer when
 *  - a thinking-mode reply's reasoning is dropped once the next user turn
 *    arrives (the encoding renders earlier turns without it, and their
 *    generation prompt ends with </think> instead of <think>),
 *  - the reply's tokens are not the canonical tokenization of its text (the
 *    model may spell a word with other tokens, emit invalid UTF-8, or be cut
 *    by a stop string or Ctrl-C).
 * Then the state goes back to a snapshot taken before the previous
 * generation prompt's last token, just before the reply, and the rest is
 * evaluated again. Switching to or from /thinkmax changes the transcript's
 * first tokens (its preamble), and switching modes with --keep-reasoning
 * changes how every earlier turn renders, so these render and evaluate
 * everything again. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "cli/commands.h"
#include "cli/textgen.h"
#include "text/chat.h"

static volatile sig_atomic_t g_cancel;

static void on_sigint(int sig)
{
    (void)sig;
    g_cancel = 1;
}

/* Ctrl-C at the prompt: drop the line and start a fresh one, as shells do
 * (readline calls this outside the signal handler). */
static int prompt_interrupted(void)
{
    if (g_cancel) {
        g_cancel = 0;
        fputc('\n', rl_outstream ? rl_outstream : stdout);
        rl_replace_line("", 0);
        rl_on_new_line();
        rl_redisplay();
    }
    return 0;
}

typedef struct {
    chat_role role;
    char *content;
    char *reasoning;
} msg;

typedef struct {
    textgen g;
    dsv4_session *s;
    sampler *smp;
    float *logits;
    chat_mode mode;
    int keep_reasoning;
    int max_tokens;
    int check; /* --check-session */
    int check_failed;
    int out_failed;   /* stdout lost a reply: stop (main() reports it) */
    int turn;
    msg *msgs;
    int n_msgs, cap_msgs;
    int32_t *held; /* the tokens the session has consumed, in order */
    int n_held, cap_held;
    int prev_user;        /* index of the latest user message answered, -1: none */
    int prev_start;       /* where its rendering starts among the transcript's tokens */
    chat_mode prev_mode;  /* the mode it was rendered in */
    dsv4_snapshot *snap; /* state after held[0..snap_pos) */
    int snap_pos;
    int spec_k;          /* --spec: the lane feeds the session and drafts */
    int spec_dspark;
    spec_lane sl;
} chat;

static int add_msg(chat *c, chat_role role, const char *content, const char *reasoning)
{
    if (c->n_msgs == c->cap_msgs) {
        int cap = c->cap_msgs ? 2 * c->cap_msgs : 8;
        msg *m = realloc(c->msgs, (size_t)cap * sizeof *m);
        if (!m) return -1;
        c->msgs = m;
        c->cap_msgs = cap;
    }
    msg *m = &c->msgs[c->n_msgs];
    m->role = role;
    m->content = content ? strdup(content) : NULL;
    m->reasoning = reasoning ? strdup(reasoning) : NULL;
    if ((content && !m->content) || (reasoning && !m->reasoning)) {
        free(m->content);
        free(m->reasoning);
        return -1;
    }
    c->n_msgs++;
    return 0;
}

static void drop_msgs(chat *c, int keep)
{
    while (c->n_msgs > keep) {
        msg *m = &c->msgs[--c->n_msgs];
        free(m->content);
        free(m->reasoning);
    }
}

/* Renders and tokenizes the transcript from message `from` on. */
static int render_ids(chat *c, int from, int32_t **ids, size_t *n)
{
    chat_msg *v = calloc((size_t)c->n_msgs + 1, sizeof *v);
    if (!v) { fprintf(stderr, "dsv4 chat: out of memory\n"); return -1; }
    for (int i = 0; i < c->n_msgs; i++) {
        v[i].role = c->msgs[i].role;
        v[i].content = c->msgs[i].content;
        v[i].reasoning_content = c->msgs[i].reasoning;
    }
    chat_opts o = {.mode = c->mode, .keep_reasoning = c->keep_reasoning, .n_context = from};
    char *text;
    int rc = -1;
    if (chat_render(v, c->n_msgs, &o, &text)) cli_report("chat", NULL);
    else {
        rc = textgen_encode(&c->g, text, strlen(text), ids, n);
        free(text);
    }
    free(v);
    return rc;
}

/* The transcript's tokens with the new user message `u` last, and where
 * that message's rendering starts among them. */
static int transcript_ids(chat *c, int u, int32_t **ids, size_t *n, int *u_start)
{
    int32_t *tail, *last;
    size_t n_tail, n_last;
    int from = c->prev_user, keep = c->prev_start;
    /* A mode switch re-renders earlier turns when their reasoning is kept,
     * and /thinkmax's preamble comes first. */
    int switched = c->mode != c->prev_mode &&
                   (c->keep_reasoning || c->mode == CHAT_THINK_MAX || c->prev_mode == CHAT_THINK_MAX);
    if (from < 0 || c->n_held < keep || switched) from = keep = 0;
    if (render_ids(c, from, &tail, &n_tail)) return -1;
    if (render_ids(c, u, &last, &n_last)) { free(tail); return -1; }
    free(last);
    *ids = malloc(((size_t)keep + n_tail + 1) * sizeof **ids);
    if (!*ids) { free(tail); fprintf(stderr, "dsv4 chat: out of memory\n"); return -1; }
    if (keep) memcpy(*ids, c->held, (size_t)keep * sizeof **ids);
    memcpy(*ids + keep, tail, n_tail * sizeof *tail);
    free(tail);
    *n = (size_t)keep + n_tail;
    *u_start = (int)(*n - n_last);
    return 0;
}

static int hold(chat *c, const int32_t *ids, int n)
{
    if (n <= 0) return 0;
    if (c->n_held + n > c->cap_held) {
        int cap = 2 * (c->n_held + n);
        int32_t *h = realloc(c->held, (size_t)cap * sizeof *h);
        if (!h) { fprintf(stderr, "dsv4 chat: out of memory\n"); return -1; }
        c->held = h;
        c->cap_held = cap;
    }
    memcpy(c->held + c->n_held, ids, (size_t)n * sizeof *ids);
    c->n_held += n;
    return 0;
}

/* --spec: a lane on the (reset) session. */
static int spec_restart(chat *c)
{
    spec_lane_free(&c->sl);
    return textgen_spec_lane(&c->g, &c->sl, c->s, c->spec_dspark, c->spec_k, c->smp);
}

static void forget(chat *c)
{
    dsv4_session_reset(c->s);
    if (c->spec_k) spec_restart(c);
    c->n_held = 0;
    c->prev_user = -1;
    dsv4_snapshot_free(c->snap);
    c->snap = NULL;
}

/* --check-session: the held tokens must be what the whole transcript
 * renders to from scratch, and a fresh session fed them in one go must give
 * the logits the reused session gives. */
static void check_session(chat *c, int reused)
{
    float *ref = malloc((size_t)c->g.vocab * sizeof *ref);
    dsv4_session *fresh = NULL;
    int32_t *ids = NULL;
    size_t nn = 0;
    if (render_ids(c, 0, &ids, &nn)) { c->check_failed = 1; free(ref); return; }
    int n = (int)nn;
    if (!ref || dsv4_session_new(c->g.model, &fresh) || dsv4_session_eval_last(fresh, ids, n, ref)) {
        cli_report("chat", "session check");
        c->check_failed = 1;
    } else {
        float worst = 0;
        int same_held = c->n_held == n && !memcmp(c->held, ids, (size_t)n * sizeof *ids);
        for (int i = 0; i < c->g.vocab; i++) {
            float d = ref[i] > c->logits[i] ? ref[i] - c->logits[i] : c->logits[i] - ref[i];
            if (!(d <= worst)) worst = d; /* NaN counts as worst */
        }
        int ok = same_held && dsv4_session_pos(c->s) == n && worst < 1e-3f;
        fprintf(stderr, "session check: turn %d: %d tokens, %d reused, %d evaluated, max |logit diff| %.3g: %s\n",
                c->turn, n, reused, n - reused, worst, ok ? "ok" : "MISMATCH");
        if (!ok) c->check_failed = 1;
    }
    dsv4_session_free(fresh);
    free(ref);
    free(ids);
}

/* --spec: the lane feeds what the session lacks (it keeps the model's
 * streams for the MTP) and samples the reply's first token. Without a
 * snapshot to go back to (the MTP would lack the rows in between), a
 * transcript that no longer extends the held tokens is fed from scratch. */
static int sync_spec(chat *c, const int32_t *ids, int n)
{
    int same = 0;
    while (same < c->n_held && same < n && c->held[same] == ids[same]) same++;
    /* a reply cut inside a step (stop string, Ctrl-C) leaves the session
     * holding tokens the reply does not: then it does not extend either */
    if (same < c->n_held || same == n || dsv4_session_pos(c->s) != c->n_held) forget(c);
    if (!c->sl.s) { cli_report("chat", "--spec"); return -1; }
    if (spec_feed(&c->sl, ids + c->n_held, n - c->n_held) || hold(c, ids + c->n_held, n - c->n_held)) {
        cli_report("chat", NULL);
        forget(c);
        return -1;
    }
    return 0;
}

/* Brings the session to the transcript's tokens and leaves the logits of
 * the last one in c->logits. */
static int sync_session(chat *c, const int32_t *ids, int n)
{
    if (c->spec_k) return sync_spec(c, ids, n);
    int same = 0;
    while (same < c->n_held && same < n && c->held[same] == ids[same]) same++;
    if (same == n) same--; /* evaluate at least one token: its logits are needed */
    if (same < c->n_held) {
        if (c->snap && c->snap_pos <= same) {
            if (dsv4_session_restore(c->s, c->snap)) { cli_report("chat", "restore"); return -1; }
            c->n_held = c->snap_pos;
        } else {
            forget(c);
        }
    }
    int reused = c->n_held;
    if (n - 1 > c->n_held) {
        if (dsv4_session_eval(c->s, ids + c->n_held, n - 1 - c->n_held, NULL)) {
            cli_report("chat", NULL);
            forget(c);
            return -1;
        }
        if (hold(c, ids + c->n_held, n - 1 - c->n_held)) { forget(c); return -1; }
    }
    /* Where the next divergence starts: the generation prompt's last token
     * (<think> or </think>) and the reply after it. */
    dsv4_snapshot_free(c->snap);
    c->snap = NULL;
    if (dsv4_session_snapshot(c->s, &c->snap)) { cli_report("chat", "snapshot"); forget(c); return -1; }
    c->snap_pos = c->n_held;
    if (dsv4_session_eval_last(c->s, ids + n - 1, 1, c->logits) || hold(c, ids + n - 1, 1)) {
        cli_report("chat", NULL);
        forget(c);
        return -1;
    }
    if (c->check) check_session(c, reused);
    return 0;
}

/* One user turn: prefill, stream the reply, record it. */
static void turn(chat *c, const char *line)
{
    int32_t *ids = NULL;
    size_t n;
    if (textgen_encode(&c->g, line, strlen(line), &ids, &n)) return; /* invalid UTF-8 */
    free(ids);
    int before = c->n_msgs, u_start;
    if (add_msg(c, CHAT_ROLE_USER, line, NULL)) { fprintf(stderr, "dsv4 chat: out of memory\n"); return; }
    if (transcript_ids(c, before, &ids, &n, &u_start)) { drop_msgs(c, before); return; }
    if (n >= (size_t)c->g.max_pos) {
        fprintf(stderr, "dsv4 chat: the conversation is %zu tokens, the context holds %d "
                "(max_position_embeddings); /reset to start over\n", n, c->g.max_pos);
        drop_msgs(c, before);
        free(ids);
        return;
    }
    c->turn++;
    int bad = sync_session(c, ids, (int)n);
    free(ids);
    if (bad) { drop_msgs(c, before); return; }
    c->prev_user = before;
    c->prev_start = u_start;
    c->prev_mode = c->mode;
    textgen_result r;
    g_cancel = 0;
    /* a reply cut by the context ends with GEN_END_CONTEXT, which says so */
    bad = c->spec_k ? textgen_run_spec(&c->g, &c->sl, c->max_tokens, stdout, &g_cancel, &r)
                    : textgen_run(&c->g, c->s, c->smp, c->logits, c->max_tokens, stdout, &g_cancel, &r);
    if (r.out_failed) c->out_failed = 1;
    /* After an error the state may be poisoned: start the next turn afresh
     * (what was produced stays in the transcript). */
    if (bad || hold(c, r.ids, r.n_fed)) forget(c);
    fputc('\n', stdout);
    fflush(stdout);
    if (r.end == GEN_END_CANCEL) fprintf(stderr, "[stopped]\n");
    if (r.end == GEN_END_CONTEXT) fprintf(stderr, "dsv4 chat: the context is full; /reset to start over\n");
    /* The reply as the encoding renders it back: in thinking modes the text
     * up to the first </think> is the reasoning. */
    char *content = r.text ? r.text : "", *reasoning = NULL, *end;
    if (c->mode != CHAT_NOTHINK) {
        reasoning = content;
        end = strstr(content, CHAT_TOK_THINK_END);
        content = end ? end + strlen(CHAT_TOK_THINK_END) : "";
        if (end) *end = 0;
    }
    if (add_msg(c, CHAT_ROLE_ASSISTANT, content, reasoning)) {
        fprintf(stderr, "dsv4 chat: out of memory\n");
        drop_msgs(c, before);
    }
    textgen_result_free(&r);
}

static void help(void)
{
    printf("commands: /think (reasoning on), /nothink (off), /thinkmax (maximum reasoning effort),\n"
           "          /reset (forget the conversation), /help, /quit (or Ctrl-D).\n"
           "Ctrl-C stops a reply that is being written.\n");
}

/* Returns 1 to quit. On a terminal, says what changed. */
static int command(chat *c, const char *line, int n_fixed, int tty)
{
    const char *said = NULL;
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return 1;
    if (!strcmp(line, "/help")) help();
    else if (!strcmp(line, "/think")) { c->mode = CHAT_THINK; said = "reasoning on"; }
    else if (!strcmp(line, "/nothink")) { c->mode = CHAT_NOTHINK; said = "reasoning off"; }
    else if (!strcmp(line, "/thinkmax")) { c->mode = CHAT_THINK_MAX; said = "reasoning at maximum effort"; }
    else if (!strcmp(line, "/reset")) {
        drop_msgs(c, n_fixed);
        forget(c);
        said = "conversation forgotten";
    } else fprintf(stderr, "dsv4 chat: unknown command '%s' (/help lists them)\n", line);
    if (said && tty) printf("(%s)\n", said);
    return 0;
}

/* The next input line (NULL at the end of input); *bad is set when the
 * line is refused: a NUL byte in it (reported; the chat goes on), or more
 * text than the context can hold (reported; the chat ends: status 1). */
static char *next_line(chat *c, int tty, int lineno, int *bad)
{
    *bad = 0;
    if (tty) {
        char *l = readline("> ");
        if (l && *l) add_history(l);
        return l;
    }
    size_t max = textgen_max_text(&c->g), len;
    char *l = NULL;
    int r = cli_read_line(stdin, max, &l, &len);
    if (r < 0) {
        fprintf(stderr, "dsv4 chat: input line %d: longer than the %zu bytes the context can hold, or unreadable\n",
                lineno, max);
        *bad = 2;
        return NULL;
    }
    if (r == 0) return NULL;
    char what[32];
    snprintf(what, sizeof what, "input line %d", lineno);
    if (cli_no_nul("chat", what, l, len)) *bad = 1;
    return l;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dsv4 chat --model DIR [--tokenizer PATH] [--think | --think-max | --no-think]\n"
            "                 [--system TEXT] [--keep-reasoning] [-n N] [options]\n"
            "An interactive conversation; each input line is a user turn, the reply is printed\n"
            "as it is written. The model state is kept between turns. Reads lines from stdin\n"
            "when it is not a terminal (then only the replies are printed, one newline after each).\n"
            "  -n N                 at most N tokens per reply (default 1024)\n"
            "  --keep-reasoning     keep earlier turns' reasoning in the transcript\n"
            "  --check-session      after each prefill, compare with a fresh session fed the whole\n"
            "                       transcript (slow; a line per turn on stderr, status 1 if any differs)\n"
            "commands: /think /nothink /thinkmax /reset /help /quit\n");
    textgen_usage(f);
}

enum { OPT_NOTHINK = 1, OPT_THINK, OPT_THINKMAX, OPT_SYSTEM, OPT_KEEP, OPT_CHECK };

int cmd_chat(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"no-think", no_argument, 0, OPT_NOTHINK},
        {"think", no_argument, 0, OPT_THINK}, {"think-max", no_argument, 0, OPT_THINKMAX},
        {"system", required_argument, 0, OPT_SYSTEM}, {"keep-reasoning", no_argument, 0, OPT_KEEP},
        {"check-session", no_argument, 0, OPT_CHECK}, {"help", no_argument, 0, 'h'}, TEXTGEN_LONG_OPTIONS,
        {0, 0, 0, 0}};
    const char *model = NULL, *system = NULL;
    chat c = {.mode = CHAT_NOTHINK, .max_tokens = 1024, .prev_user = -1};
    textgen_args a;
    textgen_args_init(&a);
    int o, r;
    optind = 1;
    while ((o = getopt_long(argc, argv, "m:n:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case 'n':
            if (cli_int32("chat", "-n", optarg, 1, INT_MAX, &c.max_tokens)) { textgen_args_free(&a); return 2; }
            break;
        case OPT_NOTHINK: c.mode = CHAT_NOTHINK; break;
        case OPT_THINK: c.mode = CHAT_THINK; break;
        case OPT_THINKMAX: c.mode = CHAT_THINK_MAX; break;
        case OPT_SYSTEM: system = optarg; break;
        case OPT_KEEP: c.keep_reasoning = 1; break;
        case OPT_CHECK: c.check = 1; break;
        case 'h': usage(stdout); textgen_args_free(&a); return 0;
        default:
            r = textgen_option("chat", &a, o, optarg);
            if (r != 1) {
                if (r == 0) usage(stderr);
                textgen_args_free(&a);
                return 2;
            }
        }
    }
    if (!model || optind < argc) { usage(stderr); textgen_args_free(&a); return 2; }
    if (a.spec_k && (c.check || a.logprobs)) {
        fprintf(stderr, "dsv4 chat: --spec does not go with --check-session or --logprobs\n");
        textgen_args_free(&a);
        return 2;
    }
    c.spec_k = a.spec_k;
    c.spec_dspark = a.spec_dspark;
    int rc = 1, tty = isatty(0) && isatty(1);
    if (textgen_open(&c.g, "chat", model, &a)) { textgen_args_free(&a); return 1; }
    if (system) { /* checked now rather than at the first turn */
        int32_t *ids;
        size_t n;
        if (textgen_encode(&c.g, system, strlen(system), &ids, &n)) goto done;
        free(ids);
        if (add_msg(&c, CHAT_ROLE_SYSTEM, system, NULL)) goto done;
    }
    if (textgen_load_model(&c.g, model, &a)) goto done;
    c.logits = malloc((size_t)c.g.vocab * sizeof *c.logits);
    if (!c.logits || dsv4_session_new(c.g.model, &c.s) || sampler_new(&c.g.sp, c.g.vocab, &c.smp)) {
        cli_report("chat", NULL);
        goto done;
    }
    if (c.spec_k && spec_restart(&c)) goto done;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART; /* a Ctrl-C while waiting for input is no EOF */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (tty) {
        rl_signal_event_hook = prompt_interrupted;
        printf("dsv4 chat: %s. /help for commands, Ctrl-D to leave.\n", model);
    }
    int n_fixed = c.n_msgs, bad = 0;
    for (int lineno = 1;; lineno++) {
        char *line = next_line(&c, tty, lineno, &bad);
        if (!line) break;
        int quit = 0;
        if (!bad && line[0] == '/') quit = command(&c, line, n_fixed, tty);
        else if (!bad && line[0]) turn(&c, line);
        free(line);
        if (quit || c.out_failed) break;
    }
    rc = c.check_failed || bad == 2 ? 1 : 0;
done:
    drop_msgs(&c, 0);
    free(c.msgs);
    free(c.held);
    dsv4_snapshot_free(c.snap);
    spec_lane_free(&c.sl);
    sampler_free(c.smp);
    dsv4_session_free(c.s);
    free(c.logits);
    textgen_close(&c.g);
    textgen_args_free(&a);
    return rc;
}
