/* tests/test_strategy_io.c: cmocka tests of the strategy file's model line
 * (search/strategy_io.c): sb_strategy_word on bare and quoted values, and
 * a strategy saved for a model whose name holds a blank, '#', '"', '\' and
 * a control character loads back against the same model and is refused by
 * another. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/search.h"

static void test_word(void **state)
{
    (void)state;
    char out[64];
    const char *end;
    assert_int_equal(sb_strategy_word("  alexnet  # c", out, sizeof out, &end), 0);
    assert_string_equal(out, "alexnet");
    assert_string_equal(end, "  # c");
    assert_int_equal(sb_strategy_word("plain\"q", out, sizeof out, NULL), 0);
    assert_string_equal(out, "plain\"q"); /* a quote inside a bare word is kept */
    assert_int_equal(sb_strategy_word("\"my net#1\" # c", out, sizeof out, &end), 0);
    assert_string_equal(out, "my net#1");
    assert_string_equal(end, " # c");
    assert_int_equal(sb_strategy_word("\"a\\\"b\\\\c\\n\\t\\r\\x01\\x7f\"", out, sizeof out,
                                      NULL), 0);
    assert_string_equal(out, "a\"b\\c\n\t\r\x01\x7f");
    assert_int_equal(sb_strategy_word("\"\"", out, sizeof out, NULL), 0);
    assert_string_equal(out, "");
    assert_int_equal(sb_strategy_word("\"open", out, sizeof out, NULL), -1);
    assert_int_equal(sb_strategy_word("\"bad \\q\"", out, sizeof out, NULL), -1);
    assert_int_equal(sb_strategy_word("\"bad \\x4\"", out, sizeof out, NULL), -1);
    assert_int_equal(sb_strategy_word("\"0123456789\"", out, 5, NULL), -1);
    assert_int_equal(sb_strategy_word("0123456789", out, 5, NULL), -1);
}

/* A copy of rnnlm.model without its `model` line, so the file's base name
 * is the model's name. */
static void model_file(const char *path)
{
    FILE *in = fopen(SB_SOURCE_DIR "/models/rnnlm.model", "r"), *out = fopen(path, "w");
    assert_non_null(in);
    assert_non_null(out);
    char line[4096];
    while (fgets(line, sizeof line, in))
        if (strncmp(line, "model ", 6))
            fputs(line, out);
    fclose(in);
    fclose(out);
}

static void save_and_load(const char *dir, const char *name)
{
    char path[PATH_MAX], other[PATH_MAX], strat[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.model", dir, name);
    snprintf(other, sizeof other, "%s/%s-other.model", dir, name);
    snprintf(strat, sizeof strat, "%s/s.strategy", dir);
    model_file(path);
    model_file(other);
    sb_setting set[2];
    sb_error err = {0};
    assert_int_equal(sb_setting_parse("batch=8", &set[0], &err), 0);
    assert_int_equal(sb_setting_parse("vocab=64", &set[1], &err), 0);
    sb_model m, m2;
    if (sb_model_load(path, set, 2, &m, &err) || sb_model_load(other, set, 2, &m2, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(m.name, name);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb, pb2;
    assert_int_equal(sb_problem_build(&m, 2, &cp, &pb, &err), 0);
    assert_int_equal(sb_problem_build(&m2, 2, &cp, &pb2, &err), 0);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 64};
    sb_result r;
    assert_int_equal(sb_search(&pb, &so, &r, &err), 0);
    assert_int_equal(sb_strategy_save(strat, &pb, &r, "pase", &err), 0);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    assert_non_null(choice);
    if (sb_strategy_load(strat, &pb, choice, &err))
        fail_msg("%s: %s", name, err.msg);
    assert_memory_equal(choice, r.choice, (size_t)m.nops * sizeof *choice);
    assert_int_equal(sb_strategy_load(strat, &pb2, choice, &err), -1);
    assert_non_null(strstr(err.msg, "strategy is for model"));
    free(choice);
    sb_result_free(&r);
    sb_problem_free(&pb);
    sb_problem_free(&pb2);
    sb_model_free(&m);
    sb_model_free(&m2);
    unlink(path);
    unlink(other);
    unlink(strat);
}

static void test_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_strategy_io_XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const char *const names[] = {"plain", "my net#1", "plain\"q", "back\\slash",
                                        "tab\tbell\x07", "#lead", "\"quoted"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        save_and_load(dir, names[i]);
    rmdir(dir);
}

/* A strategy "file" that is a device, a FIFO or a directory is refused at
 * once with a message naming it: no endless read of /dev/zero, no wait on a
 * FIFO nobody writes (alarm: a hang fails the test instead). */
static void test_special_files(void **state)
{
    (void)state;
    sb_setting set[1];
    sb_error err = {0};
    assert_int_equal(sb_setting_parse("batch=8", &set[0], &err), 0);
    sb_model m;
    if (sb_model_load(SB_SOURCE_DIR "/models/rnnlm.model", set, 1, &m, &err))
        fail_msg("%s", err.msg);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    assert_int_equal(sb_problem_build(&m, 2, &cp, &pb, &err), 0);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    assert_non_null(choice);

    char dir[] = "/tmp/sb_strategy_special_XXXXXX", fifo[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo.strategy", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *paths[] = {"/dev/zero", fifo, dir};
    const char *says[] = {"character device", "FIFO", "directory"};
    alarm(20);
    for (int i = 0; i < 3; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(sb_strategy_load(paths[i], &pb, choice, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        if (!strstr(err.msg, paths[i]) || !strstr(err.msg, says[i]) ||
            !strstr(err.msg, "not a regular file"))
            fail_msg("%s: unclear message: %s", paths[i], err.msg);
    }
    alarm(0);
    unlink(fifo);
    rmdir(dir);
    free(choice);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_word),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_special_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
