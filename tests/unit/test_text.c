/* tests/unit/test_text.c: cmocka tests of common/text.c and sb_open_input
 * (issue 39): control bytes escaped for a terminal, words quoted for a
 * shell (each quoted word read back by /bin/sh as one word, itself), the
 * strict number and size parsers against what strtod lets through, and
 * the one open of every reader refusing a FIFO, a folder and a device
 * without blocking. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/common.h"

static void test_escape(void **state)
{
    (void)state;
    char out[64];
    sb_escape_controls("a\x1b[31mb\nc\td\x7f", out, sizeof out, 0);
    assert_string_equal(out, "a\\x1b[31mb\\nc\\td\\x7f");
    sb_escape_controls("a\x1b[31mb\nc\td", out, sizeof out, 1);
    assert_string_equal(out, "a\\x1b[31mb\nc\td");
    sb_escape_controls("\x1b\x1b\x1b", out, 6, 0); /* cut whole: no half escape */
    assert_string_equal(out, "\\x1b");
    assert_int_equal(sb_has_controls("plain é"), 0);
    assert_int_equal(sb_has_controls("a\rb"), 1);
    sb_error err = {0};
    sb_fail(&err, SB_EXIT_INPUT, "%s: bad", "x\x1b]0;title\x07y");
    assert_string_equal(err.msg, "x\\x1b]0;title\\x07y: bad");
}

/* s quoted, then read back by sh as words: exactly one word, s itself. */
static void shell_round_trip(const char *s)
{
    char q[1024], cmd[2048];
    sb_shell_quote(s, q, sizeof q);
    assert_int_equal(sb_has_controls(q), 0);
    char path[] = "/tmp/sb_text_XXXXXX", script[] = "/tmp/sb_text_sh_XXXXXX";
    int fd = mkstemp(path), sd = mkstemp(script);
    assert_true(fd >= 0 && sd >= 0);
    close(fd);
    /* the quoted word pasted into a bash script ($'...' is bash's, zsh's
     * and ksh's): printf writes each word it gets, NUL-terminated */
    FILE *sf = fdopen(sd, "w");
    assert_non_null(sf);
    fprintf(sf, "printf '%%s\\0' %s > %s\n", q, path);
    fclose(sf);
    snprintf(cmd, sizeof cmd, "bash %s", script);
    assert_int_equal(system(cmd), 0);
    unlink(script);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char back[1024];
    size_t n = fread(back, 1, sizeof back, f);
    fclose(f);
    unlink(path);
    if (n != strlen(s) + 1 || memcmp(back, s, n))
        fail_msg("'%s' quoted as %s read back as %zu bytes", s, q, n);
}

static void test_shell_quote(void **state)
{
    (void)state;
    char q[256];
    sb_shell_quote("results/shardbench.db", q, sizeof q);
    assert_string_equal(q, "results/shardbench.db");
    sb_shell_quote("a b;touch x;.db", q, sizeof q);
    assert_string_equal(q, "'a b;touch x;.db'");
    sb_shell_quote("it's", q, sizeof q);
    assert_string_equal(q, "'it'\\''s'");
    sb_shell_quote("a\nb\x1b'c\\", q, sizeof q);
    assert_string_equal(q, "$'a\\nb\\x1b\\'c\\\\'");
    sb_shell_quote("", q, sizeof q);
    assert_string_equal(q, "''");
    const char *words[] = {"plain", "a b", "a;b", "$(rm -rf x)", "`id`", "it's", "\"q\"",
                           "back\\slash", "new\nline", "esc\x1b[31m", "tab\there", "*?[x]",
                           "~user", "a'b\\c\x01", "é"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        shell_round_trip(words[i]);
}

static void test_numbers(void **state)
{
    (void)state;
    double v;
    const char *end;
    assert_int_equal(sb_parse_number("80", &v, &end), 0);
    assert_true(v == 80 && !*end);
    assert_int_equal(sb_parse_number("1.5e3GiB", &v, &end), 0);
    assert_true(v == 1500 && !strcmp(end, "GiB"));
    assert_int_equal(sb_parse_number(".5", &v, &end), 0);
    assert_true(v == 0.5);
    assert_int_equal(sb_parse_number("-2", &v, &end), 0);
    assert_true(v == -2);
    assert_int_equal(sb_parse_number("2e", &v, &end), 0); /* 2, then "e" left */
    assert_true(v == 2 && !strcmp(end, "e"));
    /* what strtod takes and these do not */
    const char *bad[] = {" 80", "\t1", "0x10", "0X1p3", "inf", "nan", "infinity", "", ".",
                         "-", "1e400", "+.e1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!sb_parse_number(bad[i], &v, &end) && !*end)
            fail_msg("'%s' taken as %g", bad[i], v);
    double b;
    sb_error err = {0};
    assert_int_equal(sb_parse_size("80GiB", "--memory", "GiB", &b, &err), 0);
    assert_true(b == 80.0 * 1073741824.0);
    assert_int_equal(sb_parse_size("2", "--memory", "GiB", &b, &err), 0);
    assert_true(b == 2.0 * 1073741824.0);
    assert_int_equal(sb_parse_size("512B", "--memory", NULL, &b, &err), 0);
    assert_int_equal(sb_parse_size("2", "--x", NULL, &b, &err), -1);
    const char *badsz[] = {"0x10GiB", " 80GiB", "80 GiB", "80GiB ", "0", "-1GiB", "0.5B",
                           "1e400B", "infGiB", "80gib", "80GiBs"};
    for (size_t i = 0; i < sizeof badsz / sizeof badsz[0]; i++) {
        memset(&err, 0, sizeof err);
        if (!sb_parse_size(badsz[i], "--memory", "GiB", &b, &err))
            fail_msg("size '%s' taken as %g bytes", badsz[i], b);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        assert_non_null(strstr(err.msg, "--memory"));
    }
}

static void test_open_input(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_text_open_XXXXXX", fifo[PATH_MAX], file[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/f", dir);
    snprintf(file, sizeof file, "%s/r", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("hello", f);
    fclose(f);
    const char *paths[] = {fifo, dir, "/dev/null"};
    const char *says[] = {"is a pipe (FIFO)", "is a directory", "is a character device"};
    alarm(20); /* a FIFO opened blocking would hang: the alarm fails the test */
    for (int i = 0; i < 3; i++) {
        sb_error err = {0};
        assert_int_equal(sb_open_input(paths[i], "thing", NULL, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        if (!strstr(err.msg, says[i]) || !strstr(err.msg, paths[i]) || !strstr(err.msg, "thing"))
            fail_msg("unclear: %s", err.msg);
    }
    alarm(0);
    int64_t size = -1;
    sb_error err = {0};
    int fd = sb_open_input(file, "thing", &size, &err);
    assert_true(fd >= 0);
    assert_int_equal(size, 5);
    char buf[8];
    assert_int_equal(read(fd, buf, sizeof buf), 5); /* blocking again, reads */
    close(fd);
    unlink(fifo);
    unlink(file);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_shell_quote),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_open_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
