/* test_data_train.c: training on a record file (sb_exec_opts.data).
 *
 * Under mpirun -np P: writes a record file of 40 samples shaped like the
 * input of a small AlexNet (3 x 67 x 67, 16 classes), then trains 3 steps
 * on one rank and on all P ranks under data parallelism and a model-split
 * strategy: the losses must agree (the data path is strategy-independent),
 * differ from the synthetic-input run (the file is really read), and a
 * file whose samples have the wrong shape must be refused with a clear
 * error. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardbench/dtensor.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

static int rank, size, failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        if (rank == 0)
            printf("FAIL: %s\n", what);
        failures++;
    }
}

static void die(const char *what, const sb_error *err)
{
    fprintf(stderr, "test_data_train: rank %d: %s: %s\n", rank, what, err->msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void train(MPI_Comm comm, const sb_problem *pb, const int *choice, const sb_data_source *d,
                  double *loss)
{
    sb_error err = {0};
    sb_executor *ex;
    sb_exec_opts eo = {.lr = 0.05f, .seed = 3, .data = d, .data_seed = 5};
    sb_strategy st;
    if (sb_strategy_from_choice(&st, pb, choice, &err) ||
        sb_executor_create(comm, pb->m, &st, &sb_backend_cpu, &eo, &ex, &err))
        die("create", &err);
    sb_strategy_free(&st);
    for (int s = 0; s < 3; s++)
        if (sb_executor_step(ex, &loss[s], &err))
            die("step", &err);
    sb_executor_free(ex);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sb_error err = {0};
    char path[256] = "", bad[256] = "";
    if (rank == 0) {
        snprintf(path, sizeof path, "/tmp/sb_data_train_%d.rec", (int)getpid());
        snprintf(bad, sizeof bad, "/tmp/sb_data_train_bad_%d.rec", (int)getpid());
        int64_t dims[3] = {3, 67, 67}, bdims[3] = {3, 60, 60};
        sb_data_source *syn, *wrong;
        if (sb_data_synthetic(40, 3, dims, 16, 11, &syn, &err)
            || sb_data_write_records(path, syn, &err)
            || sb_data_synthetic(40, 3, bdims, 16, 11, &wrong, &err)
            || sb_data_write_records(bad, wrong, &err))
            die("write records", &err);
        sb_data_free(syn);
        sb_data_free(wrong);
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(bad, sizeof bad, MPI_CHAR, 0, MPI_COMM_WORLD);
    sb_setting set[4];
    const char *kv[4] = {"batch=4", "image=67", "classes=16", "width_div=16"};
    for (int i = 0; i < 4; i++)
        sb_setting_parse(kv[i], &set[i], &err);
    sb_model m;
    if (sb_model_load("alexnet", set, 4, &m, &err))
        die("model", &err);
    sb_data_source *d;
    if (sb_data_open_records(path, &d, &err))
        die("open records", &err);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.cutoff = 1;
    double ref[3] = {0}, syn[3] = {0};
    if (rank == 0) {
        sb_problem p1;
        if (sb_problem_build(&m, 1, &cp, &p1, &err))
            die("problem", &err);
        int *ones = calloc((size_t)m.nops, sizeof *ones);
        train(MPI_COMM_SELF, &p1, ones, d, ref);
        train(MPI_COMM_SELF, &p1, ones, NULL, syn);
        free(ones);
        sb_problem_free(&p1);
        printf("one rank, record file: losses %.6f %.6f %.6f; synthetic: %.6f %.6f %.6f\n", ref[0],
               ref[1], ref[2], syn[0], syn[1], syn[2]);
    }
    MPI_Bcast(ref, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(syn, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    check(fabs(ref[0] - syn[0]) > 1e-6, "the record file changes the loss (it is read)");
    sb_problem pb;
    if (sb_problem_build(&m, size, &cp, &pb, &err))
        die("problem", &err);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    for (int variant = 0; variant < 2; variant++) {
        if (variant == 0) {
            sb_strategy_data_parallel(&pb, choice, &err);
        } else {
            /* the most-split config of every op: batch, channels, kernel rows, classes */
            for (int i = 0; i < m.nops; i++) {
                int best = 0, bq = 0;
                for (int k = 0; k < pb.cfg[i].n; k++) {
                    int q = 1;
                    for (int dd = 0; dd < pb.cfg[i].ndims; dd++)
                        q *= pb.cfg[i].c[(size_t)k * (size_t)pb.cfg[i].ndims + (size_t)dd];
                    if (q > bq || (q == bq && (k * 7 + i) % 3 == 0)) {
                        bq = q;
                        best = k;
                    }
                }
                choice[i] = best;
            }
        }
        double got[3];
        train(MPI_COMM_WORLD, &pb, choice, d, got);
        for (int s = 0; s < 3; s++) {
            char what[128];
            snprintf(what, sizeof what, "%s p=%d step %d: loss %.7f equals one rank's %.7f",
                     variant ? "split" : "dp", size, s, got[s], ref[s]);
            check(fabs(got[s] - ref[s]) <= 1e-5 * fabs(ref[s]), what);
        }
        if (rank == 0)
            printf("%s p=%d: losses %.6f %.6f %.6f\n", variant ? "split" : "dp", size, got[0], got[1],
                   got[2]);
    }
    /* a file whose samples do not fit the model's input is refused */
    sb_data_source *w;
    if (sb_data_open_records(bad, &w, &err))
        die("open records", &err);
    sb_executor *ex = NULL;
    sb_exec_opts eo = {.lr = 0.05f, .seed = 3, .data = w};
    sb_error e2 = {0};
    sb_strategy st;
    if (sb_strategy_from_choice(&st, &pb, choice, &err))
        die("strategy", &err);
    int rc = sb_executor_create(MPI_COMM_WORLD, pb.m, &st, &sb_backend_cpu, &eo, &ex, &e2);
    sb_strategy_free(&st);
    check(rc != 0 && e2.code == SB_EXIT_INPUT && strstr(e2.msg, "--data") && strstr(e2.msg, "67x67"),
          "wrong sample shape refused naming the shapes");
    if (rank == 0 && rc)
        printf("refused as expected: %s\n", e2.msg);
    sb_executor_free(ex);
    sb_data_free(w);
    sb_data_free(d);
    free(choice);
    sb_problem_free(&pb);
    sb_model_free(&m);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        unlink(path);
        unlink(bad);
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s\n", all ? "test_data_train: FAILED" : "test_data_train: ok");
    MPI_Finalize();
    return all ? 1 : 0;
}
