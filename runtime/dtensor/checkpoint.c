/* checkpoint.c: sharded checkpoints. save: every distinct shard is written
 * once (of replicas, by the lowest rank) into the writer's own file
 * P.shard-RRRRR-of-NNNNN (temp name, fsync, rename); after a barrier rank 0
 * writes P.index the same way, last. restore: every rank reads the index,
 * then only the CRC blocks of the shards overlapping its target boxes
 * (pread), verifies them, and fills its destinations only when every rank
 * succeeded. Format: runtime/README.md. Integers are little-endian.
 * Not here: other dtypes than f32, async saves. */
#define _GNU_SOURCE
#include "shardbench/dtensor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/runtime.h"

#define CK_VERSION 1u
#define CK_DTYPE_F32 1u
#define CK_NAME_MAX 256
#define CK_ALIGN 64
static const char shard_magic[8] = {'S', 'B', 'C', 'K', 'S', 'H', 'R', 'D'};
static const char index_magic[8] = {'S', 'B', 'C', 'K', 'I', 'N', 'D', 'X'};

/* ---- byte buffers ------------------------------------------------------------ */

typedef struct {
    unsigned char *p;
    size_t n, cap;
    int oom;
} wbuf;

static void w_bytes(wbuf *w, const void *src, size_t n)
{
    if (w->oom)
        return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->n + n)
            cap *= 2;
        unsigned char *q = realloc(w->p, cap);
        if (!q) {
            w->oom = 1;
            return;
        }
        w->p = q;
        w->cap = cap;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}

static void w_u32(wbuf *w, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    w_bytes(w, b, 4);
}

static void w_u64(wbuf *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    w_bytes(w, b, 8);
}

static void w_str(wbuf *w, const char *s)
{
    size_t n = strlen(s);
    w_u32(w, (uint32_t)n);
    w_bytes(w, s, n);
}

typedef struct {
    const unsigned char *p;
    size_t n, pos;
    int bad;
} rbuf;

static const unsigned char *r_take(rbuf *r, size_t n)
{
    if (r->bad || n > r->n - r->pos) {
        r->bad = 1;
        return NULL;
    }
    r->pos += n;
    return r->p + r->pos - n;
}

static uint32_t r_u32(rbuf *r)
{
    const unsigned char *b = r_take(r, 4);
    uint32_t v = 0;
    for (int i = 0; b && i < 4; i++)
        v |= (uint32_t)b[i] << (8 * i);
    return v;
}

static uint64_t r_u64(rbuf *r)
{
    const unsigned char *b = r_take(r, 8);
    uint64_t v = 0;
    for (int i = 0; b && i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static void r_str(rbuf *r, char *out, size_t cap)
{
    uint32_t n = r_u32(r);
    const unsigned char *b = r_take(r, n);
    if (!b || n >= cap) {
        r->bad = 1;
        out[0] = 0;
        return;
    }
    memcpy(out, b, n);
    out[n] = 0;
}

/* ---- files ----------------------------------------------------------------------- */

static int fsync_dir_of(const char *path, sb_error *err)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    const char *dir = dirname(tmp);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot sync directory '%s': %s", dir, strerror(e));
    }
    close(fd);
    return 0;
}

static int write_all(int fd, const void *p, size_t n, const char *path, sb_error *err)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return sb_fail(err, SB_EXIT_INTERNAL, "cannot write '%s': %s", path,
                           k < 0 ? strerror(errno) : "no progress");
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

typedef struct {
    const void *p;
    size_t n;
} piece;

/* Writes pieces to path atomically: path.tmp, fsync, rename, fsync dir. */
static int write_atomic(const char *path, const piece *pc, int npc, sb_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint path '%s' is too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot create '%s': %s", tmp, strerror(errno));
    int rc = 0;
    for (int i = 0; !rc && i < npc; i++)
        rc = write_all(fd, pc[i].p, pc[i].n, tmp, err);
    if (!rc && fsync(fd) != 0)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot sync '%s': %s", tmp, strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot close '%s': %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot rename '%s' to '%s': %s", tmp, path,
                     strerror(errno));
    if (rc) {
        unlink(tmp);
        return rc;
    }
    return fsync_dir_of(path, err);
}

static void index_path(const char *prefix, char *out, size_t cap)
{
    snprintf(out, cap, "%s.index", prefix);
}

int sb_checkpoint_exists(const char *prefix)
{
    char p[4096];
    index_path(prefix, p, sizeof p);
    return access(p, F_OK) == 0;
}

/* ---- save --------------------------------------------------------------------------- */

/* 1 if rank r writes tensor t's shard: it holds a box no lower rank holds. */
static int is_writer(const sb_ckpt_tensor *t, int r)
{
    if (!t->boxes[r].nd || sb_box_volume(&t->boxes[r]) == 0)
        return 0;
    for (int q = 0; q < r; q++)
        if (sb_box_equal(&t->boxes[q], &t->boxes[r]))
            return 0;
    return 1;
}

/* Same checks on every rank: names, shapes, boxes inside, equal or
 * disjoint, covering the tensor. */
static int check_tensor(const sb_ckpt_tensor *t, int nranks, int rank, sb_error *err)
{
    if (!t->name || !*t->name || strlen(t->name) >= CK_NAME_MAX)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint: a tensor has an empty or too long name");
    if (t->nd < 1 || t->nd > SB_BOX_MAX_DIMS)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint: tensor '%s' has %d dims (1..%d)", t->name,
                       t->nd, SB_BOX_MAX_DIMS);
    int64_t total = 1, covered = 0;
    for (int d = 0; d < t->nd; d++)
        total *= t->shape[d];
    for (int r = 0; r < nranks; r++) {
        const sb_box *b = &t->boxes[r];
        if (!b->nd)
            continue;
        char bs[256];
        sb_box_str(b, bs, sizeof bs);
        int ok = b->nd == t->nd;
        for (int d = 0; ok && d < t->nd; d++)
            ok = b->lo[d] >= 0 && b->lo[d] <= b->hi[d] && b->hi[d] <= t->shape[d];
        if (!ok)
            return sb_fail(err, SB_EXIT_INPUT, "checkpoint: tensor '%s': rank %d's box %s is not "
                           "inside the tensor", t->name, r, bs);
        if (!is_writer(t, r))
            continue;
        covered += sb_box_volume(b);
        for (int q = 0; q < r; q++) {
            sb_box x;
            if (is_writer(t, q) && sb_box_intersect(&t->boxes[q], b, &x))
                return sb_fail(err, SB_EXIT_INPUT, "checkpoint: tensor '%s': the boxes of ranks "
                               "%d and %d overlap without being equal", t->name, q, r);
        }
    }
    if (covered != total)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint: tensor '%s': the ranks' boxes cover %lld "
                       "of its %lld elements", t->name, (long long)covered, (long long)total);
    if (t->boxes[rank].nd && sb_box_volume(&t->boxes[rank]) && !t->data)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint: tensor '%s': rank %d holds a box but "
                       "passed no data", t->name, rank);
    return 0;
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* CRC-32C of a shard: whole, and per block of `block` bytes. */
typedef struct {
    uint32_t crc, nblocks;
    uint32_t *blocks;
} shard_crc;

static int shard_crcs(const float *data, int64_t n, uint64_t block, shard_crc *c, sb_error *err)
{
    uint64_t nbytes = (uint64_t)n * sizeof(float);
    const unsigned char *p = (const unsigned char *)data;
    c->nblocks = (uint32_t)((nbytes + block - 1) / block);
    c->blocks = sb_calloc((size_t)c->nblocks + 1, sizeof *c->blocks, err);
    if (!c->blocks)
        return -1;
    c->crc = 0;
    for (uint32_t k = 0; k < c->nblocks; k++) {
        uint64_t a = k * block, e = a + block < nbytes ? a + block : nbytes;
        c->blocks[k] = sb_crc32c(0, p + a, e - a);
        c->crc = sb_crc32c(c->crc, p + a, e - a);
    }
    return 0;
}

/* A shard record (shard file header and the gather to rank 0). */
static void put_record(wbuf *w, int ti, const sb_ckpt_tensor *t, const sb_box *b, uint64_t off,
                       const shard_crc *c)
{
    w_u32(w, (uint32_t)ti);
    w_str(w, t->name);
    w_u32(w, CK_DTYPE_F32);
    w_u32(w, (uint32_t)t->nd);
    for (int d = 0; d < t->nd; d++)
        w_u64(w, (uint64_t)t->shape[d]);
    for (int d = 0; d < t->nd; d++) {
        w_u64(w, (uint64_t)b->lo[d]);
        w_u64(w, (uint64_t)b->hi[d]);
    }
    w_u64(w, off);
    w_u64(w, (uint64_t)sb_box_volume(b) * sizeof(float));
    w_u32(w, c->crc);
    w_u32(w, c->nblocks);
    for (uint32_t k = 0; k < c->nblocks; k++)
        w_u32(w, c->blocks[k]);
}

/* The header of this rank's shard file: magic, version, writer, nranks,
 * block size, records, CRC of the header. */
static void shard_header(wbuf *w, const sb_ckpt_tensor *t, int n, int rank, int nranks,
                         uint64_t block, uint64_t data_start, const shard_crc *crc)
{
    w_bytes(w, shard_magic, 8);
    w_u32(w, CK_VERSION);
    w_u32(w, 0); /* header bytes, CRC included: patched below */
    w_u32(w, (uint32_t)rank);
    w_u32(w, (uint32_t)nranks);
    w_u64(w, block);
    uint32_t nrec = 0;
    for (int i = 0; i < n; i++)
        nrec += (uint32_t)is_writer(&t[i], rank);
    w_u32(w, nrec);
    uint64_t off = data_start;
    for (int i = 0; i < n; i++)
        if (is_writer(&t[i], rank)) {
            put_record(w, i, &t[i], &t[i].boxes[rank], off, &crc[i]);
            off = round_up(off + (uint64_t)sb_box_volume(&t[i].boxes[rank]) * 4, CK_ALIGN);
        }
    if (w->oom)
        return;
    uint32_t hb = (uint32_t)w->n + 4;
    for (int i = 0; i < 4; i++)
        w->p[12 + i] = (unsigned char)(hb >> (8 * i));
    w_u32(w, sb_crc32c(0, w->p, w->n));
}

static void shard_name(const char *prefix, int rank, int nranks, char *out, size_t cap)
{
    snprintf(out, cap, "%s.shard-%05d-of-%05d", prefix, rank, nranks);
}

/* Writes the shard file from the header and the data. */
static int write_shard_file(const char *prefix, const sb_ckpt_tensor *t, int n, int rank,
                            int nranks, const wbuf *h, uint64_t data_start, sb_error *err)
{
    piece *pc = sb_calloc((size_t)(2 * n + 2), sizeof *pc, err);
    if (!pc)
        return -1;
    static const unsigned char zeros[CK_ALIGN];
    int np = 0;
    pc[np++] = (piece){h->p, h->n};
    pc[np++] = (piece){zeros, (size_t)(data_start - h->n)};
    for (int i = 0; i < n; i++)
        if (is_writer(&t[i], rank)) {
            size_t nb = (size_t)sb_box_volume(&t[i].boxes[rank]) * 4;
            pc[np++] = (piece){t[i].data, nb};
            pc[np++] = (piece){zeros, (size_t)(round_up(nb, CK_ALIGN) - nb)};
        }
    char path[4096];
    shard_name(prefix, rank, nranks, path, sizeof path);
    int rc = write_atomic(path, pc, np, err);
    free(pc);
    return rc;
}

/* Writes this rank's shard file (if it writes any shard); *rec gets its
 * records for rank 0. */
static int save_shards(const char *prefix, const sb_ckpt_tensor *t, int n, int rank, int nranks,
                       uint64_t block, wbuf *rec, sb_error *err)
{
    shard_crc *crc = sb_calloc((size_t)n + 1, sizeof *crc, err);
    int rc = crc ? 0 : -1, nw = 0;
    for (int i = 0; !rc && i < n; i++)
        if (is_writer(&t[i], rank)) {
            rc = shard_crcs(t[i].data, sb_box_volume(&t[i].boxes[rank]), block, &crc[i], err);
            nw++;
        }
    wbuf h = {0};
    uint64_t data_start = 0;
    if (!rc) {
        shard_header(&h, t, n, rank, nranks, block, 0, crc);
        data_start = round_up(h.n, CK_ALIGN);
        free(h.p);
        h = (wbuf){0};
        shard_header(&h, t, n, rank, nranks, block, data_start, crc);
        /* the records alone, for the index */
        uint64_t off = data_start;
        for (int i = 0; i < n; i++)
            if (is_writer(&t[i], rank)) {
                put_record(rec, i, &t[i], &t[i].boxes[rank], off, &crc[i]);
                off = round_up(off + (uint64_t)sb_box_volume(&t[i].boxes[rank]) * 4, CK_ALIGN);
            }
        if (h.oom || rec->oom)
            rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory building a checkpoint header");
    }
    if (!rc && nw)
        rc = write_shard_file(prefix, t, n, rank, nranks, &h, data_start, err);
    for (int i = 0; crc && i < n; i++)
        free(crc[i].blocks);
    free(crc);
    free(h.p);
    return rc;
}

/* Rank 0: the index from every rank's records (rank order). */
static int write_index(const char *prefix, const sb_ckpt_tensor *t, int n, int nranks,
                       const sb_ckpt_save_opts *o, uint64_t block, const unsigned char *all,
                       const int *counts, const int *displs, sb_error *err)
{
    wbuf w = {0};
    w_bytes(&w, index_magic, 8);
    w_u32(&w, CK_VERSION);
    w_u32(&w, (uint32_t)nranks);
    w_u64(&w, (uint64_t)(o ? o->step : 0));
    w_u64(&w, block);
    /* files: every rank's shard file name (base name), used or not */
    w_u32(&w, (uint32_t)nranks);
    char tmp[4096];
    for (int r = 0; r < nranks; r++) {
        shard_name(prefix, r, nranks, tmp, sizeof tmp);
        w_str(&w, basename(tmp));
    }
    w_u32(&w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        w_str(&w, t[i].name);
        w_u32(&w, CK_DTYPE_F32);
        w_u32(&w, (uint32_t)t[i].nd);
        for (int d = 0; d < t[i].nd; d++)
            w_u64(&w, (uint64_t)t[i].shape[d]);
        sb_layout l;
        char ls[8192] = "";
        if (!sb_layout_from_boxes(t[i].nd, t[i].shape, nranks, t[i].boxes, &l, NULL))
            sb_layout_str(&l, ls, sizeof ls);
        w_str(&w, ls);
        uint32_t ns = 0;
        for (int r = 0; r < nranks; r++)
            ns += (uint32_t)is_writer(&t[i], r);
        w_u32(&w, ns);
        /* copy each writer's record for tensor i, minus the tensor fields */
        for (int r = 0; r < nranks; r++) {
            rbuf rb = {all + displs[r], (size_t)counts[r], 0, 0};
            while (rb.pos < rb.n && !rb.bad) {
                uint32_t ti = r_u32(&rb);
                char name[CK_NAME_MAX];
                r_str(&rb, name, sizeof name);
                r_u32(&rb);
                uint32_t nd = r_u32(&rb);
                if (nd > SB_BOX_MAX_DIMS)
                    rb.bad = 1;
                size_t start = rb.pos;
                r_take(&rb, 8 * nd * 3 + 8 + 8 + 4);
                uint32_t nb = r_u32(&rb);
                r_take(&rb, (size_t)nb * 4);
                if (rb.bad)
                    break;
                if (ti != (uint32_t)i)
                    continue;
                w_u32(&w, (uint32_t)r);
                /* skip the shape: lo/hi, offset, nbytes, crc, blocks follow */
                w_bytes(&w, rb.p + start + 8 * nd, rb.pos - start - 8 * nd);
            }
            if (rb.bad) {
                free(w.p);
                return sb_fail(err, SB_EXIT_INTERNAL, "checkpoint: bad shard records from rank %d",
                               r);
            }
        }
    }
    w_u32(&w, sb_crc32c(0, w.p, w.n));
    if (w.oom) {
        free(w.p);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory building the checkpoint index");
    }
    char path[4096];
    index_path(prefix, path, sizeof path);
    piece pc = {w.p, w.n};
    int rc = write_atomic(path, &pc, 1, err);
    free(w.p);
    return rc;
}

/* Rank 0 gathers every rank's records and writes the index. Collective. */
static int gather_and_index(MPI_Comm comm, const char *prefix, const sb_ckpt_tensor *t, int n,
                            const sb_ckpt_save_opts *o, uint64_t block, const wbuf *rec,
                            sb_error *err)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int mine = (int)rec->n, *counts = NULL, *displs = NULL, rc = 0;
    unsigned char *all = NULL;
    if (rank == 0) {
        counts = sb_calloc((size_t)size, sizeof *counts, err);
        displs = sb_calloc((size_t)size, sizeof *displs, err);
    }
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
    size_t total = 0;
    if (rank == 0 && counts && displs) {
        for (int r = 0; r < size; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        all = sb_malloc(total, err);
    }
    MPI_Gatherv(rec->p, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, comm);
    if (rank == 0)
        rc = !counts || !displs || !all ? -1 : 0;
    sb_mesh m;
    int sz = size;
    const char *axes[1] = {"ranks"};
    if (!rc)
        rc = sb_mesh_make("checkpoint", 1, axes, &sz, &m, err);
    if (sb_agree(comm, rc, err, NULL) || sb_barrier(comm, &m, "checkpoint: shards written", NULL, err)) {
        rc = -1;
        goto out;
    }
    if (rank == 0)
        rc = write_index(prefix, t, n, size, o, block, all, counts, displs, err);
    rc = sb_agree(comm, rc, err, NULL);
out:
    free(counts);
    free(displs);
    free(all);
    return rc;
}

/* Test hook: SHARDBENCH_TEST_CKPT_DIE=R:S makes rank R exit (status 9)
 * right after writing its shard file of the save of step S, before the
 * index: a crash in the middle of a save. */
static void test_hook_die(int rank, int64_t step)
{
    const char *v = getenv("SHARDBENCH_TEST_CKPT_DIE");
    int r;
    long long s;
    if (v && sscanf(v, "%d:%lld", &r, &s) == 2 && r == rank && s == step) {
        fprintf(stderr, "shardbench: rank %d: SHARDBENCH_TEST_CKPT_DIE: exiting in the middle of "
                "the save of step %lld\n", rank, s);
        _exit(9);
    }
}

int sb_checkpoint_save(MPI_Comm comm, const char *prefix, const sb_ckpt_tensor *t, int n,
                       const sb_ckpt_save_opts *o, sb_error *err)
{
    int rank, size, rc = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    uint64_t block = o && o->block_bytes > 0 ? (uint64_t)o->block_bytes : 1u << 20;
    if (block % 4)
        rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint: CRC block size %llu is not a multiple of 4",
                     (unsigned long long)block);
    for (int i = 0; !rc && i < n; i++) {
        rc = check_tensor(&t[i], size, rank, err);
        for (int j = 0; !rc && j < i; j++)
            if (!strcmp(t[i].name, t[j].name))
                rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint: tensor '%s' is given twice",
                             t[i].name);
    }
    if (!rc && strlen(prefix) > 3000)
        rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint prefix '%.100s...' is too long", prefix);
    /* an index names a complete checkpoint: remove the old one first */
    if (!rc && rank == 0) {
        char ip[4096];
        index_path(prefix, ip, sizeof ip);
        if (unlink(ip) != 0 && errno != ENOENT)
            rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot remove the old index '%s': %s", ip,
                         strerror(errno));
        else if (fsync_dir_of(ip, err))
            rc = -1;
    }
    if (sb_agree(comm, rc, err, NULL))
        return -1;
    wbuf rec = {0};
    rc = save_shards(prefix, t, n, rank, size, block, &rec, err);
    test_hook_die(rank, o ? o->step : 0);
    if (!sb_agree(comm, rc, err, NULL))
        rc = gather_and_index(comm, prefix, t, n, o, block, &rec, err);
    else
        rc = -1;
    free(rec.p);
    sb_debug("checkpoint '%s': save %s", prefix, rc ? "failed" : "done");
    return rc;
}

/* ---- index ------------------------------------------------------------------------------ */

typedef struct {
    int file;
    sb_box box;
    uint64_t off, nbytes;
    uint32_t crc, nblocks;
    const unsigned char *blocks; /* nblocks little-endian u32, inside the index bytes */
} ck_shard;

typedef struct {
    char name[CK_NAME_MAX];
    uint32_t dtype;
    int nd;
    int64_t shape[SB_BOX_MAX_DIMS];
    int nshards;
    ck_shard *shards;
} ck_tensor;

typedef struct {
    char path[4096], dir[4096];
    unsigned char *bytes;
    int64_t step;
    uint64_t block;
    int nfiles;
    char (*files)[CK_NAME_MAX];
    int ntensors;
    ck_tensor *t;
} ck_index;

static void index_free(ck_index *x)
{
    for (int i = 0; x->t && i < x->ntensors; i++)
        free(x->t[i].shards);
    free(x->t);
    free(x->files);
    free(x->bytes);
}

static int read_whole(const char *path, unsigned char **out, size_t *n, sb_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s' does not exist (no complete "
                           "checkpoint at this prefix)", path);
        return sb_fail(err, SB_EXIT_INPUT, "cannot open checkpoint index '%s': %s", path,
                       strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot stat '%s': %s", path, strerror(errno));
    }
    *n = (size_t)st.st_size;
    *out = sb_malloc(*n, err);
    ssize_t k = *out ? pread(fd, *out, *n, 0) : -1;
    close(fd);
    if (!*out)
        return -1;
    if (k != (ssize_t)*n)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot read '%s'", path);
    return 0;
}

static int parse_shard(rbuf *r, ck_index *x, ck_tensor *t, ck_shard *s)
{
    uint32_t f = r_u32(r);
    if (f >= (uint32_t)x->nfiles)
        return -1;
    s->file = (int)f;
    s->box.nd = t->nd;
    for (int d = 0; d < t->nd; d++) {
        s->box.lo[d] = (int64_t)r_u64(r);
        s->box.hi[d] = (int64_t)r_u64(r);
        if (s->box.lo[d] < 0 || s->box.lo[d] > s->box.hi[d] || s->box.hi[d] > t->shape[d])
            return -1;
    }
    s->off = r_u64(r);
    s->nbytes = r_u64(r);
    s->crc = r_u32(r);
    s->nblocks = r_u32(r);
    s->blocks = r_take(r, (size_t)s->nblocks * 4);
    if (r->bad || s->nbytes != (uint64_t)sb_box_volume(&s->box) * 4
        || s->nblocks != (s->nbytes + x->block - 1) / x->block)
        return -1;
    return 0;
}

static int parse_tensors(rbuf *r, ck_index *x)
{
    x->ntensors = (int)r_u32(r);
    if (r->bad || x->ntensors < 0 || (size_t)x->ntensors > r->n / 8)
        return -1;
    x->t = calloc((size_t)x->ntensors + 1, sizeof *x->t);
    if (!x->t)
        return -1;
    for (int i = 0; i < x->ntensors; i++) {
        ck_tensor *t = &x->t[i];
        r_str(r, t->name, sizeof t->name);
        t->dtype = r_u32(r);
        t->nd = (int)r_u32(r);
        if (r->bad || t->nd < 1 || t->nd > SB_BOX_MAX_DIMS)
            return -1;
        for (int d = 0; d < t->nd; d++)
            t->shape[d] = (int64_t)r_u64(r);
        uint32_t ll = r_u32(r);
        r_take(r, ll); /* layout string: informational */
        t->nshards = (int)r_u32(r);
        if (r->bad || t->nshards < 0 || (size_t)t->nshards > r->n / 8)
            return -1;
        t->shards = calloc((size_t)t->nshards + 1, sizeof *t->shards);
        if (!t->shards)
            return -1;
        for (int k = 0; k < t->nshards; k++)
            if (parse_shard(r, x, t, &t->shards[k]))
                return -1;
    }
    return r->pos == r->n ? 0 : -1;
}

static int index_load(const char *prefix, ck_index *x, sb_error *err)
{
    memset(x, 0, sizeof *x);
    index_path(prefix, x->path, sizeof x->path);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", x->path);
    snprintf(x->dir, sizeof x->dir, "%s", dirname(tmp));
    size_t n = 0;
    if (read_whole(x->path, &x->bytes, &n, err))
        return -1;
    if (n < 12 || memcmp(x->bytes, index_magic, 8))
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s' is not a shardbench index (bad "
                       "magic or truncated)", x->path);
    rbuf r = {x->bytes, n - 4, 8, 0};
    rbuf c = {x->bytes + n - 4, 4, 0, 0};
    if (sb_crc32c(0, x->bytes, n - 4) != r_u32(&c))
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s': checksum mismatch (corrupt or "
                       "truncated)", x->path);
    uint32_t ver = r_u32(&r);
    if (ver != CK_VERSION)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s': format version %u, this build "
                       "reads %u", x->path, ver, CK_VERSION);
    r_u32(&r); /* ranks at save */
    x->step = (int64_t)r_u64(&r);
    x->block = r_u64(&r);
    x->nfiles = (int)r_u32(&r);
    int bad = r.bad || x->block == 0 || x->block % 4 || x->nfiles < 0
              || (size_t)x->nfiles > n / 4;
    if (!bad && !(x->files = calloc((size_t)x->nfiles + 1, sizeof *x->files)))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int f = 0; !bad && f < x->nfiles; f++) {
        r_str(&r, x->files[f], sizeof x->files[f]);
        bad = r.bad || strchr(x->files[f], '/') != NULL;
    }
    if (bad || parse_tensors(&r, x))
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s' is corrupt", x->path);
    return 0;
}

/* ---- restore ---------------------------------------------------------------------------- */

typedef struct {
    int fd;
    int64_t size;
    char path[8192];
} ck_file;

static void shape_str(int nd, const int64_t *s, char *out, size_t cap)
{
    size_t pos = (size_t)snprintf(out, cap, "(");
    for (int d = 0; d < nd && pos < cap; d++)
        pos += (size_t)snprintf(out + pos, cap - pos, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (pos < cap)
        snprintf(out + pos, cap - pos, ")");
}

/* Opens file f of the index once, checking its magic, version and header
 * CRC. */
static int open_shard_file(const ck_index *x, ck_file *files, int f, const char *tensor,
                           sb_error *err)
{
    ck_file *cf = &files[f];
    if (cf->fd >= 0)
        return 0;
    snprintf(cf->path, sizeof cf->path, "%s/%s", x->dir, x->files[f]);
    cf->fd = open(cf->path, O_RDONLY | O_CLOEXEC);
    if (cf->fd < 0)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s' (tensor '%s'): %s", cf->path,
                       tensor, strerror(errno));
    struct stat st;
    unsigned char head[16];
    if (fstat(cf->fd, &st) != 0)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot stat '%s': %s", cf->path, strerror(errno));
    cf->size = (int64_t)st.st_size;
    if (pread(cf->fd, head, sizeof head, 0) != (ssize_t)sizeof head)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s' (tensor '%s') is truncated: %lld "
                       "bytes, no header", cf->path, tensor, (long long)cf->size);
    rbuf r = {head + 8, 8, 0, 0};
    uint32_t ver = r_u32(&r), hb = r_u32(&r);
    if (memcmp(head, shard_magic, 8) || ver != CK_VERSION)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s' (tensor '%s'): not a shard file "
                       "of format version %u", cf->path, tensor, CK_VERSION);
    if (hb < 20 || hb > cf->size)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s' (tensor '%s') is truncated or "
                       "corrupt: header of %u bytes, file of %lld", cf->path, tensor, hb,
                       (long long)cf->size);
    unsigned char *h = sb_malloc(hb, err);
    if (!h)
        return -1;
    int ok = pread(cf->fd, h, hb, 0) == (ssize_t)hb;
    rbuf c = {h + hb - 4, 4, 0, 0};
    ok = ok && sb_crc32c(0, h, hb - 4) == r_u32(&c);
    free(h);
    if (!ok)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s' (tensor '%s'): header checksum "
                       "mismatch", cf->path, tensor);
    return 0;
}

/* Reads the part of shard s that overlaps `want` into dst (laid out as
 * dbox): the rows of dim 0 it needs (a contiguous range), rounded out to
 * CRC blocks, each block verified. */
/* Bytes [lo, hi) of a shard's read window, held where p points. */
typedef struct {
    uint64_t lo, hi;
    unsigned char *p;
} rpiece;

/* CRC-32C of bytes [lo, hi) of the window, over the pieces holding them. */
static uint32_t crc_pieces(const rpiece *pc, int n, uint64_t lo, uint64_t hi)
{
    uint32_t c = 0;
    for (int i = 0; i < n; i++) {
        uint64_t a = pc[i].lo > lo ? pc[i].lo : lo, e = pc[i].hi < hi ? pc[i].hi : hi;
        if (a < e)
            c = sb_crc32c(c, pc[i].p + (a - pc[i].lo), e - a);
    }
    return c;
}

static int pread_full(int fd, unsigned char *p, uint64_t n, uint64_t off, const char *path,
                      const char *tensor, const char *box, sb_error *err)
{
    uint64_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, p + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s': cannot read tensor '%s' "
                           "shard %s: %s", path, tensor, box, k < 0 ? strerror(errno)
                                                                   : "truncated");
        got += (uint64_t)k;
    }
    return 0;
}

/* Reads the overlap ov of shard s into dst (laid out as dbox), checking the
 * CRC of every block it touches (and of the whole shard when it reads all
 * of it). When ov is whole rows of the shard and whole rows of dst (the
 * same layout saved and restored, or a split of dim 0 only), its bytes go
 * straight into dst; only the partial blocks around them are read aside. */
static int read_overlap(const ck_index *x, ck_file *files, const ck_tensor *t, const ck_shard *s,
                        const sb_box *ov, float *dst, const sb_box *dbox, sb_error *err)
{
    if (open_shard_file(x, files, s->file, t->name, err))
        return -1;
    const ck_file *cf = &files[s->file];
    sb_box rd = s->box; /* rows ov.lo[0]..ov.hi[0] of the shard, whole otherwise */
    rd.lo[0] = ov->lo[0];
    rd.hi[0] = ov->hi[0];
    int64_t row = sb_box_volume(&s->box) / (s->box.hi[0] - s->box.lo[0]);
    uint64_t a = (uint64_t)((rd.lo[0] - s->box.lo[0]) * row) * 4;
    uint64_t e = a + (uint64_t)sb_box_volume(&rd) * 4;
    uint64_t b0 = a / x->block, b1 = (e - 1) / x->block;
    uint64_t start = b0 * x->block, end = (b1 + 1) * x->block < s->nbytes ? (b1 + 1) * x->block
                                                                           : s->nbytes;
    char bs[256];
    sb_box_str(&s->box, bs, sizeof bs);
    if ((int64_t)(s->off + end) > cf->size)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s' is truncated: tensor '%s' shard "
                       "%s needs bytes up to %llu, the file has %lld", cf->path, t->name, bs,
                       (unsigned long long)(s->off + end), (long long)cf->size);
    int direct = 1;
    for (int d = 1; d < s->box.nd; d++)
        direct = direct && ov->lo[d] == s->box.lo[d] && ov->hi[d] == s->box.hi[d]
                 && dbox->lo[d] == ov->lo[d] && dbox->hi[d] == ov->hi[d];
    rpiece pc[3];
    int np = 0, rc = 0;
    unsigned char *aside = NULL;
    if (direct) { /* [start, a) aside, [a, e) into dst, [e, end) aside */
        aside = sb_malloc((a - start) + (end - e) + 1, err);
        if (!aside)
            return -1;
        unsigned char *into = (unsigned char *)(dst + (ov->lo[0] - dbox->lo[0]) * row);
        pc[np++] = (rpiece){start, a, aside};
        pc[np++] = (rpiece){a, e, into};
        pc[np++] = (rpiece){e, end, aside + (a - start)};
    } else {
        if (!(aside = sb_malloc(end - start, err)))
            return -1;
        pc[np++] = (rpiece){start, end, aside};
    }
    for (int i = 0; i < np && !rc; i++)
        if (pc[i].hi > pc[i].lo)
            rc = pread_full(cf->fd, pc[i].p, pc[i].hi - pc[i].lo, s->off + pc[i].lo, cf->path,
                            t->name, bs, err);
    for (uint64_t k = b0; k <= b1 && !rc; k++) {
        uint64_t ka = k * x->block, ke = ka + x->block < end ? ka + x->block : end;
        rbuf cr = {s->blocks + 4 * k, 4, 0, 0};
        if (crc_pieces(pc, np, ka, ke) != r_u32(&cr))
            rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s': checksum mismatch in tensor "
                         "'%s' shard %s (CRC block %llu)", cf->path, t->name, bs,
                         (unsigned long long)k);
    }
    if (!rc && start == 0 && end == s->nbytes && crc_pieces(pc, np, 0, s->nbytes) != s->crc)
        rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s': checksum mismatch in tensor '%s' "
                     "shard %s", cf->path, t->name, bs);
    if (!rc && !direct)
        sb_box_copy((const float *)(aside + (a - start)), &rd, dst, dbox, ov, 0);
    free(aside);
    return rc;
}

static const ck_tensor *find_tensor(const ck_index *x, const char *name)
{
    for (int i = 0; i < x->ntensors; i++)
        if (!strcmp(x->t[i].name, name))
            return &x->t[i];
    return NULL;
}

/* Fills tmp (laid out as the target box) from the shards. */
static int restore_one(const ck_index *x, ck_file *files, const sb_ckpt_target *g, float *tmp,
                       sb_error *err)
{
    const ck_tensor *t = find_tensor(x, g->name);
    if (!t)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint '%s': no tensor '%s'", x->path, g->name);
    if (t->dtype != CK_DTYPE_F32)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint '%s': tensor '%s' has dtype %u, expected "
                       "f32", x->path, g->name, t->dtype);
    int same = t->nd == g->nd;
    for (int d = 0; same && d < t->nd; d++)
        same = t->shape[d] == g->shape[d];
    if (!same) {
        char a[256], b[256];
        shape_str(t->nd, t->shape, a, sizeof a);
        shape_str(g->nd, g->shape, b, sizeof b);
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint '%s': tensor '%s' has shape %s, expected %s",
                       x->path, g->name, a, b);
    }
    if (!g->box.nd || !sb_box_volume(&g->box))
        return 0;
    int ok = g->box.nd == g->nd;
    for (int d = 0; ok && d < g->nd; d++)
        ok = g->box.lo[d] >= 0 && g->box.lo[d] <= g->box.hi[d] && g->box.hi[d] <= g->shape[d];
    if (!ok)
        return sb_fail(err, SB_EXIT_INPUT, "restore: tensor '%s': target box outside the tensor",
                       g->name);
    int64_t filled = 0;
    for (int k = 0; k < t->nshards; k++) {
        sb_box ov;
        if (!sb_box_intersect(&t->shards[k].box, &g->box, &ov))
            continue;
        if (read_overlap(x, files, t, &t->shards[k], &ov, tmp, &g->box, err))
            return -1;
        filled += sb_box_volume(&ov);
    }
    if (filled != sb_box_volume(&g->box))
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint '%s': the shards of tensor '%s' do not "
                       "cover this rank's box", x->path, g->name);
    return 0;
}

/* Reads every target into its temp buffer (tmp[i]). Local. */
static int restore_local(const char *prefix, const sb_ckpt_target *g, int n, float **tmp,
                         int scratch, int64_t *step, sb_error *err)
{
    ck_index x;
    ck_file *files = NULL;
    int rc = index_load(prefix, &x, err);
    if (!rc && !(files = sb_calloc((size_t)x.nfiles + 1, sizeof *files, err)))
        rc = -1;
    for (int f = 0; files && f < x.nfiles; f++)
        files[f].fd = -1;
    for (int i = 0; !rc && i < n; i++) {
        int64_t v = g[i].box.nd ? sb_box_volume(&g[i].box) : 0;
        if (v && !g[i].data)
            rc = sb_fail(err, SB_EXIT_INPUT, "restore: tensor '%s': no destination buffer",
                         g[i].name);
        else if (scratch)
            rc = restore_one(&x, files, &g[i], tmp[i] = g[i].data, err);
        else if (!(tmp[i] = sb_malloc((size_t)v * sizeof(float), err)))
            rc = -1;
        else
            rc = restore_one(&x, files, &g[i], tmp[i], err);
    }
    if (!rc && step)
        *step = x.step;
    for (int f = 0; files && f < x.nfiles; f++)
        if (files[f].fd >= 0)
            close(files[f].fd);
    free(files);
    index_free(&x);
    return rc;
}

/* scratch: the targets' buffers are the caller's scratch (written even when
 * the restore fails), so the shards are read straight into them. */
static int restore_impl(MPI_Comm comm, const char *prefix, const sb_ckpt_target *g, int n,
                        int scratch, int64_t *step, sb_error *err)
{
    float **tmp = calloc((size_t)n + 1, sizeof *tmp);
    int64_t st = 0;
    int rc = tmp ? restore_local(prefix, g, n, tmp, scratch, &st, err)
                 : sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    rc = sb_agree(comm, rc, err, NULL);
    for (int i = 0; !rc && !scratch && i < n; i++)
        if (g[i].box.nd && sb_box_volume(&g[i].box))
            memcpy(g[i].data, tmp[i], (size_t)sb_box_volume(&g[i].box) * sizeof(float));
    if (!rc && step)
        *step = st;
    for (int i = 0; tmp && !scratch && i < n; i++)
        free(tmp[i]);
    free(tmp);
    sb_debug("checkpoint '%s': restore %s", prefix, rc ? "failed" : "done");
    return rc;
}

int sb_checkpoint_restore(MPI_Comm comm, const char *prefix, const sb_ckpt_target *g, int n,
                          int64_t *step, sb_error *err)
{
    /* the caller's buffers change only when every rank has read and checked
     * all of its shards */
    return restore_impl(comm, prefix, g, n, 0, step, err);
}

/* ---- the executor's weights ---------------------------------------------------------------- */

typedef struct {
    int n;
    int64_t (*shape)[SB_BOX_MAX_DIMS];
    sb_box *boxes;   /* n * nranks */
    float **data;
} ex_weights;

static void exw_free(ex_weights *w)
{
    for (int i = 0; w->data && i < w->n; i++)
        free(w->data[i]);
    free(w->data);
    free(w->shape);
    free(w->boxes);
}

/* Shapes, every rank's boxes and this rank's shards (read when `read`). */
static int exw_get(sb_executor *ex, ex_weights *w, int read, sb_error *err)
{
    int size;
    MPI_Comm_size(sb_executor_comm(ex), &size);
    memset(w, 0, sizeof *w);
    w->n = sb_executor_nweights(ex);
    w->shape = sb_calloc((size_t)w->n + 1, sizeof *w->shape, err);
    w->boxes = sb_calloc((size_t)w->n * (size_t)size + 1, sizeof *w->boxes, err);
    w->data = sb_calloc((size_t)w->n + 1, sizeof *w->data, err);
    if (!w->shape || !w->boxes || !w->data)
        return -1;
    for (int i = 0; i < w->n; i++) {
        sb_executor_weight_shape(ex, i, w->shape[i]);
        sb_executor_weight_boxes(ex, i, &w->boxes[(size_t)i * (size_t)size]);
        sb_box b;
        sb_executor_weight_box(ex, i, &b);
        int64_t v = b.nd ? sb_box_volume(&b) : 0;
        if (!(w->data[i] = sb_malloc((size_t)v * sizeof(float), err)))
            return -1;
        if (read && v && sb_executor_weight_read(ex, i, w->data[i], err))
            return -1;
    }
    return 0;
}

int sb_checkpoint_save_executor(sb_executor *ex, const char *prefix, sb_error *err)
{
    MPI_Comm comm = sb_executor_comm(ex);
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    /* the step's queued work is complete on every rank before any read */
    sb_mesh m;
    const char *axes[1] = {"ranks"};
    if (sb_mesh_make("executor", 1, axes, &size, &m, err)
        || sb_barrier(comm, &m, "checkpoint: save", sb_executor_backend(ex)->sync, err))
        return -1;
    ex_weights w;
    int rc = exw_get(ex, &w, 1, err);
    sb_ckpt_tensor *t = rc ? NULL : sb_calloc((size_t)w.n + 1, sizeof *t, err);
    if (sb_agree(comm, rc || !t ? -1 : 0, err, NULL)) {
        free(t);
        exw_free(&w);
        return -1;
    }
    for (int i = 0; i < w.n; i++) {
        t[i].name = sb_executor_weight_name(ex, i, NULL);
        t[i].nd = sb_executor_weight_shape(ex, i, w.shape[i]);
        t[i].shape = w.shape[i];
        t[i].boxes = &w.boxes[(size_t)i * (size_t)size];
        t[i].data = w.data[i];
    }
    sb_ckpt_save_opts o = {.step = sb_executor_steps_done(ex)};
    rc = sb_checkpoint_save(comm, prefix, t, w.n, &o, err);
    free(t);
    exw_free(&w);
    return rc;
}

int sb_checkpoint_restore_executor(sb_executor *ex, const char *prefix, sb_error *err)
{
    MPI_Comm comm = sb_executor_comm(ex);
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    ex_weights w;
    int rc = exw_get(ex, &w, 0, err);
    sb_ckpt_target *g = rc ? NULL : sb_calloc((size_t)w.n + 1, sizeof *g, err);
    if (sb_agree(comm, rc || !g ? -1 : 0, err, NULL)) {
        free(g);
        exw_free(&w);
        return -1;
    }
    for (int i = 0; i < w.n; i++) {
        g[i].name = sb_executor_weight_name(ex, i, NULL);
        g[i].nd = sb_executor_weight_shape(ex, i, w.shape[i]);
        g[i].shape = w.shape[i];
        g[i].box = w.boxes[(size_t)i * (size_t)size + (size_t)rank];
        g[i].data = w.data[i];
    }
    int64_t step = 0;
    /* w.data is scratch: the executor's weights change only after all agree */
    rc = restore_impl(comm, prefix, g, w.n, 1, &step, err);
    if (!rc && (step < 0 || step > 1000000000))
        rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint '%s': step %lld is out of range", prefix,
                     (long long)step);
    for (int i = 0; !rc && i < w.n; i++)
        if (g[i].box.nd && sb_box_volume(&g[i].box))
            rc = sb_executor_weight_write(ex, i, w.data[i], err);
    if (!rc)
        sb_executor_set_steps_done(ex, (int)step); /* inputs and labels continue from there */
    free(g);
    exw_free(&w);
    return rc;
}

/* ---- step folders ------------------------------------------------------------------------ */

#define STEP_FMT "step-%06lld"

int sb_checkpoint_step_dir(const char *dir, int64_t step, char *out, size_t cap, sb_error *err)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/" STEP_FMT, dir, (long long)step) >= (int)sizeof path - 16)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint folder '%s' is too long", dir);
    /* mkdir -p */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return sb_fail(err, SB_EXIT_INPUT, "cannot create folder '%s': %s", path,
                           strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return sb_fail(err, SB_EXIT_INPUT, "cannot create folder '%s': %s", path, strerror(errno));
    snprintf(out, cap, "%s/ckpt", path);
    return 0;
}

/* Step numbers of DIR's step-NNNNNN folders, sorted ascending; complete[i]
 * says whether it has an index. */
static int list_steps(const char *dir, int64_t **steps, int **complete, int *n, sb_error *err)
{
    *steps = NULL;
    *complete = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint folder '%s': %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long v;
        char tail;
        if (sscanf(e->d_name, "step-%lld%c", &v, &tail) != 1 || v < 0 || strlen(e->d_name) < 11)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *s2 = realloc(*steps, (size_t)cap * sizeof **steps);
            if (s2)
                *steps = s2;
            int *c2 = realloc(*complete, (size_t)cap * sizeof **complete);
            if (c2)
                *complete = c2;
            if (!s2 || !c2) {
                closedir(d);
                return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            }
        }
        char p[4096];
        snprintf(p, sizeof p, "%s/%s/ckpt", dir, e->d_name);
        (*steps)[*n] = v;
        (*complete)[*n] = sb_checkpoint_exists(p);
        (*n)++;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort: few folders */
        for (int j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
            int c = (*complete)[j];
            (*complete)[j] = (*complete)[j - 1];
            (*complete)[j - 1] = c;
        }
    return 0;
}

int sb_checkpoint_find(const char *dir, char *prefix, size_t cap, sb_error *err)
{
    char p[4096];
    if (sb_checkpoint_exists(dir)) {
        snprintf(prefix, cap, "%s", dir);
        return 0;
    }
    snprintf(p, sizeof p, "%s/ckpt", dir);
    if (sb_checkpoint_exists(p)) {
        snprintf(prefix, cap, "%s", p);
        return 0;
    }
    int64_t *steps;
    int *complete, n;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sb_fail(err, SB_EXIT_INPUT, "no checkpoint at '%s' (no '%s.index', and no folder "
                       "of that name)", dir, dir);
    if (list_steps(dir, &steps, &complete, &n, err))
        return -1;
    int best = -1;
    for (int i = 0; i < n; i++)
        if (complete[i])
            best = i;
    if (best >= 0)
        snprintf(prefix, cap, "%s/" STEP_FMT "/ckpt", dir, (long long)steps[best]);
    free(steps);
    free(complete);
    if (best < 0)
        return sb_fail(err, SB_EXIT_INPUT, "no checkpoint in '%s' (no ckpt.index and no "
                       "step-NNNNNN folder with one)", dir);
    return 0;
}

/* Removes DIR/step-N's checkpoint files (ckpt.*) and the folder. */
static int remove_step(const char *dir, int64_t step, sb_error *err)
{
    char sd[4096], p[8192];
    snprintf(sd, sizeof sd, "%s/" STEP_FMT, dir, (long long)step);
    /* the index first: a half-removed checkpoint no longer exists */
    snprintf(p, sizeof p, "%s/ckpt.index", sd);
    unlink(p);
    DIR *d = opendir(sd);
    if (!d)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot open '%s': %s", sd, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "ckpt.", 5)) {
            snprintf(p, sizeof p, "%s/%s", sd, e->d_name);
            unlink(p);
        }
    closedir(d);
    if (rmdir(sd) != 0)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot remove old checkpoint folder '%s': %s", sd,
                       strerror(errno));
    return 0;
}

int sb_checkpoint_prune(const char *dir, int keep, sb_error *err)
{
    if (keep <= 0)
        return 0;
    int64_t *steps;
    int *complete, n, rc = 0;
    if (list_steps(dir, &steps, &complete, &n, err))
        return -1;
    int kept = 0, oldest = n;
    for (int i = n - 1; i >= 0 && kept < keep; i--)
        if (complete[i]) {
            kept++;
            oldest = i;
        }
    if (kept == keep)
        for (int i = 0; !rc && i < oldest; i++)
            rc = remove_step(dir, steps[i], err);
    free(steps);
    free(complete);
    return rc;
}
