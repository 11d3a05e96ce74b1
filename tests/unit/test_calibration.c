/* tests/unit/test_calibration.c: cmocka tests of the calibration file reader's
 * ranges (cost/calibration.c) and of the guards that keep a cost that is
 * not a number out of every result (search/problem.c, search/candidates.c):
 * absurd but finite values are refused naming file:line and the value;
 * the corners of the accepted ranges give finite costs for a shipped
 * model searched at p = 64; cost parameters set past the file (the
 * library's callers) are refused by sb_problem_build. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/candidates.h"
#include "shardbench/model.h"
#include "shardbench/search.h"

#define DATA SB_SOURCE_DIR "/tests/data/calibration/"

static char tmpdir[] = "/tmp/test_calibration.XXXXXX";

/* Writes text to a file of tmpdir; returns its path (static buffer). */
static const char *write_cal(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void refused(const char *path, const char *want1, const char *want2)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_cost_params before = cp;
    sb_error err = {0};
    assert_int_not_equal(sb_calibration_load(path, &cp, &err), 0);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        fail_msg("message '%s' lacks '%s' / '%s'", err.msg, want1, want2 ? want2 : "");
    assert_memory_equal(&cp, &before, sizeof cp); /* untouched on failure */
}

static void test_ok(void **state)
{
    (void)state;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_error err = {0};
    assert_int_equal(sb_calibration_load(DATA "ok.txt", &cp, &err), 0);
    assert_true(cp.tflops == 0.0412 && cp.gbs == 2.31 && cp.word_bytes == 4);
    assert_true(cp.elem_ratio == 21.5 && cp.latency_us == 31.2 && cp.conv_ratio == 0.61);
}

/* The values that gave "total cost -nan" and exit 0: file:line and value. */
static void test_absurd_files(void **state)
{
    (void)state;
    refused(DATA "word_bytes_huge.txt", "word_bytes_huge.txt:3:", "word_bytes 1e308 is out of range");
    refused(DATA "elem_ratio_huge.txt", "elem_ratio_huge.txt:4:", "elem_ratio 1e308 is out of range");
    refused(DATA "conv_ratio_huge.txt", "conv_ratio_huge.txt:6:", "conv_ratio 1e308 is out of range");
    refused(DATA "tflops_tiny.txt", "tflops_tiny.txt:1:", "tflops 1e-300 is out of range");
}

/* Issue 39: the file opened once without blocking (a FIFO refused at once,
 * a folder named), a NUL byte refused naming its line, numbers decimal
 * only, a repeated key naming its first line. */
static void test_hostile_files(void **state)
{
    (void)state;
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/cal.fifo", tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(20); /* a blocking open would hang: the alarm fails the test */
    refused(fifo, fifo, "is a pipe (FIFO)");
    refused(tmpdir, tmpdir, "is a directory");
    alarm(0);
    unlink(fifo);
    static const char nul[] = "tflops 1\ngbs 1\nword_bytes 4\nelem_ratio 1\x00x\nlatency_us 1\n";
    char path[600];
    snprintf(path, sizeof path, "%s/nul.txt", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(nul, 1, sizeof nul - 1, f);
    fclose(f);
    refused(path, "nul.txt:4:", "a NUL byte");
    refused(write_cal("hex.txt", "tflops 0x10\ngbs 1\nword_bytes 4\nelem_ratio 1\n"
                                 "latency_us 1\n"), "hex.txt:1:", "tflops '0x10' is not a");
    refused(write_cal("twice.txt", "tflops 1\ngbs 1\nword_bytes 4\n# c\ngbs 2\n"),
            "twice.txt:5:", "'gbs' given twice (first on line 2)");
}

static void test_ranges(void **state)
{
    (void)state;
    static const struct {
        const char *key, *bad, *good;
    } cases[] = {
        {"tflops", "1e7", "1e6"},          {"tflops", "9e-7", "1e-6"},
        {"gbs", "2e6", "1e6"},             {"gbs", "1e-7", "1e-6"},
        {"word_bytes", "65", "64"},        {"word_bytes", "0.25", "0.5"},
        {"elem_ratio", "1e7", "1e6"},      {"elem_ratio", "1e-9", "1e-6"},
        {"latency_us", "2e7", "1e7"},      {"latency_us", "1e-9", "0"},
        {"conv_ratio", "1e300", "1e6"},    {"conv_ratio", "1e-7", "1e-6"},
    };
    static const char *const base[] = {"tflops 1", "gbs 1", "word_bytes 4", "elem_ratio 1",
                                       "latency_us 1", "conv_ratio 1"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int pass = 0; pass < 2; pass++) {
            char text[512] = "", line[64];
            int at = 0;
            for (int k = 0; k < 6; k++) {
                if (!strncmp(base[k], cases[i].key, strlen(cases[i].key))) {
                    snprintf(line, sizeof line, "%s %s\n", cases[i].key,
                             pass ? cases[i].good : cases[i].bad);
                    at = k + 1;
                } else {
                    snprintf(line, sizeof line, "%s\n", base[k]);
                }
                strcat(text, line);
            }
            const char *path = write_cal("range.txt", text);
            sb_cost_params cp;
            sb_cost_params_default(&cp);
            sb_error err = {0};
            int rc = sb_calibration_load(path, &cp, &err);
            if (pass) {
                if (rc)
                    fail_msg("%s %s refused: %s", cases[i].key, cases[i].good, err.msg);
            } else {
                char want[128];
                snprintf(want, sizeof want, "range.txt:%d: %s %s is out of range", at,
                         cases[i].key, cases[i].bad);
                if (!rc || !strstr(err.msg, want))
                    fail_msg("%s %s: rc %d, message '%s'", cases[i].key, cases[i].bad, rc,
                             err.msg);
            }
        }
    }
}

/* Every corner of the accepted box: finite costs, searched and enumerated. */
static void test_corners_finite(void **state)
{
    (void)state;
    sb_model m;
    sb_error err = {0};
    if (sb_model_load("alexnet", NULL, 0, &m, &err))
        fail_msg("%s", err.msg);
    static const char *const lo[] = {"tflops 1e-6", "gbs 1e-6", "word_bytes 0.5",
                                     "elem_ratio 1e-6", "latency_us 0", "conv_ratio 1e-6"};
    static const char *const hi[] = {"tflops 1e6", "gbs 1e6", "word_bytes 64",
                                     "elem_ratio 1e6", "latency_us 1e7", "conv_ratio 1e6"};
    /* all low, all high, and the two that favour compute or communication most */
    static const unsigned masks[] = {0x00, 0x3f, 0x3d, 0x02};
    for (size_t c = 0; c < sizeof masks / sizeof masks[0]; c++) {
        char text[512] = "";
        for (int k = 0; k < 6; k++) {
            strcat(text, (masks[c] >> k) & 1 ? hi[k] : lo[k]);
            strcat(text, "\n");
        }
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        if (sb_calibration_load(write_cal("corner.txt", text), &cp, &err))
            fail_msg("corner %zu: %s", c, err.msg);
        sb_problem pb;
        if (sb_problem_build(&m, 64, &cp, &pb, &err))
            fail_msg("corner %zu: %s", c, err.msg);
        sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 1024};
        sb_result r;
        if (sb_search(&pb, &so, &r, &err))
            fail_msg("corner %zu: %s", c, err.msg);
        if (!isfinite(r.total_cost) || !(r.total_cost > 0))
            fail_msg("corner %zu: total cost %g", c, r.total_cost);
        sb_result_free(&r);
        sb_problem_free(&pb);
    }
    sb_model_free(&m);
}

/* Parameters set past the file: sb_problem_build refuses a cost that is not
 * a number instead of handing it to the search. */
static void test_problem_guard(void **state)
{
    (void)state;
    sb_model m;
    sb_error err = {0};
    if (sb_model_load("alexnet", NULL, 0, &m, &err))
        fail_msg("%s", err.msg);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.word_bytes = 1e308; /* words_to_flops overflows: inf, then inf * 0 */
    snprintf(cp.calibration, sizeof cp.calibration, "%s", "absurd.txt");
    sb_problem pb;
    assert_int_not_equal(sb_problem_build(&m, 4, &cp, &pb, &err), 0);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, "not a finite number") || !strstr(err.msg, "absurd.txt"))
        fail_msg("message '%s'", err.msg);
    sb_cost_params_default(&cp);
    cp.elem_ratio = 1e308;
    memset(&err, 0, sizeof err);
    assert_int_not_equal(sb_problem_build(&m, 4, &cp, &pb, &err), 0);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    sb_model_free(&m);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/range.txt", tmpdir);
    unlink(path);
    snprintf(path, sizeof path, "%s/corner.txt", tmpdir);
    unlink(path);
    rmdir(tmpdir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok),
        cmocka_unit_test(test_absurd_files),
        cmocka_unit_test(test_ranges), cmocka_unit_test(test_hostile_files),
        cmocka_unit_test(test_corners_finite),
        cmocka_unit_test(test_problem_guard),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
