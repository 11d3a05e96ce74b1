/* fuzz_strategy.c: libFuzzer target for the strategy file reader
 * (sb_strategy_load_choice, strategy/strategy_io.c).
 *
 * Each input is written to a file and read as a strategy of a small fixed
 * model at p = 4. Besides crashes and sanitizer reports, it aborts on broken
 * contracts: a failure without an error message or with another exit
 * status than SB_EXIT_INPUT; an accepted file whose choices are not configs
 * of their op, or whose strategy, saved again (sb_result_save) and read
 * back, differs. Seeds: tests/data/strategy/. Run with scripts/fuzz.sh; not
 * a unit test. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardbench/model.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

/* tests/data/strategy/fuzzstrat.model: convolution, pooling, reshape,
 * dense layers, the loss */
static const char model_text[] =
    "model fuzzstrat\n"
    "param batch = 8\n"
    "cutoff 1\n"
    "input img[batch=batch, channels=3, height=35, width=35]\n"
    "conv1 = conv(img, out=16, kernel=5, stride=2, pw=1)\n"
    "pool1 = pool(conv1, kernel=3, stride=2)\n"
    "flat = reshape(pool1, shape=[batch=batch, features=-1])\n"
    "fc1 = dense(flat, units=64, pw=1)\n"
    "fc2 = dense(fc1, units=10, dim=classes)\n"
    "loss = softmax_xent(fc2)\n";

static char path[64], again[80];
static sb_model model;
static sb_problem pb;
static int ready;

static void die(const char *what, const sb_error *err)
{
    fprintf(stderr, "fuzz_strategy: %s (code %d, msg '%s')\n", what, err ? err->code : 0,
            err ? err->msg : "");
    abort();
}

static void init(void)
{
    snprintf(path, sizeof path, "/tmp/fuzz_strategy.%d", (int)getpid());
    snprintf(again, sizeof again, "%s.saved", path);
    sb_error err = {0};
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    if (sb_model_parse(model_text, sizeof model_text - 1, "fuzzstrat.model", NULL, 0, &model,
                       &err) ||
        sb_problem_build(&model, 4, &cp, &pb, &err))
        die("the fixed model does not build", &err);
    ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready)
        init();
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    int n = model.nops;
    int *choice = calloc((size_t)n, sizeof *choice), *back = calloc((size_t)n, sizeof *back);
    if (!choice || !back)
        abort();
    sb_error err = {0};
    if (sb_strategy_load_choice(path, &pb, choice, &err)) {
        if (err.code != SB_EXIT_INPUT || !err.msg[0])
            die("a refused file without a message or with another status", &err);
    } else {
        for (int i = 0; i < n; i++)
            if (choice[i] < 0 || choice[i] >= pb.cfg[i].n)
                die("an accepted file chose a config out of range", NULL);
        sb_result r = {.choice = choice, .total_cost = sb_strategy_cost(&pb, choice)};
        if (sb_result_save(again, &pb, &r, "fuzz", &err))
            die("an accepted strategy cannot be saved", &err);
        if (sb_strategy_load_choice(again, &pb, back, &err))
            die("a saved strategy does not load back", &err);
        if (memcmp(choice, back, (size_t)n * sizeof *choice))
            die("a saved strategy loads back different", NULL);
        unlink(again);
    }
    free(choice);
    free(back);
    return 0;
}
