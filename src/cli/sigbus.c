/* Checkpoints are mmapped and, on the CPU, read in place: a file truncated
 * or rewritten while dsv4 runs makes the next read of a vanished page raise
 * SIGBUS. The policy (README): the files must not change while a command
 * runs; if they do, dsv4 ends with one line naming the file and status 1
 * instead of dying of a bus error. The file is the mapping that holds the
 * faulting address, read from /proc/self/maps with async-signal-safe calls
 * only. (The CUDA backend copies the weights at load; only the load reads
 * the mapping there.) */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"

static void say(const char *s) { ssize_t r = write(2, s, strlen(s)); (void)r; }

static uintptr_t hex(const char **p)
{
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return v;
        v = v * 16 + (uintptr_t)d;
    }
}

/* Copies the path of the mapping holding addr into out (empty if none). */
static void mapping_of(uintptr_t addr, char *out, size_t cap)
{
    static char buf[8192];
    out[0] = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            *nl = 0;
            const char *p = line;
            uintptr_t lo = hex(&p);
            p++;
            uintptr_t hi = hex(&p);
            if (addr >= lo && addr < hi) {
                const char *path = strchr(line, '/');
                if (path) {
                    size_t n = strlen(path) < cap - 1 ? strlen(path) : cap - 1;
                    memcpy(out, path, n);
                    out[n] = 0;
                }
                close(fd);
                return;
            }
            line = nl + 1;
        }
        have -= (size_t)(line - buf); /* keep the unfinished line */
        memmove(buf, line, have);
        if (have == sizeof buf - 1) have = 0; /* a line this long is no mapping of ours */
    }
    close(fd);
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    static char path[4096];
    mapping_of((uintptr_t)si->si_addr, path, sizeof path);
    if (path[0]) {
        say("dsv4: ");
        say(path);
        say(": the file was truncated or changed while dsv4 was reading it (a bus error); it must not change "
            "while a command runs\n");
    } else {
        say("dsv4: bus error: a mapped file was truncated or changed while in use\n");
    }
    _exit(1);
}

void cli_catch_sigbus(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}
