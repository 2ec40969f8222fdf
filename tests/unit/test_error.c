/* The error message (base/error.c): always one line, and a long one keeps
 * both its start (what) and its end (why). Issue 8 #15. */
#include "base/error.h"
#include "test.h"

static void test_long_message_keeps_the_cause(void)
{
    size_t n = 20000;
    char *path = malloc(n + 1);
    for (size_t i = 0; i < n; i++) path[i] = (char)('a' + i % 26);
    path[n] = 0;
    CHECK(dsv4_fail(DSV4_ERR_IO, "%s/config.json: cannot open: %s", path, "No such file or directory") == DSV4_ERR_IO);
    const char *m = dsv4_last_error();
    size_t len = strlen(m), tail = strlen("/config.json: cannot open: No such file or directory");
    CHECK(len < 8192 && len > 4000);
    CHECK(!strncmp(m, path, 1000));                                     /* the start: which file */
    CHECK(!strcmp(m + len - tail, "/config.json: cannot open: No such file or directory")); /* the cause */
    CHECK(strstr(m, " ... ") != NULL);
    /* a path of PATH_MAX bytes and its cause fit whole */
    path[4095] = 0;
    dsv4_fail(DSV4_ERR_IO, "%s: cannot open", path);
    CHECK(strlen(dsv4_last_error()) == 4095 + strlen(": cannot open") && !strstr(dsv4_last_error(), " ... "));
    /* a prefix added to a long message keeps the cause too */
    dsv4_fail(DSV4_ERR_IO, "%s: short read", path);
    dsv4_fail_prefix(DSV4_ERR_IO, "session poisoned: ");
    m = dsv4_last_error();
    CHECK(!strncmp(m, "session poisoned: ", 18) && !strcmp(m + strlen(m) - 12, ": short read"));
    free(path);
}

static void test_one_line(void)
{
    dsv4_fail(DSV4_ERR_FORMAT, "tensor '%s': unknown dtype '%s'", "evil\nname\r\t\x01", "Q9");
    CHECKF(!strcmp(dsv4_last_error(), "tensor 'evil\\nname\\r\\t\\x01': unknown dtype 'Q9'"), "%s", dsv4_last_error());
    char out[16];
    error_escape("a\nb", out, sizeof out);
    CHECK(!strcmp(out, "a\\nb"));
    error_escape("0123456789abcdefghij", out, sizeof out); /* cut, never overrun */
    CHECK(strlen(out) == 15);
    /* UTF-8 passes unchanged */
    dsv4_fail(DSV4_ERR_ARG, "%s", "\xEF\xBD\x9C\xE2\x96\x81");
    CHECK(!strcmp(dsv4_last_error(), "\xEF\xBD\x9C\xE2\x96\x81"));
}

int main(void)
{
    RUN(test_long_message_keeps_the_cause);
    RUN(test_one_line);
    TEST_MAIN_END();
}
