/* fuzz_calibration.c: libFuzzer target for the calibration file reader
 * (sb_calibration_load, cost/calibration.c).
 *
 * Each input is written to a file and read as a calibration file. Besides
 * crashes and sanitizer reports, it aborts on broken contracts: a failure
 * without an error message or with another exit status than SB_EXIT_INPUT,
 * the parameters changed by a failed read, and an accepted file whose
 * values are not finite and positive (latency_us: not negative) or that
 * makes any cost of a small fixed model at p = 4 not finite (problem
 * build, then the exact search). Run with scripts/fuzz.sh; not a unit
 * test. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardbench/model.h"
#include "shardbench/search.h"

/* a small AlexNet: convolutions, pooling, dense layers, the loss; every
 * cost term of the calibrated model (GEMM, conv, elementwise, all-reduce,
 * relayout, latency) */
static const char model_text[] =
    "model fuzzcal\n"
    "param batch = 8\n"
    "cutoff 1\n"
    "input img[batch=batch, channels=3, height=35, width=35]\n"
    "conv1 = conv(img, out=16, kernel=5, stride=2, pw=1)\n"
    "pool1 = pool(conv1, kernel=3, stride=2)\n"
    "flat = reshape(pool1, shape=[batch=batch, features=-1])\n"
    "fc1 = dense(flat, units=64, pw=1)\n"
    "fc2 = dense(fc1, units=10, dim=classes)\n"
    "loss = softmax_xent(fc2)\n";

static char path[64];
static sb_model model;
static int have_model;

static void die(const char *what, const sb_error *err)
{
    fprintf(stderr, "fuzz_calibration: %s (code %d, msg '%s')\n", what, err->code, err->msg);
    abort();
}

static void init(void)
{
    snprintf(path, sizeof path, "/tmp/fuzz_calibration.%d", (int)getpid());
    sb_error err = {0};
    have_model = sb_model_parse(model_text, sizeof model_text - 1, "fuzzcal.model", NULL, 0,
                                &model, &err) == 0;
    if (!have_model)
        fprintf(stderr, "fuzz_calibration: the fixed model does not parse (%s): costs not "
                        "checked\n", err.msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0])
        init();
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    sb_cost_params cp, before;
    sb_cost_params_default(&cp);
    before = cp;
    sb_error err = {0};
    if (sb_calibration_load(path, &cp, &err)) {
        if (err.code != SB_EXIT_INPUT || !err.msg[0])
            die("a refused file without a message or with another status", &err);
        if (memcmp(&cp, &before, sizeof cp))
            die("a refused file changed the parameters", &err);
        return 0;
    }
    const double pos[] = {cp.tflops, cp.gbs, cp.word_bytes, cp.elem_ratio, cp.conv_ratio};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (!isfinite(pos[i]) || !(pos[i] > 0))
            die("an accepted value is not finite and positive", &err);
    if (!isfinite(cp.latency_us) || cp.latency_us < 0)
        die("an accepted latency_us is not finite and non-negative", &err);
    if (!have_model)
        return 0;
    sb_problem pb;
    if (sb_problem_build(&model, 4, &cp, &pb, &err))
        die("an accepted file makes the problem fail", &err);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 64};
    sb_result r;
    if (sb_search(&pb, &so, &r, &err))
        die("an accepted file makes the search fail", &err);
    if (!isfinite(r.total_cost) || r.total_cost < 0) {
        fprintf(stderr, "total cost %g\n", r.total_cost);
        die("an accepted file gives a total cost that is not a number", &err);
    }
    sb_result_free(&r);
    sb_problem_free(&pb);
    return 0;
}
