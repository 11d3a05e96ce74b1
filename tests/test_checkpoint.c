/* test_checkpoint.c: sharded checkpoints on MPI ranks (run under mpiexec
 * -np 1, 2, 4). Trains a small AlexNet under a random strategy on all
 * ranks, saves, and restores into fresh executors under other strategies
 * and other rank counts (all ranks, the first half, rank 0 alone): every
 * weight must equal the saved one bit for bit, and the step counter must
 * continue. Then the failures: flipped data bytes, a flipped header byte,
 * a truncated shard file, a deleted index, a missing tensor and a wrong
 * shape each give their error (naming file and tensor) on every rank and
 * leave the weights untouched. Also: layouts ↔ boxes on the executor's real
 * weight boxes, a resharding restore through layouts with tiny CRC blocks,
 * replicas written once, and the barrier's participant check. A checkpoint
 * of another model (other class count) is refused, naming the shape
 * mismatches, and restores with `partial` only the weights of the same
 * shape; ranks that read different checkpoints (per-node copies) or a
 * checkpoint that only some have fail together, and so do ranks that save
 * to other prefixes or pass other boxes.
 * Every rank runs every check; failures are summed over ranks. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/dtensor.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"

static int rank, size, failures;
static char dir[256];

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
    fprintf(stderr, "test_checkpoint: rank %d: %s: %s\n", rank, what, err->msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ---- model and strategies -------------------------------------------------------- */

static sb_model model;

static void build_problem(int p, sb_problem *pb)
{
    sb_error err = {0};
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.cutoff = 1;
    if (sb_problem_build(&model, p, &cp, pb, &err))
        die("problem", &err);
}

/* A random config per op (identical on every rank for the same seed),
 * biased towards configs that use many ranks. */
static void random_choice(const sb_problem *pb, uint64_t seed, int *choice)
{
    uint64_t x = seed * 2654435761ULL + 88172645463325252ULL;
    for (int i = 0; i < model.nops; i++) {
        int n = pb->cfg[i].n, best = 0, bq = 0;
        for (int t = 0; t < 2; t++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            int a = (int)(x % (uint64_t)n), q = 1;
            for (int d = 0; d < pb->cfg[i].ndims; d++)
                q *= pb->cfg[i].c[(size_t)a * (size_t)pb->cfg[i].ndims + (size_t)d];
            if (q >= bq) {
                bq = q;
                best = a;
            }
        }
        choice[i] = best;
    }
}

static sb_executor *make_executor(MPI_Comm comm, const sb_problem *pb, const int *choice,
                                  uint64_t seed)
{
    sb_error err = {0};
    sb_executor *ex;
    sb_exec_opts eo = {.lr = 0.05f, .seed = seed};
    sb_strategy st;
    if (sb_strategy_from_choice(&st, pb, choice, &err) ||
        sb_executor_create(comm, pb->m, &st, &sb_backend_cpu, &eo, &ex, &err))
        die("executor", &err);
    sb_strategy_free(&st);
    return ex;
}

/* Every weight gathered to the comm's rank 0, then broadcast: w[i] on every
 * rank of the comm. */
static float **all_weights(sb_executor *ex)
{
    sb_error err = {0};
    MPI_Comm comm = sb_executor_comm(ex);
    int nw = sb_executor_nweights(ex);
    float **w = calloc((size_t)nw, sizeof *w);
    for (int i = 0; i < nw; i++) {
        int64_t n;
        sb_executor_weight_name(ex, i, &n);
        w[i] = malloc((size_t)n * sizeof(float));
        if (sb_executor_gather_weight(ex, i, 0, w[i], &err))
            die("gather", &err);
        MPI_Bcast(w[i], (int)n, MPI_FLOAT, 0, comm);
    }
    return w;
}

static void free_weights(float **w, int nw)
{
    for (int i = 0; i < nw; i++)
        free(w[i]);
    free(w);
}

/* Number of weights that differ (bitwise) from ref. */
static int count_diff(sb_executor *ex, float **ref)
{
    float **w = all_weights(ex);
    int nw = sb_executor_nweights(ex), nd = 0;
    for (int i = 0; i < nw; i++) {
        int64_t n;
        sb_executor_weight_name(ex, i, &n);
        nd += memcmp(w[i], ref[i], (size_t)n * sizeof(float)) != 0;
    }
    free_weights(w, nw);
    return nd;
}

/* ---- files ----------------------------------------------------------------------------- */

static void prefix_of(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Flips bit 5 of n bytes from `at`. 65 bytes always reach shard data or
 * the header: the zero padding between shards is at most 63 bytes. */
static void flip_bytes(const char *path, long at, int n)
{
    int fd = open(path, O_RDWR);
    unsigned char b[128];
    if (fd < 0 || n > (int)sizeof b || pread(fd, b, (size_t)n, at) != n) {
        fprintf(stderr, "cannot read %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < n; i++)
        b[i] ^= 0x20;
    if (pwrite(fd, b, (size_t)n, at) != n)
        MPI_Abort(MPI_COMM_WORLD, 1);
    close(fd);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Restore into a fresh executor on comm under `choice`; weights must equal
 * ref bit for bit and the step counter must be `step`. */
static void restore_into(MPI_Comm comm, int p, uint64_t strat_seed, const char *prefix,
                         float **ref, int step, const char *what)
{
    if (comm == MPI_COMM_NULL)
        return;
    sb_problem pb;
    build_problem(p, &pb);
    int *choice = calloc((size_t)model.nops, sizeof *choice);
    if (strat_seed)
        random_choice(&pb, strat_seed, choice);
    sb_executor *ex = make_executor(comm, &pb, choice, 99);
    CHECK(count_diff(ex, ref) > 0, "%s: fresh weights already equal the saved ones", what);
    sb_error err = {0};
    int rc = sb_checkpoint_restore_executor(ex, prefix, &err);
    CHECK(rc == 0, "%s: restore failed: %s", what, err.msg);
    int nd = count_diff(ex, ref);
    CHECK(nd == 0, "%s: %d weights differ after restore", what, nd);
    CHECK(sb_executor_steps_done(ex) == step, "%s: steps done %d, expected %d", what,
          sb_executor_steps_done(ex), step);
    if (rank == 0)
        printf("restore %-28s p=%d: %s\n", what, p, rc || nd ? "FAIL" : "ok, bit for bit");
    sb_executor_free(ex);
    free(choice);
    sb_problem_free(&pb);
}

/* A failing restore: the same error on every rank, weights untouched. */
static void expect_fail(sb_executor *ex, float **before, const char *prefix, const char *want1,
                        const char *want2, const char *what)
{
    sb_error err = {0};
    int rc = sb_checkpoint_restore_executor(ex, prefix, &err);
    CHECK(rc != 0, "%s: restore succeeded", what);
    CHECK(strstr(err.msg, want1) != NULL, "%s: message lacks '%s': %s", what, want1, err.msg);
    CHECK(!want2 || strstr(err.msg, want2) != NULL, "%s: message lacks '%s': %s", what, want2,
          err.msg);
    int nd = count_diff(ex, before);
    CHECK(nd == 0, "%s: %d weights changed by a failed restore", what, nd);
    if (rank == 0)
        printf("error   %-28s: %s\n", what, err.msg);
}

static void test_errors(sb_executor *a, float **saved)
{
    sb_problem pb;
    build_problem(size, &pb);
    int *choice = calloc((size_t)model.nops, sizeof *choice);
    random_choice(&pb, 4242, choice);
    sb_executor *c = make_executor(MPI_COMM_WORLD, &pb, choice, 1234);
    float **before = all_weights(c);
    CHECK(count_diff(c, saved) > 0, "errors: fresh weights equal the saved ones");
    const char *names[] = {"data", "header", "trunc", "noindex", "same"};
    char prefix[5][512], shard[5][1024];
    sb_error err = {0};
    for (int k = 0; k < 5; k++) {
        prefix_of(names[k], prefix[k], sizeof prefix[k]);
        snprintf(shard[k], sizeof shard[k], "%s.shard-00000-of-%05d", prefix[k], size);
        if (sb_checkpoint_save_executor(a, prefix[k], &err))
            die("save", &err);
    }
    if (rank == 0) {
        flip_bytes(shard[0], file_size(shard[0]) / 2, 65);
        flip_bytes(shard[1], 40, 1);
        CHECK(truncate(shard[2], file_size(shard[2]) * 3 / 5) == 0, "truncate");
        char ip[600];
        snprintf(ip, sizeof ip, "%s.index", prefix[3]);
        CHECK(unlink(ip) == 0, "unlink index");
        flip_bytes(shard[4], file_size(shard[4]) / 3, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!sb_checkpoint_exists(prefix[3]), "a checkpoint without index exists");
    expect_fail(c, before, prefix[0], "checksum mismatch", shard[0], "flipped data bytes");
    expect_fail(c, before, prefix[1], "header checksum mismatch", shard[1], "flipped header byte");
    expect_fail(c, before, prefix[2], "truncated", shard[2], "truncated shard file");
    expect_fail(c, before, prefix[3], "does not exist", ".index", "deleted index");
    /* into the saving executor itself: the same layout, so the shard's bytes
     * are read straight into the restore buffers; the CRC still catches it */
    float **before_a = all_weights(a);
    expect_fail(a, before_a, prefix[4], "checksum mismatch", shard[4], "flipped bytes, same layout");
    free_weights(before_a, sb_executor_nweights(a));
    /* missing tensor and wrong shape, through the plain API */
    int64_t shape[SB_BOX_MAX_DIMS];
    int nd = sb_executor_weight_shape(a, 0, shape);
    float dummy[4] = {0};
    sb_ckpt_target t = {.name = "no_such_weight", .nd = nd, .shape = shape};
    char good[512];
    prefix_of("good", good, sizeof good);
    if (sb_checkpoint_save_executor(a, good, &err))
        die("save", &err);
    int rc = sb_checkpoint_restore(MPI_COMM_WORLD, good, &t, 1, NULL, &err);
    CHECK(rc && strstr(err.msg, "no tensor 'no_such_weight'") && strstr(err.msg, good),
          "missing tensor: %s", err.msg);
    if (rank == 0)
        printf("error   %-28s: %s\n", "missing tensor", err.msg);
    t.name = sb_executor_weight_name(a, 0, NULL);
    shape[0] += 1;
    t.box = (sb_box){.nd = nd, .hi = {1, 1, 1, 1, 1, 1, 1, 1}};
    t.data = dummy;
    rc = sb_checkpoint_restore(MPI_COMM_WORLD, good, &t, 1, NULL, &err);
    CHECK(rc && strstr(err.msg, "has shape") && strstr(err.msg, t.name), "wrong shape: %s",
          err.msg);
    CHECK(dummy[0] == 0, "wrong shape: destination written");
    if (rank == 0)
        printf("error   %-28s: %s\n", "wrong shape", err.msg);
    int nw = sb_executor_nweights(c);
    free_weights(before, nw);
    sb_executor_free(c);
    free(choice);
    sb_problem_free(&pb);
}

/* A checkpoint of alexnet with 16 classes into one with 8: refused (fc8's
 * matrix differs in shape), weights untouched; partial: every weight of
 * the same shape restored bit for bit, the others as they were. */
static void test_partial(sb_executor *a, const char *prefix, float **saved)
{
    sb_setting set[4];
    const char *kv[4] = {"batch=4", "image=67", "classes=8", "width_div=16"};
    sb_error err = {0};
    sb_model m8;
    for (int i = 0; i < 4; i++)
        if (sb_setting_parse(kv[i], &set[i], &err))
            die("set", &err);
    if (sb_model_load("alexnet", set, 4, &m8, &err))
        die("model", &err);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.cutoff = 1;
    sb_problem pb;
    if (sb_problem_build(&m8, size, &cp, &pb, &err))
        die("problem", &err);
    int *choice = calloc((size_t)m8.nops, sizeof *choice);
    random_choice(&pb, 31, choice);
    sb_executor *b = make_executor(MPI_COMM_WORLD, &pb, choice, 77);
    int nw = sb_executor_nweights(b);
    float **before = all_weights(b);
    int rc = sb_checkpoint_restore_executor(b, prefix, &err);
    CHECK(rc && strstr(err.msg, "does not match the model: 1 shape mismatch ('fc8.w' is (256, 16) "
                                "in the checkpoint, (256, 8) in the model)")
              && strstr(err.msg, "--restore-partial"),
          "another model: %s", err.msg);
    CHECK(count_diff(b, before) == 0, "another model: weights changed by a refused restore");
    if (rank == 0)
        printf("error   %-28s: %s\n", "another model", err.msg);
    char skipped[1024] = "x";
    rc = sb_checkpoint_restore_executor_ex(b, prefix, 1, skipped, sizeof skipped, &err);
    CHECK(rc == 0 && !strcmp(skipped, "1 shape mismatch ('fc8.w' is (256, 16) in the checkpoint, "
                                      "(256, 8) in the model)"),
          "partial: %d %s [%s]", rc, err.msg, skipped);
    float **after = all_weights(b);
    int restored = 0, kept = 0;
    for (int i = 0; i < nw; i++) {
        int64_t n, na;
        const char *name = sb_executor_weight_name(b, i, &n);
        CHECK(!strcmp(name, sb_executor_weight_name(a, i, &na)), "partial: weight %d", i);
        if (n == na && strncmp(name, "fc8.", 4)) {
            restored++;
            CHECK(!memcmp(after[i], saved[i], (size_t)n * sizeof(float)), "partial: %s not restored",
                  name);
        } else {
            kept++;
            CHECK(!memcmp(after[i], before[i], (size_t)n * sizeof(float)), "partial: %s changed",
                  name);
        }
    }
    CHECK(kept == 1 && sb_executor_steps_done(b) == 2, "partial: %d kept, step %d", kept,
          sb_executor_steps_done(b));
    if (rank == 0)
        printf("restore %-28s: %d weights restored, skipped %s\n", "partial, another model",
               restored, skipped);
    free_weights(after, nw);
    free_weights(before, nw);
    sb_executor_free(b);
    free(choice);
    sb_problem_free(&pb);
    sb_model_free(&m8);
}

/* Ranks that read different checkpoints (per-node copies of a folder) or
 * one that only some ranks have: every rank fails with one message and
 * the weights stay. */
static void test_per_rank(const char *prefix, const sb_problem *pb, const int *choice)
{
    if (size < 2)
        return;
    sb_error err = {0};
    sb_executor *f = make_executor(MPI_COMM_WORLD, pb, choice, 55);
    char other[512], absent[512];
    prefix_of("other", other, sizeof other);
    prefix_of("absent", absent, sizeof absent);
    if (sb_checkpoint_save_executor(f, other, &err))
        die("save", &err);
    float **before = all_weights(f);
    int rc = sb_checkpoint_restore_executor(f, rank ? other : prefix, &err);
    CHECK(rc && strstr(err.msg, "ranks disagree on the checkpoint index '")
              && strstr(err.msg, "step=2, rank 1 has crc=") && strstr(err.msg, "step=0"),
          "per-node copies: %s", err.msg);
    CHECK(count_diff(f, before) == 0, "per-node copies: weights changed");
    if (rank == 0)
        printf("error   %-28s: %s\n", "per-node copies", err.msg);
    err = (sb_error){0};
    rc = sb_checkpoint_restore_executor(f, rank ? absent : prefix, &err);
    CHECK(rc && strstr(err.msg, absent), "on rank 0 only: %s", err.msg);
    char m0[sizeof err.msg];
    snprintf(m0, sizeof m0, "%s", err.msg);
    MPI_Bcast(m0, (int)sizeof m0, MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(!strcmp(m0, err.msg), "on rank 0 only: rank 0 says [%s], this rank [%s]", m0, err.msg);
    CHECK(count_diff(f, before) == 0, "on rank 0 only: weights changed");
    if (rank == 0)
        printf("error   %-28s: %s\n", "on rank 0 only", err.msg);
    /* a save to other prefixes, or of other boxes: refused on every rank
     * before anything is written */
    char mine[512];
    prefix_of(rank ? "mine1" : "mine0", mine, sizeof mine);
    rc = sb_checkpoint_save_executor(f, mine, &err);
    CHECK(rc && strstr(err.msg, "ranks disagree on the checkpoint to save: rank 0 has prefix=")
              && strstr(err.msg, "mine1"),
          "save, other prefixes: %s", err.msg);
    CHECK(!sb_checkpoint_exists(mine), "save, other prefixes: written");
    if (rank == 0)
        printf("error   %-28s: %s\n", "save to other prefixes", err.msg);
    int64_t shape[1] = {4};
    float v[4] = {1, 2, 3, 4};
    sb_box *boxes = calloc((size_t)size, sizeof *boxes);
    for (int r = 0; r < size; r++) /* rank 0: replicated; the others: rank 0 holds it all */
        boxes[r] = (sb_box){.nd = rank == 0 || r == 0 ? 1 : 0, .hi = {4}};
    sb_ckpt_tensor t = {.name = "v", .nd = 1, .shape = shape, .boxes = boxes,
                        .data = boxes[rank].nd ? v : NULL};
    char vp[512];
    prefix_of("v", vp, sizeof vp);
    rc = sb_checkpoint_save(MPI_COMM_WORLD, vp, &t, 1, NULL, &err);
    CHECK(rc && strstr(err.msg, "ranks disagree on the checkpoint to save: rank 0 has tensor v "
                                "shape=4 boxes=[0:4];[0:4]"),
          "save, other boxes: %s", err.msg);
    if (rank == 0)
        printf("error   %-28s: %s\n", "save of other boxes", err.msg);
    free(boxes);
    free_weights(before, sb_executor_nweights(f));
    sb_executor_free(f);
}

static int same_box(const sb_box *a, const sb_box *b)
{
    if (a->nd != b->nd)
        return 0;
    for (int d = 0; d < a->nd; d++)
        if (a->lo[d] != b->lo[d] || a->hi[d] != b->hi[d])
            return 0;
    return 1;
}

/* The executor's real weight boxes convert to layouts and back. */
static void test_layouts_of_weights(sb_executor *a)
{
    int nw = sb_executor_nweights(a), bad = 0, sharded = 0;
    sb_box *boxes = calloc((size_t)size, sizeof *boxes), *back = calloc((size_t)size, sizeof *back);
    for (int i = 0; i < nw; i++) {
        int64_t shape[SB_BOX_MAX_DIMS];
        int nd = sb_executor_weight_shape(a, i, shape);
        sb_executor_weight_boxes(a, i, boxes);
        sb_layout l;
        sb_error err = {0};
        char s[8192];
        if (sb_layout_from_boxes(nd, shape, size, boxes, &l, &err)
            || sb_layout_boxes(&l, shape, size, back, &err)) {
            CHECK(0, "weight %s: %s", sb_executor_weight_name(a, i, NULL), err.msg);
            bad++;
            continue;
        }
        for (int r = 0; r < size; r++)
            bad += !same_box(&boxes[r], &back[r]);
        for (int d = 0; d < nd; d++)
            sharded += l.axis[d] >= 0;
        sb_layout_str(&l, s, sizeof s);
        sb_layout l2;
        CHECK(sb_layout_parse(s, &l2, &err) == 0, "layout '%s' does not parse: %s", s, err.msg);
        if (rank == 0 && i < 3)
            printf("layout  %-28s: %s\n", sb_executor_weight_name(a, i, NULL), s);
    }
    CHECK(bad == 0, "%d weight boxes do not round-trip through layouts", bad);
    if (rank == 0)
        printf("layouts of %d weights round-trip (%d sharded dims)\n", nw, sharded);
    free(boxes);
    free(back);
}

/* A (8, 12) tensor of its global indices: saved sharded on dim 0 over x,
 * restored sharded on dim 1 over y, with 16-byte CRC blocks; replicated, it
 * is written by rank 0 alone. */
static void test_layout_reshard(void)
{
    sb_error err = {0};
    int64_t shape[2] = {8, 12};
    const char *ax[1] = {"x"}, *ay[1] = {"y"};
    sb_mesh mx, my;
    sb_layout lx, ly, lr;
    const char *sx[2] = {"x", SB_UNSHARDED}, *sy[2] = {SB_UNSHARDED, "y"};
    const char *srep[2] = {SB_UNSHARDED, SB_UNSHARDED};
    if (sb_mesh_make("m", 1, ax, &size, &mx, &err) || sb_mesh_make("n", 1, ay, &size, &my, &err)
        || sb_layout_make(&mx, 2, sx, &lx, &err) || sb_layout_make(&my, 2, sy, &ly, &err)
        || sb_layout_make(&mx, 2, srep, &lr, &err))
        die("layouts", &err);
    sb_box *bx = calloc((size_t)size, sizeof *bx), *by = calloc((size_t)size, sizeof *by);
    sb_box *br = calloc((size_t)size, sizeof *br);
    if (sb_layout_boxes(&lx, shape, size, bx, &err) || sb_layout_boxes(&ly, shape, size, by, &err)
        || sb_layout_boxes(&lr, shape, size, br, &err))
        die("boxes", &err);
    float src[96], rep[96], dst[96];
    int64_t k = 0;
    for (int64_t i = bx[rank].lo[0]; i < bx[rank].hi[0]; i++)
        for (int64_t j = 0; j < 12; j++)
            src[k++] = (float)(i * 12 + j);
    for (int e = 0; e < 96; e++)
        rep[e] = (float)e;
    char p1[512], p2[512];
    prefix_of("reshard", p1, sizeof p1);
    prefix_of("replicated", p2, sizeof p2);
    sb_ckpt_tensor t = {.name = "t", .nd = 2, .shape = shape, .boxes = bx, .data = src};
    sb_ckpt_save_opts o = {.step = 7, .block_bytes = 16};
    if (sb_checkpoint_save(MPI_COMM_WORLD, p1, &t, 1, &o, &err))
        die("save", &err);
    sb_ckpt_target g = {.name = "t", .nd = 2, .shape = shape, .box = by[rank], .data = dst};
    int64_t step = 0;
    int rc = sb_checkpoint_restore(MPI_COMM_WORLD, p1, &g, 1, &step, &err);
    CHECK(rc == 0 && step == 7, "reshard restore: %s (step %lld)", err.msg, (long long)step);
    int bad = 0;
    k = 0;
    for (int64_t i = 0; i < 8; i++)
        for (int64_t j = by[rank].lo[1]; j < by[rank].hi[1]; j++)
            bad += dst[k++] != (float)(i * 12 + j);
    CHECK(bad == 0, "reshard: %d wrong elements", bad);
    /* replicated: only rank 0 writes */
    t = (sb_ckpt_tensor){.name = "t", .nd = 2, .shape = shape, .boxes = br, .data = rep};
    if (sb_checkpoint_save(MPI_COMM_WORLD, p2, &t, 1, NULL, &err))
        die("save", &err);
    int files = 0;
    for (int r = 0; r < size; r++) {
        char f[600];
        snprintf(f, sizeof f, "%s.shard-%05d-of-%05d", p2, r, size);
        files += access(f, F_OK) == 0;
    }
    CHECK(files == 1, "replicated tensor written to %d files", files);
    /* overlapping boxes that are not replicas are refused on every rank */
    if (size > 1) {
        sb_box *bo = calloc((size_t)size, sizeof *bo);
        for (int r = 0; r < size; r++)
            bo[r] = (sb_box){.nd = 2, .lo = {0, 0}, .hi = {8 - (r == 1), 12}};
        t = (sb_ckpt_tensor){.name = "t", .nd = 2, .shape = shape, .boxes = bo, .data = rep};
        rc = sb_checkpoint_save(MPI_COMM_WORLD, p2, &t, 1, NULL, &err);
        CHECK(rc && strstr(err.msg, "overlap"), "overlapping boxes: %s", err.msg);
        free(bo);
    }
    if (rank == 0)
        printf("reshard x->y with 16-byte CRC blocks: %s; replicated: %d file\n",
               bad ? "FAIL" : "ok", files);
    free(bx);
    free(by);
    free(br);
}

static void test_barrier(void)
{
    sb_error err = {0};
    sb_mesh m;
    const char *ax[1] = {"x"};
    int n = size + 1;
    if (sb_mesh_make("", 1, ax, &size, &m, &err))
        die("mesh", &err);
    CHECK(sb_barrier(MPI_COMM_WORLD, &m, "all", NULL, &err) == 0, "barrier: %s", err.msg);
    if (sb_mesh_make("big", 1, ax, &n, &m, &err))
        die("mesh", &err);
    int rc = sb_barrier(MPI_COMM_WORLD, &m, "too few", NULL, &err);
    CHECK(rc && strstr(err.msg, "participants"), "barrier count: %s", err.msg);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double t0 = MPI_Wtime();
    if (rank == 0) {
        snprintf(dir, sizeof dir, "/tmp/sb_ckpt_XXXXXX");
        if (!mkdtemp(dir))
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    sb_setting set[4];
    const char *kv[4] = {"batch=4", "image=67", "classes=16", "width_div=16"};
    sb_error err = {0};
    for (int i = 0; i < 4; i++)
        if (sb_setting_parse(kv[i], &set[i], &err))
            die("set", &err);
    if (sb_model_load(argc > 1 ? argv[1] : "alexnet", set, 4, &model, &err))
        die("model", &err);
    /* train under one strategy on all ranks, save */
    sb_problem pb;
    build_problem(size, &pb);
    int *choice = calloc((size_t)model.nops, sizeof *choice);
    random_choice(&pb, 17, choice);
    sb_executor *a = make_executor(MPI_COMM_WORLD, &pb, choice, 3);
    double loss;
    for (int s = 0; s < 2; s++)
        if (sb_executor_step(a, &loss, &err))
            die("step", &err);
    char prefix[512];
    prefix_of("saved", prefix, sizeof prefix);
    if (sb_checkpoint_save_executor(a, prefix, &err))
        die("save", &err);
    CHECK(sb_checkpoint_exists(prefix), "no index after save");
    float **saved = all_weights(a);
    /* restore: all ranks (another strategy), half the ranks, rank 0 alone */
    restore_into(MPI_COMM_WORLD, size, 23, prefix, saved, 2, "all ranks, other strategy");
    MPI_Comm half, self;
    int nh = size > 1 ? size / 2 : 1;
    MPI_Comm_split(MPI_COMM_WORLD, rank < nh ? 0 : MPI_UNDEFINED, rank, &half);
    restore_into(half, nh, 29, prefix, saved, 2, "first half, other strategy");
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, rank, &self);
    restore_into(self, 1, 0, prefix, saved, 2, "rank 0 alone, one device");
    if (half != MPI_COMM_NULL)
        MPI_Comm_free(&half);
    if (self != MPI_COMM_NULL)
        MPI_Comm_free(&self);
    MPI_Barrier(MPI_COMM_WORLD);
    test_errors(a, saved);
    test_partial(a, prefix, saved);
    test_per_rank(prefix, &pb, choice);
    test_layouts_of_weights(a);
    test_layout_reshard();
    test_barrier();
    free_weights(saved, sb_executor_nweights(a));
    sb_executor_free(a);
    free(choice);
    sb_problem_free(&pb);
    sb_model_free(&model);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        printf("test_checkpoint p=%d: %d failures, %.2f s\n", size, total, MPI_Wtime() - t0);
    }
    MPI_Finalize();
    return total ? 1 : 0;
}
