/* perf/checkpoint.c: save and restore bandwidth of sharded checkpoints
 * (sb_checkpoint_save / sb_checkpoint_restore) against the disk's own
 * sequential bandwidth, measured in the same run on the same folder.
 *
 * The model is synthetic: 16 weights (rows, cols) f32 and 16 biases (cols),
 * about --mib MiB in all. Saved as a model-parallel model on a 2-D mesh
 * |x=2,y=P/2| (weights sharding_specs:x,y: every rank writes one distinct
 * block of each weight; biases replicated, written by rank 0 alone, as
 * data-parallel replicas are) and restored into another mesh and layout,
 * |r=P| with the weights split by rows (each rank reads the rows it needs
 * from two shard files) and the biases replicated. The restored values are
 * checked (#wrong, summed over ranks: must be 0).
 *
 * The disk figure is dd-style, one stream on rank 0 while the others wait:
 * write() of the same byte count in 4 MiB pieces, fsync, close; then the
 * file is dropped from the page cache (posix_fadvise POSIX_FADV_DONTNEED;
 * what stays resident is measured with mincore and printed) and read back
 * with read(). The checkpoint files are dropped the same way before each
 * restore. Each repetition runs disk write, disk read, save, restore in that
 * order (files removed between, untimed); each figure is the median over
 * repetitions of the slowest rank's time. MB/s = 1e6 bytes per second of
 * the model's bytes; fraction = checkpoint MB/s / disk MB/s (target >= 0.5).
 *
 *   mpirun -np 4 perf/checkpoint [--mib 1024] [--dir DIR ($TMPDIR, /tmp)] [-n reps (3)]
 *                                 [--db FILE]
 *
 * Not here: other dtypes than f32, async saves, many nodes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/dtensor.h"
#include "shardbench/results.h"

#define NW 16               /* weights (and biases) */
#define DD_PIECE (4u << 20) /* dd's block size */

static int P, me;

static void die(const char *what)
{
    fprintf(stderr, "perf/checkpoint: rank %d: %s\n", me, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void die_errno(const char *what, const char *path)
{
    char m[4352];
    snprintf(m, sizeof m, "%s '%s': %s", what, path, strerror(errno));
    die(m);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

/* The value of element `lin` (row-major global index) of tensor t: small
 * integers, exact in f32. */
static float fval(int t, int64_t lin) { return (float)((lin * 40503 + t * 977) % 65521); }

/* Fills (check = 0) or counts mismatches in (check = 1) buf, laid out as
 * box b of a tensor with `cols` columns (1-D tensors: cols = 0). */
static int64_t visit(float *buf, int t, const sb_box *b, int64_t cols, int check)
{
    int64_t r0 = b->lo[0], r1 = b->hi[0], c0 = 0, c1 = 1, k = 0, wrong = 0;
    if (b->nd == 2) {
        c0 = b->lo[1];
        c1 = b->hi[1];
    }
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++, k++) {
            float v = fval(t, b->nd == 2 ? r * cols + c : r);
            if (check)
                wrong += buf[k] != v;
            else
                buf[k] = v;
        }
    return wrong;
}

static double now(void) { return MPI_Wtime(); }

static double slowest(double t)
{
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double med, lo, hi;
} figure;

static figure summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    figure f = {n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t[0], t[n - 1]};
    return f;
}

/* ---- page cache ------------------------------------------------------------- */

/* Drops a file's pages from the page cache (they are clean: fsynced).
 * Missing files are fine (a rank that writes no shard has none). */
static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return;
        die_errno("cannot open", path);
    }
    int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (e)
        fprintf(stderr, "perf/checkpoint: posix_fadvise(DONTNEED) '%s': %s\n", path, strerror(e));
    close(fd);
}

/* Bytes of the file resident in the page cache (mincore); *size gets its
 * size. 0 for a missing file. */
static int64_t resident_bytes(const char *path, int64_t *size)
{
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        close(fd);
        return 0;
    }
    *size = (int64_t)st.st_size;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return 0;
    long pg = sysconf(_SC_PAGESIZE);
    size_t npg = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
    unsigned char *v = xmalloc(npg);
    int64_t res = 0;
    if (mincore(m, (size_t)st.st_size, v) == 0)
        for (size_t i = 0; i < npg; i++)
            res += v[i] & 1;
    free(v);
    munmap(m, (size_t)st.st_size);
    res *= pg;
    return res < *size ? res : *size;
}

/* ---- the disk, dd-style (rank 0) ----------------------------------------------- */

static double dd_write(const char *path, int64_t bytes, const char *buf)
{
    double t0 = now();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        die_errno("cannot create", path);
    for (int64_t done = 0; done < bytes;) {
        size_t n = bytes - done < DD_PIECE ? (size_t)(bytes - done) : DD_PIECE;
        ssize_t k = write(fd, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die_errno("cannot write", path);
        done += k;
    }
    if (fsync(fd) != 0)
        die_errno("cannot fsync", path);
    if (close(fd) != 0)
        die_errno("cannot close", path);
    return now() - t0;
}

static double dd_read(const char *path, int64_t bytes, char *buf)
{
    double t0 = now();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die_errno("cannot open", path);
    int64_t done = 0;
    for (;;) {
        ssize_t k = read(fd, buf, DD_PIECE);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            die_errno("cannot read", path);
        if (k == 0)
            break;
        done += k;
    }
    close(fd);
    double t = now() - t0;
    if (done != bytes)
        die("the dd file came back short");
    return t;
}

/* ---- the model ------------------------------------------------------------------- */

typedef struct {
    char name[2 * NW][16];
    int64_t shape[2 * NW][2];
    int nd[2 * NW];
    sb_box *save_boxes;      /* [2 NW][P] */
    sb_box restore_box[2 * NW];
    float *data[2 * NW];     /* this rank's saved shard */
    float *dest[2 * NW];     /* this rank's restore target */
    int64_t rows, cols, bytes;
    char save_layout[2][8192], restore_layout[2][8192]; /* weights, biases */
} model;

static void layouts(model *m)
{
    sb_error err = {0};
    int X = P % 2 == 0 ? 2 : 1, Y = P / X, sizes[2] = {X, Y};
    const char *ax[2] = {"x", "y"}, *rx[1] = {"r"};
    const char *w_save[2] = {"x", "y"}, *b_any[1] = {SB_UNSHARDED};
    const char *w_rest[2] = {"r", SB_UNSHARDED};
    sb_mesh ms, mr;
    sb_layout lws, lbs, lwr, lbr;
    if (sb_mesh_make("save", 2, ax, sizes, &ms, &err) || sb_mesh_make("restore", 1, rx, &P, &mr, &err)
        || sb_layout_make(&ms, 2, w_save, &lws, &err) || sb_layout_make(&ms, 1, b_any, &lbs, &err)
        || sb_layout_make(&mr, 2, w_rest, &lwr, &err) || sb_layout_make(&mr, 1, b_any, &lbr, &err))
        die(err.msg);
    sb_layout_str(&lws, m->save_layout[0], sizeof m->save_layout[0]);
    sb_layout_str(&lbs, m->save_layout[1], sizeof m->save_layout[1]);
    sb_layout_str(&lwr, m->restore_layout[0], sizeof m->restore_layout[0]);
    sb_layout_str(&lbr, m->restore_layout[1], sizeof m->restore_layout[1]);
    sb_box *rb = xmalloc(sizeof *rb * (size_t)P);
    for (int i = 0; i < 2 * NW; i++) {
        int w = i < NW;
        if (sb_layout_boxes(w ? &lws : &lbs, m->shape[i], P, &m->save_boxes[(size_t)i * P], &err)
            || sb_layout_boxes(w ? &lwr : &lbr, m->shape[i], P, rb, &err))
            die(err.msg);
        m->restore_box[i] = rb[me];
    }
    free(rb);
}

/* Weights (rows, cols) with rows a multiple of P and cols of P/2, biases
 * (cols): about mib MiB in all. */
static void model_make(model *m, int64_t mib)
{
    memset(m, 0, sizeof *m);
    int Y = P % 2 == 0 ? P / 2 : P;
    m->cols = 4096 - 4096 % Y;
    m->rows = mib * (1 << 20) / NW / 4 / m->cols / P * P;
    if (m->rows < P)
        m->rows = P;
    m->save_boxes = xmalloc(sizeof *m->save_boxes * (size_t)(2 * NW * P));
    for (int i = 0; i < 2 * NW; i++) {
        int w = i < NW;
        snprintf(m->name[i], sizeof m->name[i], "%s%02d", w ? "w" : "b", w ? i : i - NW);
        m->nd[i] = w ? 2 : 1;
        m->shape[i][0] = w ? m->rows : m->cols;
        m->shape[i][1] = w ? m->cols : 0;
        m->bytes += 4 * (w ? m->rows * m->cols : m->cols);
    }
    layouts(m);
    for (int i = 0; i < 2 * NW; i++) {
        const sb_box *b = &m->save_boxes[(size_t)i * P + me];
        m->data[i] = xmalloc(sizeof(float) * (size_t)sb_box_volume(b));
        visit(m->data[i], i, b, m->cols, 0);
        m->dest[i] = xmalloc(sizeof(float) * (size_t)sb_box_volume(&m->restore_box[i]));
    }
}

static void model_free(model *m)
{
    for (int i = 0; i < 2 * NW; i++) {
        free(m->data[i]);
        free(m->dest[i]);
    }
    free(m->save_boxes);
}

static double save(const model *m, const char *prefix)
{
    sb_ckpt_tensor t[2 * NW];
    for (int i = 0; i < 2 * NW; i++)
        t[i] = (sb_ckpt_tensor){m->name[i], m->nd[i], m->shape[i],
                                &m->save_boxes[(size_t)i * P], m->data[i]};
    sb_error err = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (sb_checkpoint_save(MPI_COMM_WORLD, prefix, t, 2 * NW, NULL, &err))
        die(err.msg);
    return slowest(now() - t0);
}

/* Restores into the other layout; *wrong gets the mismatches over all ranks. */
static double restore(model *m, const char *prefix, int64_t *wrong)
{
    sb_ckpt_target g[2 * NW];
    for (int i = 0; i < 2 * NW; i++) {
        memset(m->dest[i], 0, sizeof(float) * (size_t)sb_box_volume(&m->restore_box[i]));
        g[i] = (sb_ckpt_target){m->name[i], m->nd[i], m->shape[i], m->restore_box[i], m->dest[i]};
    }
    sb_error err = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (sb_checkpoint_restore(MPI_COMM_WORLD, prefix, g, 2 * NW, NULL, &err))
        die(err.msg);
    double t = slowest(now() - t0);
    int64_t w = 0;
    for (int i = 0; i < 2 * NW; i++)
        w += visit(m->dest[i], i, &m->restore_box[i], m->cols, 1);
    MPI_Allreduce(&w, wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return t;
}

/* This rank's checkpoint files: its shard file, and the index on rank 0. */
static void own_files(const char *prefix, char (*f)[4200], int *n)
{
    *n = 0;
    snprintf(f[(*n)++], 4200, "%s.shard-%05d-of-%05d", prefix, me, P);
    if (me == 0)
        snprintf(f[(*n)++], 4200, "%s.index", prefix);
}

/* ---- options, table, database ---------------------------------------------------- */

typedef struct {
    int64_t mib;
    int reps;
    const char *dir, *db;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun -np P perf/checkpoint [--mib N (1024)] [--dir DIR (/tmp)] "
               "[-n reps (3)] [--db FILE|none]\n");
}

/* 0: go on; 1: --help; 2: bad usage. */
static int parse_opts(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"mib", required_argument, 0, 'm'}, {"dir", required_argument, 0, 'D'},
        {"reps", required_argument, 0, 'n'}, {"db", required_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'},       {0, 0, 0, 0},
    };
    *o = (opts){1024, 3, "/tmp", SB_DB_DEFAULT_PATH};
    const char *tmp = getenv("TMPDIR");
    if (tmp && *tmp)
        o->dir = tmp;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
        char *end;
        long long v;
        switch (c) {
        case 'm':
        case 'n':
            v = strtoll(optarg, &end, 10);
            if (*end || end == optarg || v < 1 || v > (c == 'm' ? 1 << 20 : 1000)) {
                if (me == 0)
                    fprintf(stderr, "perf/checkpoint: --%s: '%s' is not a valid count\n",
                            c == 'm' ? "mib" : "reps", optarg);
                return 2;
            }
            if (c == 'm')
                o->mib = v;
            else
                o->reps = (int)v;
            break;
        case 'D': o->dir = optarg; break;
        case 'd': o->db = optarg; break;
        case 'h':
            if (me == 0)
                usage(stdout);
            return 1;
        default:
            if (me == 0) {
                fprintf(stderr, "perf/checkpoint: unknown or incomplete option '%s'\n",
                        argv[optind - 1]);
                usage(stderr);
            }
            return 2;
        }
    }
    if (optind < argc) {
        if (me == 0)
            fprintf(stderr, "perf/checkpoint: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

typedef struct {
    const char *what, *kind, *layout;
    figure f;
    double base; /* the disk's MB/s it is held to; 0: none */
} row;

static double mbs(int64_t bytes, double s) { return (double)bytes / s / 1e6; }

static void store(const opts *o, const model *m, const row *rows, int nrows, const char *cmd,
                  const char *mpi)
{
    sb_db *db;
    sb_error err = {0};
    if (sb_db_open(o->db, 0, &db, &err)) {
        fprintf(stderr, "perf/checkpoint: %s (figures not stored)\n", err.msg);
        return;
    }
    char devices[128], versions[512], params[256];
    snprintf(devices, sizeof devices, "%d x cpu rank, dir %s", P, o->dir);
    snprintf(versions, sizeof versions, "mpi=%s", mpi);
    snprintf(params, sizeof params, "mib=%lld,weights=%d,rows=%lld,cols=%lld", (long long)o->mib,
             NW, (long long)m->rows, (long long)m->cols);
    sb_run_meta meta = {.backend = "cpu", .devices = devices, .versions = versions,
                        .command_line = cmd};
    int64_t run;
    if (sb_db_begin_run(db, &meta, &run, &err)) {
        fprintf(stderr, "perf/checkpoint: %s (figures not stored)\n", err.msg);
        sb_db_close(db);
        return;
    }
    for (int i = 0; i < nrows; i++) {
        char json[256];
        snprintf(json, sizeof json, "{\"bytes\": %lld, \"tensors\": %d}", (long long)m->bytes,
                 2 * NW);
        sb_measurement_record rec = {
            .run_id = run, .model = "checkpoint-synthetic", .params = params, .nops = 2 * NW,
            .p = P, .kind = rows[i].kind, .predicted_cost = NAN, .configs_json = json,
            .mesh_layout = rows[i].layout, .step_median_s = rows[i].f.med,
            .step_min_s = rows[i].f.lo, .step_max_s = rows[i].f.hi, .steps = o->reps,
            .status = "ok",
        };
        if (sb_db_record_measurement(db, &rec, NULL, &err))
            fprintf(stderr, "perf/checkpoint: %s (measurement not stored)\n", err.msg);
    }
    if (sb_db_end_run(db, run, &err))
        fprintf(stderr, "perf/checkpoint: %s\n", err.msg);
    else
        printf("# stored as run %lld in %s\n", (long long)run, o->db);
    sb_db_close(db);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) {
        MPI_Finalize();
        return rc == 1 ? 0 : 2;
    }
    struct stat st;
    if (stat(o.dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (me == 0)
            fprintf(stderr, "perf/checkpoint: --dir '%s' is not a folder\n", o.dir);
        MPI_Finalize();
        return 2;
    }
    /* file names unique to this run (rank 0's pid) */
    int tag = (int)getpid();
    MPI_Bcast(&tag, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char prefix[4096], ddpath[4096];
    snprintf(prefix, sizeof prefix, "%s/sbckb-%d.ckpt", o.dir, tag);
    snprintf(ddpath, sizeof ddpath, "%s/sbckb-%d.dd", o.dir, tag);

    model m;
    model_make(&m, o.mib);
    char *buf = NULL;
    if (me == 0) {
        buf = xmalloc(DD_PIECE);
        for (size_t i = 0; i < DD_PIECE; i++)
            buf[i] = (char)(i * 2654435761u >> 13);
    }
    double *tw = xmalloc(sizeof(double) * (size_t)o.reps), *tr = xmalloc(sizeof(double) * (size_t)o.reps);
    double *ts = xmalloc(sizeof(double) * (size_t)o.reps), *tl = xmalloc(sizeof(double) * (size_t)o.reps);
    int64_t wrong_all = 0, dd_res = 0, dd_size = 0, ck_res = 0, ck_size = 0;
    char files[2][4200];
    int nf;
    own_files(prefix, files, &nf);
    for (int it = 0; it < o.reps; it++) {
        /* the disk, one stream on rank 0 */
        if (me == 0) {
            tw[it] = dd_write(ddpath, m.bytes, buf);
            drop_cache(ddpath);
            int64_t sz;
            dd_res += resident_bytes(ddpath, &sz);
            dd_size += sz;
            tr[it] = dd_read(ddpath, m.bytes, buf);
            if (unlink(ddpath) != 0)
                die_errno("cannot remove", ddpath);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        /* the checkpoint, all ranks */
        ts[it] = save(&m, prefix);
        int64_t res[2] = {0, 0}, all[2];
        for (int k = 0; k < nf; k++) {
            int64_t sz;
            drop_cache(files[k]);
            res[0] += resident_bytes(files[k], &sz);
            res[1] += sz;
        }
        MPI_Allreduce(res, all, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        ck_res += all[0];
        ck_size += all[1];
        int64_t wrong;
        tl[it] = restore(&m, prefix, &wrong);
        wrong_all += wrong;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int k = 0; k < nf; k++)
            if (unlink(files[k]) != 0 && errno != ENOENT)
                die_errno("cannot remove", files[k]);
        MPI_Barrier(MPI_COMM_WORLD);
    }

    if (me == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *cut = strchr(lib, ',');
        if (cut)
            *cut = 0;
        cut = strchr(lib, '\n');
        if (cut)
            *cut = 0;
        figure fw = summarize(tw, o.reps), fr = summarize(tr, o.reps);
        figure fs = summarize(ts, o.reps), fl = summarize(tl, o.reps);
        double bw = mbs(m.bytes, fw.med), br = mbs(m.bytes, fr.med);
        row rows[4] = {
            {"disk write (1 stream, write+fsync)", "disk-write", NULL, fw, bw},
            {"disk read (1 stream, cache dropped)", "disk-read", NULL, fr, br},
            {"checkpoint save", "checkpoint-save", m.save_layout[0], fs, bw},
            {"checkpoint restore (other layout)", "checkpoint-restore", m.restore_layout[0], fl, br},
        };
        printf("# perf/checkpoint: %d ranks, %lld bytes (%d weights %lldx%lld f32 + %d biases), "
               "dir %s, median of %d, %s\n", P, (long long)m.bytes, NW, (long long)m.rows,
               (long long)m.cols, NW, o.dir, o.reps, lib);
        printf("# save:    weights %s; biases replicated (rank 0 writes)\n", m.save_layout[0]);
        printf("# restore: weights %s; biases replicated\n", m.restore_layout[0]);
        printf("# page cache after POSIX_FADV_DONTNEED, before reads: dd file %.1f%% resident, "
               "checkpoint files %.1f%%\n", dd_size ? 100.0 * (double)dd_res / (double)dd_size : 0,
               ck_size ? 100.0 * (double)ck_res / (double)ck_size : 0);
        printf("%-36s %12s %9s %9s %9s\n", "what", "bytes", "seconds", "MB/s", "fraction");
        for (int i = 0; i < 4; i++)
            printf("%-36s %12lld %9.3f %9.1f %9.3f\n", rows[i].what, (long long)m.bytes,
                   rows[i].f.med, mbs(m.bytes, rows[i].f.med),
                   mbs(m.bytes, rows[i].f.med) / rows[i].base);
        printf("# fraction = MB/s / the disk's (write for save, read for restore); target >= 0.50; "
               "restore check: %lld wrong values\n", (long long)wrong_all);
        fflush(stdout);
        if (strcmp(o.db, "none")) {
            char cmd[2048] = "";
            for (int i = 0; i < argc; i++) {
                strncat(cmd, i ? " " : "", sizeof cmd - strlen(cmd) - 1);
                strncat(cmd, argv[i], sizeof cmd - strlen(cmd) - 1);
            }
            store(&o, &m, rows, 4, cmd, lib);
        }
    }
    free(buf);
    free(tw);
    free(tr);
    free(ts);
    free(tl);
    model_free(&m);
    MPI_Finalize();
    return wrong_all ? 1 : 0;
}
