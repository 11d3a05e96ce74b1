/* ckpt_format.c: the checkpoint format's plumbing (ckpt.h): byte buffers,
 * atomic file writes, and the index reader with its checks. */
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

const char ck_shard_magic[8] = {'S', 'B', 'C', 'K', 'S', 'H', 'R', 'D'};
const char ck_index_magic[8] = {'S', 'B', 'C', 'K', 'I', 'N', 'D', 'X'};

/* ---- byte buffers ------------------------------------------------------------ */

void ck_w_bytes(wbuf *w, const void *src, size_t n)
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

void ck_w_u32(wbuf *w, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    ck_w_bytes(w, b, 4);
}

void ck_w_u64(wbuf *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    ck_w_bytes(w, b, 8);
}

void ck_w_str(wbuf *w, const char *s)
{
    size_t n = strlen(s);
    ck_w_u32(w, (uint32_t)n);
    ck_w_bytes(w, s, n);
}

const unsigned char *ck_r_take(rbuf *r, size_t n)
{
    if (r->bad || n > r->n - r->pos) {
        r->bad = 1;
        return NULL;
    }
    r->pos += n;
    return r->p + r->pos - n;
}

uint32_t ck_r_u32(rbuf *r)
{
    const unsigned char *b = ck_r_take(r, 4);
    uint32_t v = 0;
    for (int i = 0; b && i < 4; i++)
        v |= (uint32_t)b[i] << (8 * i);
    return v;
}

uint64_t ck_r_u64(rbuf *r)
{
    const unsigned char *b = ck_r_take(r, 8);
    uint64_t v = 0;
    for (int i = 0; b && i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

void ck_r_str(rbuf *r, char *out, size_t cap)
{
    uint32_t n = ck_r_u32(r);
    const unsigned char *b = ck_r_take(r, n);
    if (!b || n >= cap) {
        r->bad = 1;
        out[0] = 0;
        return;
    }
    memcpy(out, b, n);
    out[n] = 0;
}

/* ---- files ----------------------------------------------------------------------- */

int ck_fsync_dir_of(const char *path, sb_error *err)
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

/* Writes pieces to path atomically: path.tmp, fsync, rename, fsync dir. */
int ck_write_atomic(const char *path, const piece *pc, int npc, sb_error *err)
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
    return ck_fsync_dir_of(path, err);
}

void ck_index_path(const char *prefix, char *out, size_t cap)
{
    snprintf(out, cap, "%s.index", prefix);
}

int sb_checkpoint_exists(const char *prefix)
{
    char p[4096];
    ck_index_path(prefix, p, sizeof p);
    return access(p, F_OK) == 0;
}

/* ---- index ------------------------------------------------------------------------------ */

void ck_index_free(ck_index *x)
{
    for (int i = 0; x->t && i < x->ntensors; i++)
        free(x->t[i].shards);
    free(x->t);
    free(x->files);
    free(x->bytes);
}

static int read_whole(const char *path, unsigned char **out, size_t *n, sb_error *err)
{
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s' does not exist (no complete "
                       "checkpoint at this prefix)", path);
    int64_t size = 0;
    int fd = sb_open_input(path, "checkpoint index", &size, err);
    if (fd < 0)
        return -1;
    *n = (size_t)size;
    *out = sb_malloc(*n ? *n : 1, err);
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
    uint32_t f = ck_r_u32(r);
    if (f >= (uint32_t)x->nfiles)
        return -1;
    s->file = (int)f;
    s->box.nd = t->nd;
    for (int d = 0; d < t->nd; d++) {
        s->box.lo[d] = (int64_t)ck_r_u64(r);
        s->box.hi[d] = (int64_t)ck_r_u64(r);
        if (s->box.lo[d] < 0 || s->box.lo[d] > s->box.hi[d] || s->box.hi[d] > t->shape[d])
            return -1;
    }
    s->off = ck_r_u64(r);
    s->nbytes = ck_r_u64(r);
    s->crc = ck_r_u32(r);
    s->nblocks = ck_r_u32(r);
    s->blocks = ck_r_take(r, (size_t)s->nblocks * 4);
    if (r->bad || s->nbytes != (uint64_t)sb_box_volume(&s->box) * 4
        || s->nblocks != (s->nbytes + x->block - 1) / x->block)
        return -1;
    return 0;
}

static int parse_tensors(rbuf *r, ck_index *x)
{
    x->ntensors = (int)ck_r_u32(r);
    if (r->bad || x->ntensors < 0 || (size_t)x->ntensors > r->n / 8)
        return -1;
    x->t = calloc((size_t)x->ntensors + 1, sizeof *x->t);
    if (!x->t)
        return -1;
    for (int i = 0; i < x->ntensors; i++) {
        ck_tensor *t = &x->t[i];
        ck_r_str(r, t->name, sizeof t->name);
        t->dtype = ck_r_u32(r);
        t->nd = (int)ck_r_u32(r);
        if (r->bad || t->nd < 1 || t->nd > SB_BOX_MAX_DIMS)
            return -1;
        /* each dim >= 0 and the tensor's bytes (volume x 4) within 64 bits:
         * a shard's volume x 4 is then too */
        int64_t bytes = 4;
        for (int d = 0; d < t->nd; d++) {
            t->shape[d] = (int64_t)ck_r_u64(r);
            if (t->shape[d] < 0 || __builtin_mul_overflow(bytes, t->shape[d], &bytes))
                return -1;
        }
        uint32_t ll = ck_r_u32(r);
        ck_r_take(r, ll); /* layout string: informational */
        t->nshards = (int)ck_r_u32(r);
        if (r->bad || t->nshards < 0 || (size_t)t->nshards > r->n / 8)
            return -1;
        t->shards = calloc((size_t)t->nshards + 1, sizeof *t->shards);
        if (!t->shards)
            return -1;
        for (int k = 0; k < t->nshards; k++)
            if (parse_shard(r, x, t, &t->shards[k]))
                return -1;
        for (int j = 0; j < i; j++) /* a tensor named twice: which is meant? */
            if (!strcmp(x->t[j].name, t->name))
                return -1;
    }
    return r->pos == r->n ? 0 : -1;
}

int ck_index_load(const char *prefix, ck_index *x, sb_error *err)
{
    memset(x, 0, sizeof *x);
    ck_index_path(prefix, x->path, sizeof x->path);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", x->path);
    snprintf(x->dir, sizeof x->dir, "%s", dirname(tmp));
    size_t n = 0;
    if (read_whole(x->path, &x->bytes, &n, err))
        return -1;
    if (n < 12 || memcmp(x->bytes, ck_index_magic, 8))
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s' is not a shardbench index (bad "
                       "magic or truncated)", x->path);
    rbuf r = {x->bytes, n - 4, 8, 0};
    rbuf c = {x->bytes + n - 4, 4, 0, 0};
    x->crc = ck_r_u32(&c);
    if (sb_crc32c(0, x->bytes, n - 4) != x->crc)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s': checksum mismatch (corrupt or "
                       "truncated)", x->path);
    uint32_t ver = ck_r_u32(&r);
    if (ver != CK_VERSION)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s': format version %u, this build "
                       "reads %u", x->path, ver, CK_VERSION);
    ck_r_u32(&r); /* ranks at save */
    x->step = (int64_t)ck_r_u64(&r);
    x->block = ck_r_u64(&r);
    x->nfiles = (int)ck_r_u32(&r);
    int bad = r.bad || x->block == 0 || x->block % 4 || x->nfiles < 0
              || (size_t)x->nfiles > n / 4;
    if (!bad && !(x->files = calloc((size_t)x->nfiles + 1, sizeof *x->files)))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int f = 0; !bad && f < x->nfiles; f++) {
        ck_r_str(&r, x->files[f], sizeof x->files[f]);
        bad = r.bad || strchr(x->files[f], '/') != NULL;
        for (int g = 0; !bad && g < f; g++) /* a file listed twice */
            bad = !strcmp(x->files[g], x->files[f]);
    }
    if (bad || parse_tensors(&r, x))
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint index '%s' is corrupt", x->path);
    return 0;
}
