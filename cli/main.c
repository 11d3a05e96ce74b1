/* main.c: the `shardbench` command. Dispatches to subcommands; prints the
 * version and what was compiled in. All the work is in libshardbench. */
#include <cblas.h>
#include <mpi.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "build_info.h"
#include "cli.h"
#include "shardbench/runtime.h"
#include "shardbench/cpuset.h"
#ifdef SB_HAVE_CUDA
#include "../runtime/cuda/cuda_backend.h"
#endif

/* The commands: one line each (name, function in its own cli/cmd_*.c, one-line
 * summary). Add a command by adding its line. */
static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"search", cmd_search, "find the best strategy for a model and device count"},
    {"paper", cmd_paper, "search the paper's models over device counts, print the strategy tables"},
    {"run", cmd_run, "train a model under a strategy on P MPI ranks (mpirun -np P)"},
    {"candidates", cmd_candidates, "mesh-shape x layout candidates of a model, ranked by predicted cost"},
    {"prune", cmd_prune, "survivors of pase, dp, expert, mcmc and candidates, written as strategy files"},
    {"export", cmd_export, "a strategy file as DTensor, PyTorch, JAX or Mesh-TF layouts"},
    {"bench", cmd_bench, "measure the survivors of each model and P under one run id (prune, then run)"},
    {"report", cmd_report, "Markdown/CSV tables of a run (Table I, Table II, speedups, rho) from the database"},
    {"regress", cmd_regress, "compare the step times of two runs; exit 1 on a confirmed regression"},
    {"nightly", cmd_nightly, "bench this build, hold it to the last good night, re-measure suspects; exit 1 on a confirmed regression"},
    {"plot", cmd_plot, "gnuplot figures (PNG, SVG) of a run from the database: speedups, fidelity, search time, trend"},
    {"import", cmd_import, "convert an ONNX model into a model file (-m FILE.onnx also imports on the fly)"},
    {"calibrate", cmd_calibrate, "measure this machine's GEMM, elementwise, link and latency figures (mpirun -np P)"},
    {"validate", cmd_validate, "price published Megatron-LM runs as they ran and hold the predictions to their step times"},
    {"profile", cmd_profile, "measure every op config's seconds, relayouts and collectives for the predictive cost model (mpirun -np P)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: shardbench COMMAND [options]\n\n"
               "Choose how to parallelize DNN training (PaSE's exact search), and run it.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n  shardbench COMMAND --help   options of a command\n"
               "  shardbench --version        version, commit, compiled-in backends\n");
}

static void version(void)
{
    printf("shardbench %s (commit %s, %s build, %s)\n", SB_VERSION, SB_GIT_COMMIT, SB_BUILD_TYPE,
           SB_C_COMPILER);
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    mpi[strcspn(mpi, ",\n")] = '\0';
    printf("libraries: SQLite %s, OpenBLAS (%s), %s\n", sqlite3_libversion(), openblas_get_config(),
           mpi);
    sb_error err = {0};
    printf("backends: cpu (OpenBLAS + MPI, %s, %s)",
           sb_cpu_openmp() ? "OpenMP kernel loops" : "single-threaded kernel loops: built without OpenMP",
           sb_dnnl_available() ? "oneDNN convolutions" : "im2col convolutions: no oneDNN");
    if (sb_backend_cuda_get(&err))
        printf(", cuda");
    else
        printf("; cuda: %s", err.msg);
    printf("\n");
#ifdef SB_HAVE_CUDA
    char cv[512];
    printf("cuda libraries: %s\n", sb_cuda_versions(cv, sizeof cv));
#endif
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run") || !strcmp(cmd, "calibrate") || !strcmp(cmd, "profile")) {
        /* the commands that run the CPU kernels: widen a default binding to
         * the rank's share of the cores, then one re-execution sets both
         * that affinity and the passive wait policy for every library */
        int widened = sb_cpuset_widen(argc, argv);
        sb_cpu_passive_wait(argv); /* returns when OMP_WAIT_POLICY was set */
        if (widened)
            sb_cpuset_reexec(argv);
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        version();
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "shardbench: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
