/* cmd_calibrate.c: `mpirun -np P shardbench calibrate`: measures the
 * calibrated cost model's constants on this machine, through the backend
 * table the runtime uses (so the same program calibrates the cpu and the
 * cuda backend), and writes them as a calibration file for `search`,
 * `prune`, `candidates` and `bench --calibration FILE`, and as a machine
 * file (docs/machines.md) of one node of P devices for `--machine FILE`.
 *
 * Every rank measures at once, as in a training step where all devices
 * compute together (on a shared CPU they also contend, as they do then):
 *   GEMM    an n x n x n sgemm (gemm_batched, batch 1): multiply-adds/s
 *   elem    a 2-input add of `elems` floats (add_forward): elements/s
 *   link    an all-reduce of `words` floats over all ranks (the backend's
 *           allreduce): bus bandwidth 2(q-1)/q * bytes / time
 *   latency an all-reduce of 1 float: time / 2(q-1) per message step
 *   conv    a 3x3 convolution (8 x 64 x 28 x 28 -> 64 channels, padding 1),
 *           forward + backward data + backward filter: multiply-adds/s,
 *           as a ratio to the GEMM's (the backend's convolutions are not a
 *           plain GEMM: im2col, oneDNN, cuDNN)
 * Each figure is the median of --reps timed runs after one warm-up, and
 * the per-device figures are averaged over the ranks. */
#include <getopt.h>
#include <math.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "cli.h"
#include "threads.h"
#include "shardbench/machine.h"
#include "shardbench/runtime.h"

typedef struct {
    const char *backend, *out, *machine_out;
    int size, reps, quiet, keep_binding;
    long elems, words;
} cal_args;

static void calibrate_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P shardbench calibrate [options]      (P >= 2)\n"
            "\n"
            "Measures GEMM throughput, elementwise throughput, all-reduce bandwidth and\n"
            "per-message latency on the P ranks, and writes a calibration file: the\n"
            "cost model's constants for this machine (search --calibration FILE).\n"
            "\n"
            "      --backend B     cpu (default) or cuda\n"
            "      --out FILE      calibration file (default results/calibration-BACKEND.txt)\n"
            "      --machine-out FILE  the same figures as a machine file of one node of P\n"
            "                      devices (default machines/cpu-here.machine for the cpu\n"
            "                      backend, machines/BACKEND-here.machine else; 'none': no\n"
            "                      machine file): search --machine FILE\n"
            "      --size N        GEMM size n (n x n x n; default 1024 cpu, 8192 cuda)\n"
            "      --elems N       elementwise add length (default 4194304)\n"
            "      --words N       all-reduce length in floats (default 4194304)\n"
            "      --reps N        timed runs per figure, median (default 5)\n"
            "      --quiet         no table, just the file\n"
            "      --keep-binding  keep the launcher's default binding (else each rank\n"
            "                      runs on its share of the node's cores, as `run` does)\n");
}

static int parse_long(const char *s, const char *what, long lo, long hi, long *out, sb_error *err)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s || !isdigit((unsigned char)s[0]) || v < lo || v > hi)
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not a count in %ld..%ld", what, s, lo, hi);
    *out = v;
    return 0;
}

static int parse_cal_args(int argc, char **argv, cal_args *a, sb_error *err)
{
    static const struct option opts[] = {
        {"backend", required_argument, 0, 'b'}, {"out", required_argument, 0, 'o'},
        {"size", required_argument, 0, 'n'},    {"elems", required_argument, 0, 'e'},
        {"words", required_argument, 0, 'w'},   {"reps", required_argument, 0, 'r'},
        {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
        {"keep-binding", no_argument, 0, 'k'}, {"machine-out", required_argument, 0, 'M'},
        {0, 0, 0, 0},
    };
    memset(a, 0, sizeof *a);
    a->backend = "cpu";
    a->reps = 5;
    a->elems = 4194304;
    a->words = 4194304;
    optind = 1;
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': a->backend = optarg; break;
        case 'o': a->out = optarg; break;
        case 'M': a->machine_out = optarg; break;
        case 'n':
            if (parse_long(optarg, "--size", 16, 65536, &v, err))
                return -1;
            a->size = (int)v;
            break;
        case 'e':
            if (parse_long(optarg, "--elems", 1024, 1L << 30, &a->elems, err))
                return -1;
            break;
        case 'w':
            if (parse_long(optarg, "--words", 1024, 1L << 30, &a->words, err))
                return -1;
            break;
        case 'r':
            if (parse_long(optarg, "--reps", 1, 1000, &v, err))
                return -1;
            a->reps = (int)v;
            break;
        case 'q': a->quiet = 1; break;
        case 'k': a->keep_binding = 1; break;
        case 'h': return 1;
        default:
            return sb_fail(err, SB_EXIT_INPUT, "calibrate: unknown or incomplete option '%s'",
                           argv[optind - 1]);
        }
    }
    if (optind < argc)
        return sb_fail(err, SB_EXIT_INPUT, "calibrate: unexpected argument '%s'", argv[optind]);
    if (!a->size)
        a->size = strcmp(a->backend, "cuda") ? 1024 : 8192;
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double now(const sb_backend *be)
{
    if (be->sync)
        be->sync();
    return MPI_Wtime();
}

/* Fills n backend floats with small values (host staging through from_host). */
static float *backend_floats(const sb_backend *be, size_t n, float scale)
{
    float *d = be->alloc(n * sizeof(float)), *h = malloc(n * sizeof(float));
    if (!d || !h) {
        if (d)
            be->release(d);
        free(h);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = scale * (float)((int)(i % 17) - 8);
    be->from_host(d, h, n);
    free(h);
    return d;
}

typedef struct {
    double gemm_s, elem_s, ar_s, lat_s, conv_s;
} timings;

/* the convolution measured: B C H W -> N, 3x3, stride 1, padding 1 */
enum { CB = 8, CC = 64, CH = 28, CW = 28, CN = 64, CR = 3 };
static const double conv_macs = 3.0 * CB * CN * CH * CW * CC * CR * CR; /* fwd + 2 bwd */

/* The four measurements on this rank (collective: the all-reduces). */
static int measure(const sb_backend *be, const cal_args *a, MPI_Comm comm, timings *out,
                   sb_error *err)
{
    size_t nn = (size_t)a->size * (size_t)a->size;
    float *A = backend_floats(be, nn, 0.01f), *B = backend_floats(be, nn, 0.01f),
          *C = backend_floats(be, nn, 0.0f), *x = backend_floats(be, (size_t)a->elems, 1.0f),
          *y = backend_floats(be, (size_t)a->elems, 1.0f),
          *z = backend_floats(be, (size_t)a->elems, 0.0f),
          *w = backend_floats(be, (size_t)a->words, 1.0f), *one = backend_floats(be, 1, 1.0f);
    size_t cin = (size_t)CB * CC * CH * CW, cout = (size_t)CB * CN * CH * CW,
           cw = (size_t)CN * CC * CR * CR,
           cwork = be->conv->conv2d_work_floats(CC, CR, CR, CN, CH, CW);
    float *cx = backend_floats(be, cin, 0.1f), *cdx = backend_floats(be, cin, 0.0f),
          *cy = backend_floats(be, cout, 0.0f), *cdy = backend_floats(be, cout, 0.1f),
          *cwt = backend_floats(be, cw, 0.01f), *cdw = backend_floats(be, cw, 0.0f),
          *cwk = cwork ? backend_floats(be, cwork, 0.0f) : NULL;
    int ok = A && B && C && x && y && z && w && one && cx && cdx && cy && cdy && cwt && cdw
             && (cwk || !cwork),
        all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    int rc = 0;
    if (!all) {
        rc = sb_fail(err, SB_EXIT_INPUT, "calibrate: out of %s memory for the buffers (try a "
                     "smaller --size, --elems or --words)", be->name);
        goto out;
    }
    double *t = malloc(sizeof(double) * (size_t)(a->reps + 1));
    const float *ins[2] = {x, y};
    int n = a->size;
    /* GEMM: C = A B, row-major n x n */
    for (int r = 0; r <= a->reps; r++) {
        MPI_Barrier(comm);
        double t0 = now(be);
        be->gemm->gemm_batched(0, 0, n, n, n, 1.0f, A, n, 0, B, n, 0, 0.0f, C, n, 0, 1);
        t[r] = now(be) - t0;
    }
    out->gemm_s = median(t + 1, a->reps);
    for (int r = 0; r <= a->reps; r++) {
        MPI_Barrier(comm);
        double t0 = now(be);
        be->sum->add_forward(z, ins, 2, (size_t)a->elems, 0);
        t[r] = now(be) - t0;
    }
    out->elem_s = median(t + 1, a->reps);
    for (int r = 0; r <= a->reps; r++) {
        MPI_Barrier(comm);
        double t0 = now(be);
        be->conv->conv2d_forward(cy, cx, cwt, NULL, cwk, CB, CC, CH, CW, CN, CR, CR, 1, 1, 1, 1, CH,
                                 CW, 1, 1, 1, 0);
        be->conv->conv2d_backward_data(cdx, cwk, cdy, NULL, cwt, CB, CC, CH, CW, CN, CR, CR, 1, 1,
                                       1, 1, CH, CW, 1, 1, 1);
        be->conv->conv2d_backward_filter(cdw, NULL, cwk, cdy, NULL, cx, CB, CC, CH, CW, CN, CR, CR,
                                         1, 1, 1, 1, CH, CW, 1, 1, 1);
        t[r] = now(be) - t0;
    }
    out->conv_s = median(t + 1, a->reps);
    for (int r = 0; r <= a->reps && !rc; r++) {
        MPI_Barrier(comm);
        double t0 = now(be);
        if (be->allreduce(w, (size_t)a->words, MPI_SUM, comm))
            rc = sb_fail(err, SB_EXIT_INTERNAL, "calibrate: the all-reduce failed");
        t[r] = now(be) - t0;
    }
    out->ar_s = median(t + 1, a->reps);
    /* latency: many tiny all-reduces, the median of their times */
    int nl = 50;
    double *tl = malloc(sizeof(double) * (size_t)nl);
    for (int r = 0; r < nl && !rc; r++) {
        MPI_Barrier(comm);
        double t0 = now(be);
        if (be->allreduce(one, 1, MPI_SUM, comm))
            rc = sb_fail(err, SB_EXIT_INTERNAL, "calibrate: the all-reduce failed");
        tl[r] = now(be) - t0;
    }
    out->lat_s = median(tl, nl);
    free(tl);
    free(t);
out:;
    float *bufs[] = {A, B, C, x, y, z, w, one, cx, cdx, cy, cdy, cwt, cdw, cwk};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            be->release(bufs[i]);
    return rc;
}

static double mean_over_ranks(double v, MPI_Comm comm)
{
    int n;
    double s = 0;
    MPI_Comm_size(comm, &n);
    MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, comm);
    return s / n;
}

/* A missing folder of a default output path, made (a failure shows when
 * the file is written). */
static void make_parent(char *path)
{
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    *slash = '\0';
    if (access(path, F_OK))
        (void)mkdir(path, 0777);
    *slash = '/';
}

/* The machine file of the calibration cp (rank 0): one node of `ranks`
 * devices, each with its share of the host's memory, and the add's
 * traffic (3 floats an element at eps elements/s) as memory bandwidth.
 * mpath gets the path written, "" for none. */
static int write_machine(const cal_args *a, const char *backend, const sb_cost_params *cp,
                         int ranks, double eps, const char *comment, char *mpath, size_t n,
                         sb_error *err)
{
    mpath[0] = '\0';
    if (a->machine_out && !strcmp(a->machine_out, "none"))
        return 0;
    if (a->machine_out)
        snprintf(mpath, n, "%s", a->machine_out);
    else
        snprintf(mpath, n, "machines/%s-here.machine", backend);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double mem_gib = pages > 0 && page > 0 ? (double)pages * (double)page / ranks / 1073741824.0
                                           : 1.0;
    sb_machine mc;
    if (sb_machine_from_cost_params(cp, ranks, mem_gib, eps * 12.0 / 1e9, &mc, err))
        return -1;
    if (!a->machine_out)
        make_parent(mpath);
    char text[1200];
    snprintf(text, sizeof text,
             "%s. Peaks are the measured GEMM rate in multiply-adds (the unit of the cost "
             "model), as the calibration file's tflops; one node, the inter-node link is the "
             "measured one", comment);
    return sb_machine_save(mpath, &mc, text, err);
}

int cmd_calibrate(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, size, status = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    sb_error err = {0};
    cal_args a;
    int prc = parse_cal_args(argc, argv, &a, &err);
    const sb_backend *be = NULL;
    if (prc == 1) {
        if (rank == 0)
            calibrate_usage(stdout);
        MPI_Finalize();
        return 0;
    }
    if (!prc && size < 2)
        prc = sb_fail(&err, SB_EXIT_INPUT, "calibrate: %d rank: the link is measured between "
                      "ranks, run it as `mpirun -np P shardbench calibrate` with P >= 2", size);
    if (!prc && !(be = sb_backend_get(a.backend, &err)))
        prc = -1;
    if (!prc
        && sb_backend_require(be, SB_FAM(GEMM) | SB_FAM(SUM) | SB_FAM(CONV),
                              "calibrate's measurements", &err))
        prc = -1;
    /* the same verdict everywhere (arguments are the same on every rank, the
     * backend may not be) */
    int bad = prc != 0, me = bad ? rank : size, first = size;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first < size) { /* the first rank that failed says why, once */
        if (rank == first)
            status = cli_fail(&err);
        else
            status = bad && err.code ? err.code : SB_EXIT_INPUT;
        if (rank == 0 && first != 0)
            fprintf(stderr, "shardbench: calibrate: rank %d failed to start\n", first);
        sb_backend_finalize(be); /* NCCL communicators, before MPI_Finalize */
        MPI_Finalize();
        return status;
    }
    sb_cpuset cpus; /* the rank's share of the cores, its kernel threads */
    cli_cpu_setup(comm, a.keep_binding, &cpus);
    timings t = {0};
    int rc = measure(be, &a, comm, &t, &err), any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MIN, comm);
    if (rc || any) {
        status = rc ? cli_fail(&err) : SB_EXIT_INTERNAL;
        sb_backend_finalize(be); /* NCCL communicators, before MPI_Finalize */
        MPI_Finalize();
        return status;
    }
    double n3 = (double)a.size * a.size * a.size;
    double macs = mean_over_ranks(n3 / t.gemm_s, comm);
    double eps = mean_over_ranks((double)a.elems / t.elem_s, comm);
    double q = size;
    double bus = 2.0 * (q - 1.0) / q * (double)a.words * 4.0;
    double gbs = mean_over_ranks(bus / t.ar_s, comm) / 1e9;
    double lat = mean_over_ranks(t.lat_s / (2.0 * (q - 1.0)), comm) * 1e6;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.tflops = macs / 1e12;
    cp.gbs = gbs;
    cp.word_bytes = 4.0;
    cp.elem_ratio = macs / eps;
    cp.latency_us = lat;
    double conv_rate = mean_over_ranks(conv_macs / t.conv_s, comm);
    cp.conv_ratio = macs / conv_rate;
    if (rank == 0) {
        char path[4096], host[256] = "", when[64];
        if (a.out)
            snprintf(path, sizeof path, "%s", a.out);
        else
            snprintf(path, sizeof path, "results/calibration-%s.txt", be->name);
        gethostname(host, sizeof host - 1);
        time_t now_t = time(NULL);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now_t));
        char comment[1024];
        snprintf(comment, sizeof comment,
                 "shardbench calibrate: %s backend, %d ranks on %s, %s; gemm %d^3, add %ld, "
                 "all-reduce %ld floats, median of %d",
                 be->name, size, host, when, a.size, a.elems, a.words, a.reps);
        if (!a.out)
            make_parent(path); /* results/ may not exist yet */
        char mpath[4096] = "";
        if (sb_calibration_save(path, &cp, comment, &err)
            || write_machine(&a, be->name, &cp, size, eps, comment, mpath, sizeof mpath, &err)) {
            status = cli_fail(&err);
        } else if (!a.quiet) {
            printf("# calibration of the %s backend on %d ranks (%s)\n", be->name, size, host);
            char line[512];
            sb_cpuset_describe(&cpus, line, sizeof line);
            printf("# rank 0: %s\n", line);
            printf("%-12s %14s  %s\n", "figure", "value", "from");
            printf("%-12s %14.4g  %.3g GFLOP/s per rank (%d^3 sgemm, %.3g ms)\n", "tflops",
                   cp.tflops, 2.0 * macs / 1e9, a.size, t.gemm_s * 1e3);
            printf("%-12s %14.4g  %.3g Gelem/s per rank (add of %ld floats)\n", "elem_ratio",
                   cp.elem_ratio, eps / 1e9, a.elems);
            printf("%-12s %14.4g  all-reduce of %ld floats in %.3g ms\n", "gbs", cp.gbs,
                   a.words, t.ar_s * 1e3);
            printf("%-12s %14.4g  1-float all-reduce in %.3g us\n", "latency_us", cp.latency_us,
                   t.lat_s * 1e6);
            printf("%-12s %14.4g  %.3g GFLOP/s per rank (3x3 conv fwd+bwd, %.3g ms)\n",
                   "conv_ratio", cp.conv_ratio, 2.0 * conv_rate / 1e9, t.conv_s * 1e3);
            printf("%-12s %14.4g\n", "word_bytes", cp.word_bytes);
            printf("wrote %s (search --calibration %s)\n", path, path);
            if (mpath[0])
                printf("wrote %s (search --machine %s)\n", mpath, mpath);
        }
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, comm);
    sb_backend_finalize(be); /* NCCL communicators, before MPI_Finalize */
    MPI_Finalize();
    return status;
}
