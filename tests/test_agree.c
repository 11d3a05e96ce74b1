/* test_agree.c: ranks that hold different inputs fail together (run under
 * mpiexec -np 2 and 3). sb_agree_text on equal and differing texts (the
 * lowest differing rank, the first differing line, a shorter text, NULL);
 * sb_executor_create with a model, a strategy, a seed, a synthetic data
 * source or a record file that differs on the last rank: every rank fails
 * with the same message naming the difference, before any collective of
 * the plan (a mismatch there would hang). A record that only rank 0's copy
 * of the file has damaged stops the step on every rank (-2), not rank 0
 * alone while the others wait in collectives; nor does a failure of one
 * rank in the local part of the creation (SHARDBENCH_TEST_CREATE_FAIL). Every rank runs every check;
 * failures are summed over ranks. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardbench/dtensor.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

static int rank, size, failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "rank %d: FAIL line %d: ", rank, __LINE__);                   \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static void die(const char *what, const sb_error *err)
{
    fprintf(stderr, "test_agree: rank %d: %s: %s\n", rank, what, err->msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The message is the same on every rank (compared with rank 0's). */
static void same_everywhere(const char *msg, const char *what)
{
    char m0[sizeof ((sb_error *)0)->msg];
    snprintf(m0, sizeof m0, "%s", msg);
    MPI_Bcast(m0, (int)sizeof m0, MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(!strcmp(m0, msg), "%s: rank 0 says [%s], this rank [%s]", what, m0, msg);
}

static void test_text(void)
{
    sb_error err = {0};
    int last = size - 1;
    CHECK(sb_agree_text(MPI_COMM_WORLD, "x", "a=1\nb=2\n", &err) == 0, "equal: %s", err.msg);
    CHECK(sb_agree_text(MPI_COMM_WORLD, "x", NULL, &err) == 0, "NULL: %s", err.msg);
    CHECK(sb_agree_text(MPI_COMM_WORLD, "x", rank % 2 ? "" : NULL, &err) == 0, "NULL and empty");
    /* the last rank differs in its second line */
    int rc = sb_agree_text(MPI_COMM_WORLD, "thing", rank == last ? "a=1\nb=3\nc=4\n" : "a=1\nb=2\nc=4\n",
                           &err);
    char want[128];
    snprintf(want, sizeof want, "ranks disagree on the thing: rank 0 has b=2, rank %d has b=3", last);
    CHECK(rc == -1 && err.code == SB_EXIT_INPUT && !strcmp(err.msg, want), "second line: %d [%s]",
          rc, err.msg);
    same_everywhere(err.msg, "second line");
    /* every rank but 0 differs: the lowest one is named */
    rc = sb_agree_text(MPI_COMM_WORLD, "thing", rank ? "a=2" : "a=1", &err);
    CHECK(rc == -1 && strstr(err.msg, "rank 0 has a=1, rank 1 has a=2"), "lowest: [%s]", err.msg);
    /* a text with one line fewer */
    err = (sb_error){0};
    rc = sb_agree_text(MPI_COMM_WORLD, "thing", rank == last ? "a=1\n" : "a=1\nz=9\n", &err);
    snprintf(want, sizeof want, "rank 0 has z=9, rank %d has no more", last);
    CHECK(rc == -1 && strstr(err.msg, want), "shorter: [%s]", err.msg);
    if (rank == 0)
        printf("sb_agree_text: %s\n", err.msg);
}

static sb_model model, model2;
static sb_problem pb;

/* The strategy `choice` (config indices of pb) with ZeRO stage zero. */
static sb_strategy strategy_of(const int *choice, int zero)
{
    sb_strategy st;
    sb_error err = {0};
    if (sb_strategy_from_choice(&st, &pb, choice, &err))
        die("strategy", &err);
    st.zero = zero;
    return st;
}

/* sb_executor_create with the strategy `choice` (config indices) at ZeRO
 * stage zero, options eo and model m: must fail on every rank with a
 * message holding want. */
static void expect_refused_z(const sb_model *m, const int *choice, int zero,
                             const sb_exec_opts *eo, const char *want, const char *what)
{
    sb_error err = {0};
    sb_executor *ex = NULL;
    sb_strategy st = strategy_of(choice, zero);
    int rc = sb_executor_create(MPI_COMM_WORLD, m, &st, &sb_backend_cpu, eo, &ex, &err);
    sb_strategy_free(&st);
    CHECK(rc == -1 && !ex && err.code == SB_EXIT_INPUT && strstr(err.msg, want),
          "%s: rc %d, [%s], expected [%s]", what, rc, err.msg, want);
    same_everywhere(err.msg, what);
    if (rank == 0)
        printf("%-22s %s\n", what, err.msg);
    sb_executor_free(ex);
}

static void expect_refused(const sb_model *m, const int *choice, const sb_exec_opts *eo,
                           const char *want, const char *what)
{
    expect_refused_z(m, choice, 0, eo, want, what);
}

static void test_plan(void)
{
    sb_error err = {0};
    int last = size - 1;
    int *dp = calloc((size_t)model.nops, sizeof *dp), *mine = calloc((size_t)model.nops, sizeof *mine);
    if (sb_strategy_data_parallel(&pb, dp, &err))
        die("dp", &err);
    sb_exec_opts eo = {.lr = 0.1f, .seed = 5};
    char want[256];
    /* the model: another batch on the last rank (the same op count, so
     * config indices of one are valid for the other) */
    snprintf(want, sizeof want, "ranks disagree on the model: rank 0 has batch=4, rank %d has "
             "batch=8", last);
    expect_refused(rank == last ? &model2 : &model, dp, &eo, want, "model");
    /* the strategy: the last rank runs another config of the first op
     * that has a choice */
    memcpy(mine, dp, (size_t)model.nops * sizeof *mine);
    int op = 0;
    while (op < model.nops - 1 && pb.cfg[op].n < 2)
        op++;
    if (rank == last)
        mine[op] = dp[op] ? 0 : 1;
    snprintf(want, sizeof want, "ranks disagree on the strategy: rank 0 has op %s config=",
             model.ops[op].name);
    expect_refused(&model, mine, &eo, want, "strategy");
    snprintf(want, sizeof want, ", rank %d has op %s config=", last, model.ops[op].name);
    expect_refused(&model, mine, &eo, want, "strategy");
    /* the seed and the learning rate */
    sb_exec_opts e2 = eo;
    if (rank == last)
        e2.seed = 6;
    snprintf(want, sizeof want, "ranks disagree on the options: rank 0 has seed=5, rank %d has "
             "seed=6", last);
    expect_refused(&model, dp, &e2, want, "seed");
    e2 = eo;
    if (rank == last)
        e2.lr = 0.2f;
    snprintf(want, sizeof want, "ranks disagree on the options: rank 0 has lr=0.1, rank %d has "
             "lr=0.2", last);
    expect_refused(&model, dp, &e2, want, "lr");
    /* the ZeRO stage (a hang if some ranks sliced and others not), and a
     * stage out of range on every rank */
    snprintf(want, sizeof want, "ranks disagree on the strategy: rank 0 has zero=0, rank %d has "
             "zero=2", last);
    expect_refused_z(&model, dp, rank == last ? 2 : 0, &eo, want, "zero");
    expect_refused_z(&model, dp, 4, &eo, "ZeRO stage 4: not 0, 1, 2 or 3", "zero 4");
    /* the cuda backend's environment, read by each rank (a stand-in
     * table named cuda: only the comparison runs) */
    sb_backend cuda = sb_backend_cpu;
    cuda.name = "cuda";
    if (rank == last)
        setenv("SHARDBENCH_COMM", "mpi", 1);
    sb_strategy dps = strategy_of(dp, 0);
    err = (sb_error){0};
    int rc0 = sb_agree_plan(MPI_COMM_WORLD, &model, &dps, &cuda, &eo, &err);
    sb_strategy_free(&dps);
    unsetenv("SHARDBENCH_COMM");
    snprintf(want, sizeof want, "ranks disagree on the options: rank 0 has SHARDBENCH_COMM=, rank "
             "%d has SHARDBENCH_COMM=mpi", last);
    CHECK(rc0 == -1 && !strcmp(err.msg, want), "cuda environment: %d [%s]", rc0, err.msg);
    same_everywhere(err.msg, "cuda environment");
    if (rank == 0)
        printf("%-22s %s\n", "cuda environment", err.msg);
    /* the caller's options */
    e2 = eo;
    e2.agree = rank == last ? "steps=3\n" : "steps=5\n";
    snprintf(want, sizeof want, "ranks disagree on the options: rank 0 has steps=5, rank %d has "
             "steps=3", last);
    expect_refused(&model, dp, &e2, want, "caller's options");
    /* data: a synthetic source with another seed; then record files that
     * differ only in their contents (per-node copies of one path) */
    int64_t dims[3] = {3, 67, 67};
    sb_data_source *src = NULL, *rec = NULL;
    if (sb_data_synthetic(16, 3, dims, 16, rank == last ? 2 : 1, &src, &err))
        die("synthetic", &err);
    e2 = eo;
    e2.data = src;
    e2.data_seed = 1;
    expect_refused(&model, dp, &e2, "ranks disagree on the options: rank 0 has data=synthetic "
                   "count=16 dims=3x67x67 classes=16 seed=1", "synthetic data");
    char path[2][64];
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "/tmp/sb_agree_%d_%d.rec", (int)getpid(), k);
        sb_data_source *s;
        if (sb_data_synthetic(16, 3, dims, 16, (uint64_t)k + 1, &s, &err)
            || sb_data_write_records(path[k], s, &err))
            die("records", &err);
        sb_data_free(s);
    }
    if (sb_data_open_records(path[rank == last], &rec, &err))
        die("open records", &err);
    e2.data = rec;
    expect_refused(&model, dp, &e2, "ranks disagree on the options: rank 0 has data=records "
                   "count=16 dims=3x67x67 bytes=", "record file copies");
    /* the same everywhere: created */
    sb_data_free(rec);
    rec = NULL;
    if (sb_data_open_records(path[0], &rec, &err))
        die("open records", &err);
    e2.data = rec;
    sb_strategy st = strategy_of(dp, 0);
    sb_executor *ex = NULL;
    int rc = sb_executor_create(MPI_COMM_WORLD, &model, &st, &sb_backend_cpu, &e2, &ex, &err);
    CHECK(rc == 0, "agreeing ranks: %s", err.msg);
    sb_executor_free(ex);
    /* a failure of the last rank alone (out of memory) in the local part of
     * the creation: every rank fails, none waits in the group set-up */
    char lastr[16];
    snprintf(lastr, sizeof lastr, "%d", last);
    setenv("SHARDBENCH_TEST_CREATE_FAIL", lastr, 1);
    ex = NULL;
    rc = sb_executor_create(MPI_COMM_WORLD, &model, &st, &sb_backend_cpu, &e2, &ex, &err);
    unsetenv("SHARDBENCH_TEST_CREATE_FAIL");
    snprintf(want, sizeof want, "out of memory (SHARDBENCH_TEST_CREATE_FAIL on rank %d)", last);
    CHECK(rc == -1 && !ex && !strcmp(err.msg, want), "one rank fails: %d [%s]", rc, err.msg);
    same_everywhere(err.msg, "one rank fails");
    if (rank == 0)
        printf("%-22s %s\n", "one rank fails", err.msg);
    sb_executor_free(ex);
    /* rank 0's copy of the file has a damaged byte in every record (the
     * stored CRCs, which the start-up compares, are intact): the first step
     * stops on every rank with rank 0's message, nothing updated */
    char bad[80];
    snprintf(bad, sizeof bad, "%s.bad", path[0]);
    MPI_Bcast(bad, (int)sizeof bad, MPI_CHAR, 0, MPI_COMM_WORLD); /* rank 0's name */
    if (rank == 0) {
        FILE *in = fopen(path[0], "rb"), *out = fopen(bad, "wb");
        int ch;
        long at = 0, hb = 8 + 4 + 4 + 4 + 8 * 3 + 8 + 4, rb = 4 + 3 * 67 * 67 * 4 + 4;
        while (in && out && (ch = fgetc(in)) != EOF) {
            if (at >= hb && (at - hb) % rb == 8)
                ch ^= 0x40;
            fputc(ch, out);
            at++;
        }
        if (!in || !out)
            MPI_Abort(MPI_COMM_WORLD, 1);
        fclose(in);
        fclose(out);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    sb_data_free(rec);
    rec = NULL;
    if (sb_data_open_records(rank == 0 ? bad : path[0], &rec, &err))
        die("open records", &err);
    e2.data = rec;
    ex = NULL;
    rc = sb_executor_create(MPI_COMM_WORLD, &model, &st, &sb_backend_cpu, &e2, &ex, &err);
    CHECK(rc == 0, "damaged copy: created: %s", err.msg);
    double loss = 0;
    err = (sb_error){0};
    rc = ex ? sb_executor_step(ex, &loss, &err) : -1;
    snprintf(want, sizeof want, "record file '%s': checksum mismatch in record ", bad);
    CHECK(rc == -2 && err.code == SB_EXIT_INPUT && strstr(err.msg, want), "damaged copy: %d [%s]",
          rc, err.msg);
    CHECK(!ex || sb_executor_steps_done(ex) == 0, "damaged copy: the step counted");
    same_everywhere(err.msg, "damaged copy");
    if (rank == 0)
        printf("%-22s %s\n", "damaged record", err.msg);
    sb_executor_free(ex);
    if (rank == 0)
        unlink(bad);
    for (int k = 0; k < 2; k++)
        unlink(path[k]);
    sb_data_free(rec);
    sb_data_free(src);
    sb_strategy_free(&st);
    free(dp);
    free(mine);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_text();
    sb_setting set[4];
    const char *kv[4] = {"batch=4", "image=67", "classes=16", "width_div=16"};
    sb_error err = {0};
    for (int i = 0; i < 4; i++)
        if (sb_setting_parse(kv[i], &set[i], &err))
            die("set", &err);
    if (sb_model_load("alexnet", set, 4, &model, &err))
        die("model", &err);
    set[0].value = 8;
    if (sb_model_load("alexnet", set, 4, &model2, &err))
        die("model", &err);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    if (sb_problem_build(&model, size, &cp, &pb, &err))
        die("problem", &err);
    test_plan();
    sb_problem_free(&pb);
    sb_model_free(&model);
    sb_model_free(&model2);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_agree p=%d: %d failures\n", size, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
