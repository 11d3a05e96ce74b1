/* ckpt_restore.c: sb_checkpoint_restore. Every rank reads the index, then
 * only the CRC blocks of the shards overlapping its target boxes (pread),
 * verifies them, and fills its destinations only when every rank
 * succeeded. */
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
    sb_error e2 = {0};
    cf->fd = sb_open_input(cf->path, "checkpoint shard file", &cf->size, &e2);
    if (cf->fd < 0)
        return sb_fail(err, e2.code, "%s (tensor '%s')", e2.msg, tensor);
    unsigned char head[16];
    if (pread(cf->fd, head, sizeof head, 0) != (ssize_t)sizeof head)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint file '%s' (tensor '%s') is truncated: %lld "
                       "bytes, no header", cf->path, tensor, (long long)cf->size);
    rbuf r = {head + 8, 8, 0, 0};
    uint32_t ver = ck_r_u32(&r), hb = ck_r_u32(&r);
    if (memcmp(head, ck_shard_magic, 8) || ver != CK_VERSION)
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
    ok = ok && sb_crc32c(0, h, hb - 4) == ck_r_u32(&c);
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
        if (crc_pieces(pc, np, ka, ke) != ck_r_u32(&cr))
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
                         int scratch, int64_t *step, char *ident, size_t cap, sb_error *err)
{
    ck_index x;
    ck_file *files = NULL;
    int rc = ck_index_load(prefix, &x, err);
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
    if (!rc)
        snprintf(ident, cap, "crc=%08x step=%lld", (unsigned)x.crc, (long long)x.step);
    for (int f = 0; files && f < x.nfiles; f++)
        if (files[f].fd >= 0)
            close(files[f].fd);
    free(files);
    ck_index_free(&x);
    return rc;
}

/* scratch: the targets' buffers are the caller's scratch (written even when
 * the restore fails), so the shards are read straight into them. */
int ck_restore_impl(MPI_Comm comm, const char *prefix, const sb_ckpt_target *g, int n,
                        int scratch, int64_t *step, sb_error *err)
{
    float **tmp = calloc((size_t)n + 1, sizeof *tmp);
    int64_t st = 0;
    char ident[128] = "", what[4200];
    int rc = tmp ? restore_local(prefix, g, n, tmp, scratch, &st, ident, sizeof ident, err)
                 : sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    rc = sb_agree(comm, rc, err, NULL);
    /* every rank read its own copy of the index: copies that differ (a stale
     * folder on one node) would restore different steps and weights */
    ck_index_path(prefix, what, sizeof what);
    if (!rc) {
        char w2[4300];
        snprintf(w2, sizeof w2, "checkpoint index '%s'", what);
        rc = sb_agree_text(comm, w2, ident, err);
    }
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
    return ck_restore_impl(comm, prefix, g, n, 0, step, err);
}
