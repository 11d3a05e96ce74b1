/* ckpt_save.c: sb_checkpoint_save. Every distinct shard is written once
 * (of replicas, by the lowest rank) into the writer's own file
 * P.shard-RRRRR-of-NNNNN (temp name, fsync, rename); after a barrier rank 0
 * writes P.index the same way, last. */
#define _GNU_SOURCE
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    ck_w_u32(w, (uint32_t)ti);
    ck_w_str(w, t->name);
    ck_w_u32(w, CK_DTYPE_F32);
    ck_w_u32(w, (uint32_t)t->nd);
    for (int d = 0; d < t->nd; d++)
        ck_w_u64(w, (uint64_t)t->shape[d]);
    for (int d = 0; d < t->nd; d++) {
        ck_w_u64(w, (uint64_t)b->lo[d]);
        ck_w_u64(w, (uint64_t)b->hi[d]);
    }
    ck_w_u64(w, off);
    ck_w_u64(w, (uint64_t)sb_box_volume(b) * sizeof(float));
    ck_w_u32(w, c->crc);
    ck_w_u32(w, c->nblocks);
    for (uint32_t k = 0; k < c->nblocks; k++)
        ck_w_u32(w, c->blocks[k]);
}

/* The header of this rank's shard file: magic, version, writer, nranks,
 * block size, records, CRC of the header. */
static void shard_header(wbuf *w, const sb_ckpt_tensor *t, int n, int rank, int nranks,
                         uint64_t block, uint64_t data_start, const shard_crc *crc)
{
    ck_w_bytes(w, ck_shard_magic, 8);
    ck_w_u32(w, CK_VERSION);
    ck_w_u32(w, 0); /* header bytes, CRC included: patched below */
    ck_w_u32(w, (uint32_t)rank);
    ck_w_u32(w, (uint32_t)nranks);
    ck_w_u64(w, block);
    uint32_t nrec = 0;
    for (int i = 0; i < n; i++)
        nrec += (uint32_t)is_writer(&t[i], rank);
    ck_w_u32(w, nrec);
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
    ck_w_u32(w, sb_crc32c(0, w->p, w->n));
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
    int rc = ck_write_atomic(path, pc, np, err);
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
    ck_w_bytes(&w, ck_index_magic, 8);
    ck_w_u32(&w, CK_VERSION);
    ck_w_u32(&w, (uint32_t)nranks);
    ck_w_u64(&w, (uint64_t)(o ? o->step : 0));
    ck_w_u64(&w, block);
    /* files: every rank's shard file name (base name), used or not */
    ck_w_u32(&w, (uint32_t)nranks);
    char tmp[4096];
    for (int r = 0; r < nranks; r++) {
        shard_name(prefix, r, nranks, tmp, sizeof tmp);
        ck_w_str(&w, basename(tmp));
    }
    ck_w_u32(&w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        ck_w_str(&w, t[i].name);
        ck_w_u32(&w, CK_DTYPE_F32);
        ck_w_u32(&w, (uint32_t)t[i].nd);
        for (int d = 0; d < t[i].nd; d++)
            ck_w_u64(&w, (uint64_t)t[i].shape[d]);
        sb_layout l;
        char ls[8192] = "";
        if (!sb_layout_from_boxes(t[i].nd, t[i].shape, nranks, t[i].boxes, &l, NULL))
            sb_layout_str(&l, ls, sizeof ls);
        ck_w_str(&w, ls);
        uint32_t ns = 0;
        for (int r = 0; r < nranks; r++)
            ns += (uint32_t)is_writer(&t[i], r);
        ck_w_u32(&w, ns);
        /* copy each writer's record for tensor i, minus the tensor fields */
        for (int r = 0; r < nranks; r++) {
            rbuf rb = {all + displs[r], (size_t)counts[r], 0, 0};
            while (rb.pos < rb.n && !rb.bad) {
                uint32_t ti = ck_r_u32(&rb);
                char name[CK_NAME_MAX];
                ck_r_str(&rb, name, sizeof name);
                ck_r_u32(&rb);
                uint32_t nd = ck_r_u32(&rb);
                if (nd > SB_BOX_MAX_DIMS)
                    rb.bad = 1;
                size_t start = rb.pos;
                ck_r_take(&rb, 8 * nd * 3 + 8 + 8 + 4);
                uint32_t nb = ck_r_u32(&rb);
                ck_r_take(&rb, (size_t)nb * 4);
                if (rb.bad)
                    break;
                if (ti != (uint32_t)i)
                    continue;
                ck_w_u32(&w, (uint32_t)r);
                /* skip the shape: lo/hi, offset, nbytes, crc, blocks follow */
                ck_w_bytes(&w, rb.p + start + 8 * nd, rb.pos - start - 8 * nd);
            }
            if (rb.bad) {
                free(w.p);
                return sb_fail(err, SB_EXIT_INTERNAL, "checkpoint: bad shard records from rank %d",
                               r);
            }
        }
    }
    ck_w_u32(&w, sb_crc32c(0, w.p, w.n));
    if (w.oom) {
        free(w.p);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory building the checkpoint index");
    }
    char path[4096];
    ck_index_path(prefix, path, sizeof path);
    piece pc = {w.p, w.n};
    int rc = ck_write_atomic(path, &pc, 1, err);
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
    /* rank 0's buffers, agreed on before the gathers write into them */
    if (rank == 0) {
        counts = sb_calloc((size_t)size, sizeof *counts, err);
        displs = sb_calloc((size_t)size, sizeof *displs, err);
        rc = counts && displs ? 0 : -1;
    }
    if (sb_agree(comm, rc, err, NULL)) {
        rc = -1;
        goto out;
    }
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
    size_t total = 0;
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        all = sb_malloc(total ? total : 1, err);
        rc = all ? 0 : -1;
    }
    if (sb_agree(comm, rc, err, NULL)) {
        rc = -1;
        goto out;
    }
    MPI_Gatherv(rec->p, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, comm);
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

/* What every rank must pass alike, as text (sb_agree_text): the prefix,
 * the step, the block size, and each tensor's name, shape and every rank's
 * box. NULL when out of memory. */
static char *save_text(const char *prefix, const sb_ckpt_tensor *t, int n,
                       const sb_ckpt_save_opts *o, int size)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(f, "prefix=%s\nstep=%lld\nblock=%lld\ntensors=%d\n", prefix,
            (long long)(o ? o->step : 0), (long long)(o ? o->block_bytes : 0), n);
    for (int i = 0; i < n; i++) {
        fprintf(f, "tensor %s shape=", t[i].name ? t[i].name : "");
        for (int d = 0; d < t[i].nd && d < SB_BOX_MAX_DIMS; d++)
            fprintf(f, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        fprintf(f, " boxes=");
        for (int r = 0; r < size; r++) {
            char bs[256];
            sb_box_str(&t[i].boxes[r], bs, sizeof bs);
            fprintf(f, "%s%s", r ? ";" : "", bs);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int sb_checkpoint_save(MPI_Comm comm, const char *prefix, const sb_ckpt_tensor *t, int n,
                       const sb_ckpt_save_opts *o, sb_error *err)
{
    int rank, size, rc = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    /* ranks that pass other tensors, boxes or prefixes would write shards
     * that rank 0's index does not describe: compared before anything */
    char *text = save_text(prefix, t, n, o, size), oom[64];
    snprintf(oom, sizeof oom, "(rank %d out of memory)", rank);
    rc = sb_agree_text(comm, "checkpoint to save", text ? text : oom, err);
    free(text);
    if (rc)
        return -1;
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
        ck_index_path(prefix, ip, sizeof ip);
        if (unlink(ip) != 0 && errno != ENOENT)
            rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot remove the old index '%s': %s", ip,
                         strerror(errno));
        else if (ck_fsync_dir_of(ip, err))
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
