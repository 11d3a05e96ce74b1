/* tests/cli/calibrate_rate.c: `shardbench calibrate` against an independent
 * measurement made here: a plain cblas_sgemm and a plain add loop, timed in
 * this process with the thread count calibrate reports for its ranks.
 *
 *   calibrate_rate SHARDBENCH MPIEXEC
 *
 * Runs `MPIEXEC -np 2 SHARDBENCH calibrate` (n = 256 GEMM, median of 5) and
 * checks its tflops within 2x of this process's sgemm rate (n^3
 * multiply-adds per second), and its elem_ratio within 8x of the ratio of
 * the two rates measured here (the backend's add sums k inputs with k known
 * at run time: 2-3.5x slower than the plain loop here on the project
 * machine, so the bound is looser than the GEMM's). As calibrate's two ranks measure at once,
 * the reference runs in this process and one forked copy at once. The machine may be loaded by others: each
 * round times the reference just before and just after calibrate (best of
 * 5 each, the better kept), and up to 3 rounds run; one round within
 * bounds passes. The machine file calibrate writes (--machine-out) must load
 * and give the calibration file's figures back (one node of 2 devices).
 * Exit 0 pass, 1 fail. */
#define _GNU_SOURCE
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shardbench/machine.h"
#include "shardbench/search.h"

enum { RANKS = 2, N = 256, ELEMS = 1 << 20, WORDS = 4096, BEST_OF = 5, ROUNDS = 3 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best-of-5 rates: GEMM multiply-adds/s and add elements/s. As calibrate's
 * ranks all measure at once, `peers` forked copies of this process run the
 * same loops at the same time (they share the memory bandwidth as the
 * ranks do); this process's figures are the ones returned. */
static void reference(const float *a, const float *b, float *c, const float *x, const float *y,
                      float *z, int peers, double *macs, double *eps)
{
    pid_t kids[16];
    int nk = 0;
    for (int p = 0; p < peers && p < 16; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int k = 0; k < BEST_OF + 2; k++) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N,
                            0.0f, c, N);
                for (int i = 0; i < ELEMS; i++)
                    z[i] = x[i] + y[i];
            }
            _exit(0);
        }
        if (pid > 0)
            kids[nk++] = pid;
    }
    double tg = 1e30, te = 1e30;
    for (int k = 0; k < BEST_OF; k++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c,
                    N);
        double t1 = now();
        for (int i = 0; i < ELEMS; i++)
            z[i] = x[i] + y[i];
        double t2 = now();
        tg = fmin(tg, t1 - t0);
        te = fmin(te, t2 - t1);
    }
    for (int k = 0; k < nk; k++)
        waitpid(kids[k], NULL, 0);
    *macs = (double)N * N * N / tg;
    *eps = ELEMS / te;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: calibrate_rate SHARDBENCH MPIEXEC\n");
        return 2;
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N),
          *c = malloc(sizeof(float) * N * N), *x = malloc(sizeof(float) * ELEMS),
          *y = malloc(sizeof(float) * ELEMS), *z = malloc(sizeof(float) * ELEMS);
    if (!a || !b || !c || !x || !y || !z)
        return 1;
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.2f;
    }
    for (int i = 0; i < ELEMS; i++) {
        x[i] = (float)(i % 3);
        y[i] = (float)(i % 11);
    }
    char dir[] = "/tmp/calibrate_rate.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char cal[128], out[128], mach[128], cmd[2048];
    snprintf(cal, sizeof cal, "%s/cal.txt", dir);
    snprintf(mach, sizeof mach, "%s/here.machine", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd,
             "timeout -k 5 120 %s --oversubscribe -np %d %s calibrate --out %s --size %d "
             "--elems %d --words %d --reps 5 --machine-out %s > %s 2>&1",
             argv[2], RANKS, argv[1], cal, N, ELEMS, WORDS, mach, out);
    int ok = 0;
    for (int round = 1; round <= ROUNDS && !ok; round++) {
        if (system(cmd) != 0) {
            fprintf(stderr, "calibrate failed: %s\n", cmd);
            char show[256];
            snprintf(show, sizeof show, "cat %s >&2", out);
            (void)!system(show);
            break;
        }
        /* the threads of calibrate's ranks ("# rank 0: cpus ..., threads T (...)") */
        int threads = 1;
        FILE *f = fopen(out, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            char *t = strstr(line, "), threads ");
            if (!strncmp(line, "# rank 0: cpus ", 15) && t)
                threads = atoi(t + 11);
        }
        if (f)
            fclose(f);
        openblas_set_num_threads(threads > 0 ? threads : 1);
        double m1, e1, m2, e2;
        reference(a, b, c, x, y, z, RANKS - 1, &m1, &e1); /* calibrate ran just before */
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        sb_error err = {0};
        if (sb_calibration_load(cal, &cp, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            break;
        }
        sb_machine mc;
        sb_cost_params mp;
        sb_cost_params_default(&mp);
        if (sb_machine_load(mach, &mc, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            break;
        }
        sb_machine_cost_params(&mc, &mp);
        double fig[5][2] = {{cp.tflops, mp.tflops}, {cp.gbs, mp.gbs}, {cp.latency_us, mp.latency_us},
                            {cp.elem_ratio, mp.elem_ratio}, {cp.conv_ratio, mp.conv_ratio}};
        int same = mc.devices_per_node == RANKS && mc.nodes == 1 && mp.word_bytes == cp.word_bytes;
        for (int k = 0; k < 5; k++)
            same = same && fabs(fig[k][0] - fig[k][1]) <= 2e-5 * fabs(fig[k][0]);
        if (!same) {
            fprintf(stderr, "the machine file %s does not give the calibration's figures back\n",
                    mach);
            break;
        }
        reference(a, b, c, x, y, z, RANKS - 1, &m2, &e2);
        double macs = fmax(m1, m2), eps = fmax(e1, e2);
        double gemm_ratio = cp.tflops * 1e12 / macs;
        double elem_ratio = cp.elem_ratio / (macs / eps);
        ok = gemm_ratio >= 0.5 && gemm_ratio <= 2.0 && elem_ratio >= 0.125 && elem_ratio <= 8.0;
        printf("round %d (%d thread%s): calibrate tflops %.4g vs sgemm here %.4g (x%.2f, "
               "bound 2); elem_ratio %.4g vs %.4g here (x%.2f, bound 8): %s\n",
               round, threads, threads == 1 ? "" : "s", cp.tflops, macs / 1e12, gemm_ratio,
               cp.elem_ratio, macs / eps, elem_ratio, ok ? "ok" : "out of bounds");
    }
    unlink(cal);
    unlink(mach);
    unlink(out);
    rmdir(dir);
    free(a), free(b), free(c), free(x), free(y), free(z);
    return ok ? 0 : 1;
}
