/* dataset.c: a distributed dataset. Splits each global batch over a mesh's
 * batch axis (per-replica batch = global batch / replicas; ranks along the
 * other axes get the same samples), shuffles deterministically by (seed,
 * epoch), drops the remainder, and reads the next batch in a background
 * thread. Sources: the synthetic generator (a counter-based hash of the
 * sample index) and the binary record file (format in runtime/README.md).
 * Not here: sharding of non-batch dims, variable-size samples. */
#define _GNU_SOURCE
#include "shardbench/dtensor.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "record files are little-endian; this reader assumes a little-endian host"
#endif

#define REC_VERSION 1u
#define REC_DTYPE_F32 1u
static const char rec_magic[8] = {'S', 'B', 'R', 'E', 'C', 'O', 'R', 'D'};

struct sb_data_source {
    int64_t count;
    int nd;
    int64_t dims[SB_BOX_MAX_DIMS];
    int64_t sample_floats;
    /* synthetic */
    int classes;
    uint64_t seed;
    /* record file (fd >= 0) */
    int fd;
    char path[4096];
    int64_t data_start;
    size_t record_bytes;
    int64_t file_bytes;
    uint32_t fingerprint; /* header and sampled record CRCs (sb_data_describe) */
};

/* ---- hashing ------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double u01(uint64_t seed, uint64_t i)
{
    return (double)(mix64(seed ^ mix64(i)) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- sources ------------------------------------------------------------------ */

static int source_new(int64_t count, int nd, const int64_t *dims, sb_data_source **out,
                      sb_error *err)
{
    if (count < 1)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: %lld samples (need at least 1)",
                       (long long)count);
    if (nd < 0 || nd > SB_BOX_MAX_DIMS - 1)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: samples of %d dims (0..%d)", nd,
                       SB_BOX_MAX_DIMS - 1);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        if (dims[d] < 1 || dims[d] > (1LL << 31))
            return sb_fail(err, SB_EXIT_INPUT, "dataset: found a non-static shape: sample dim %d "
                           "has size %lld", d, (long long)dims[d]);
        n *= dims[d];
        if (n > (1LL << 31))
            return sb_fail(err, SB_EXIT_INPUT, "dataset: samples of more than 2^31 floats");
    }
    sb_data_source *s = sb_calloc(1, sizeof *s, err);
    if (!s)
        return -1;
    s->count = count;
    s->nd = nd;
    memcpy(s->dims, dims, (size_t)nd * sizeof *dims);
    s->sample_floats = n;
    s->fd = -1;
    *out = s;
    return 0;
}

int sb_data_synthetic(int64_t count, int nd, const int64_t *dims, int classes, uint64_t seed,
                      sb_data_source **out, sb_error *err)
{
    *out = NULL;
    if (classes < 1)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: %d classes (need at least 1)", classes);
    if (source_new(count, nd, dims, out, err))
        return -1;
    (*out)->classes = classes;
    (*out)->seed = seed;
    return 0;
}

int64_t sb_data_count(const sb_data_source *s) { return s->count; }

int sb_data_dims(const sb_data_source *s, int64_t *dims)
{
    memcpy(dims, s->dims, (size_t)s->nd * sizeof *dims);
    return s->nd;
}

void sb_data_free(sb_data_source *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}

/* Sample i into x (sample_floats) and *label. buf: record_bytes scratch. */
static int source_read(const sb_data_source *s, int64_t i, float *x, int32_t *label,
                       unsigned char *buf, sb_error *err)
{
    if (s->fd < 0) {
        uint64_t base = (uint64_t)i * (uint64_t)s->sample_floats;
        for (int64_t j = 0; j < s->sample_floats; j++)
            x[j] = (float)(2.0 * u01(s->seed, base + (uint64_t)j) - 1.0);
        *label = (int32_t)(u01(s->seed ^ 0x1abe1ULL, (uint64_t)i) * s->classes);
        return 0;
    }
    off_t off = (off_t)(s->data_start + i * (int64_t)s->record_bytes);
    size_t got = 0;
    while (got < s->record_bytes) {
        ssize_t k = pread(s->fd, buf + got, s->record_bytes - got, off + (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return sb_fail(err, SB_EXIT_INPUT, "record file '%s': record %lld is truncated",
                           s->path, (long long)i);
        got += (size_t)k;
    }
    uint32_t crc;
    memcpy(&crc, buf + s->record_bytes - 4, 4);
    if (sb_crc32c(0, buf, s->record_bytes - 4) != crc)
        return sb_fail(err, SB_EXIT_INPUT, "record file '%s': checksum mismatch in record %lld",
                       s->path, (long long)i);
    memcpy(label, buf, 4);
    memcpy(x, buf + 4, (size_t)s->sample_floats * sizeof(float));
    return 0;
}

int sb_data_read(const sb_data_source *s, int64_t i, float *x, int32_t *label, sb_error *err)
{
    if (i < 0 || i >= s->count)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: sample %lld out of range (count %lld)",
                       (long long)i, (long long)s->count);
    unsigned char *buf = NULL;
    if (s->fd >= 0 && !(buf = malloc(s->record_bytes)))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int rc = source_read(s, i, x, label, buf, err);
    free(buf);
    return rc;
}

/* header: magic, version, dtype, nd, dims, count, CRC-32C of the above */
static size_t header_bytes(int nd) { return 8 + 4 + 4 + 4 + 8 * (size_t)nd + 8 + 4; }

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

int sb_data_open_records(const char *path, sb_data_source **out, sb_error *err)
{
    *out = NULL;
    int fd = sb_open_input(path, "record file", NULL, err);
    if (fd < 0)
        return -1;
    unsigned char h[8 + 12 + 8 * SB_BOX_MAX_DIMS + 12];
    ssize_t k = pread(fd, h, sizeof h, 0);
    uint32_t ver = 0, dtype = 0, nd = 0, crc = 0;
    if (k >= 20) {
        memcpy(&ver, h + 8, 4);
        memcpy(&dtype, h + 12, 4);
        memcpy(&nd, h + 16, 4);
    }
    if (k < 20 || memcmp(h, rec_magic, 8) || nd > SB_BOX_MAX_DIMS - 1
        || (size_t)k < header_bytes((int)nd)) {
        close(fd);
        return sb_fail(err, SB_EXIT_INPUT, "record file '%s': not a shardbench record file (bad "
                       "magic or truncated header)", path);
    }
    size_t hb = header_bytes((int)nd);
    memcpy(&crc, h + hb - 4, 4);
    int64_t dims[SB_BOX_MAX_DIMS], count;
    memcpy(dims, h + 20, 8 * (size_t)nd);
    memcpy(&count, h + 20 + 8 * nd, 8);
    const char *why = sb_crc32c(0, h, hb - 4) != crc ? "header checksum mismatch"
                      : ver != REC_VERSION            ? "unsupported format version"
                      : dtype != REC_DTYPE_F32        ? "unsupported dtype"
                                                      : NULL;
    if (why) {
        close(fd);
        return sb_fail(err, SB_EXIT_INPUT, "record file '%s': %s", path, why);
    }
    if (source_new(count, (int)nd, dims, out, err)) {
        close(fd);
        return -1;
    }
    sb_data_source *s = *out;
    s->fd = fd;
    snprintf(s->path, sizeof s->path, "%s", path);
    s->data_start = (int64_t)hb;
    s->record_bytes = 4 + (size_t)s->sample_floats * 4 + 4;
    struct stat st;
    int64_t need = s->data_start + count * (int64_t)s->record_bytes;
    if (fstat(fd, &st) != 0 || st.st_size < need) {
        sb_data_free(s);
        *out = NULL;
        return sb_fail(err, SB_EXIT_INPUT, "record file '%s' is truncated: %lld records need "
                       "%lld bytes, the file has %lld", path, (long long)count, (long long)need,
                       (long long)st.st_size);
    }
    s->file_bytes = (int64_t)st.st_size;
    /* the stored CRCs of up to 256 records spread over the file: copies of
     * a file that differ differ here, without reading the file */
    uint32_t fp = sb_crc32c(0, h, hb);
    int64_t nsample = count < 256 ? count : 256;
    for (int64_t j = 0; j < nsample; j++) {
        int64_t i = nsample > 1 ? j * (count - 1) / (nsample - 1) : 0;
        unsigned char c[4] = {0};
        off_t off = (off_t)(s->data_start + (i + 1) * (int64_t)s->record_bytes - 4);
        if (pread(fd, c, 4, off) != 4)
            memset(c, 0xff, 4);
        fp = sb_crc32c(fp, c, 4);
    }
    s->fingerprint = fp;
    return 0;
}

void sb_data_describe(const sb_data_source *s, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s count=%lld dims=", s->fd >= 0 ? "records" : "synthetic",
                                (long long)s->count);
    for (int d = 0; d < s->nd && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? "x" : "", (long long)s->dims[d]);
    if (n >= cap)
        return;
    if (s->fd >= 0)
        snprintf(buf + n, cap - n, " bytes=%lld fingerprint=%08x", (long long)s->file_bytes,
                 (unsigned)s->fingerprint);
    else
        snprintf(buf + n, cap - n, " classes=%d seed=%llu", s->classes,
                 (unsigned long long)s->seed);
}

int sb_data_write_records(const char *path, sb_data_source *src, sb_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot create '%s': %s", tmp, strerror(errno));
    size_t hb = header_bytes(src->nd), rb = 4 + (size_t)src->sample_floats * 4 + 4;
    unsigned char h[8 + 12 + 8 * SB_BOX_MAX_DIMS + 12], *rec = malloc(rb), *scratch = malloc(rb);
    memcpy(h, rec_magic, 8);
    put32(h + 8, REC_VERSION);
    put32(h + 12, REC_DTYPE_F32);
    put32(h + 16, (uint32_t)src->nd);
    for (int d = 0; d < src->nd; d++)
        put64(h + 20 + 8 * d, (uint64_t)src->dims[d]);
    put64(h + 20 + 8 * src->nd, (uint64_t)src->count);
    put32(h + hb - 4, sb_crc32c(0, h, hb - 4));
    int rc = rec && scratch ? 0 : sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    if (!rc && fwrite(h, 1, hb, f) != hb)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot write '%s'", tmp);
    for (int64_t i = 0; !rc && i < src->count; i++) {
        int32_t label;
        rc = source_read(src, i, (float *)(void *)(rec + 4), &label, scratch, err);
        if (rc)
            break;
        memcpy(rec, &label, 4);
        put32(rec + rb - 4, sb_crc32c(0, rec, rb - 4));
        if (fwrite(rec, 1, rb, f) != rb)
            rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot write '%s'", tmp);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        rc = rc ? rc : sb_fail(err, SB_EXIT_INTERNAL, "cannot sync '%s'", tmp);
    if (fclose(f) != 0)
        rc = rc ? rc : sb_fail(err, SB_EXIT_INTERNAL, "cannot close '%s'", tmp);
    if (!rc && rename(tmp, path) != 0)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "cannot rename '%s' to '%s': %s", tmp, path,
                     strerror(errno));
    if (rc)
        unlink(tmp);
    free(rec);
    free(scratch);
    return rc;
}

/* ---- shuffle ------------------------------------------------------------------ */

void sb_dataset_permutation(uint64_t seed, int64_t epoch, int64_t count, int64_t *perm)
{
    for (int64_t i = 0; i < count; i++)
        perm[i] = i;
    if (!seed)
        return;
    uint64_t state = mix64(seed ^ mix64((uint64_t)epoch + 0x5eedULL));
    for (int64_t i = count - 1; i > 0; i--) {
        state = mix64(state);
        int64_t j = (int64_t)(((unsigned __int128)state * (uint64_t)(i + 1)) >> 64);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ---- the dataset ------------------------------------------------------------------ */

typedef struct {
    float *x;
    int32_t *labels;
    int64_t *index;
    int64_t epoch;
    int full, rc;
    sb_error err;
} slot;

struct sb_dataset {
    sb_data_source *src;
    int64_t per_replica, global, replica, batches;
    uint64_t seed;
    /* producer state */
    int64_t next_epoch, next_batch, perm_epoch;
    int64_t *perm;
    unsigned char *scratch;
    /* prefetch */
    int prefetch, stop;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot s;
};

static int mesh_equal(const sb_mesh *a, const sb_mesh *b)
{
    if (a->naxes != b->naxes || a->ndevices != b->ndevices)
        return 0;
    for (int k = 0; k < a->naxes; k++)
        if (strcmp(a->axis[k], b->axis[k]) || a->size[k] != b->size[k])
            return 0;
    return !memcmp(a->device, b->device, (size_t)a->ndevices * sizeof a->device[0]);
}

/* DTensor's checks of layouts against the data structure and batch axis. */
static int check_layouts(const sb_data_source *src, const sb_dataset_opts *o, int batch_axis,
                         sb_error *err)
{
    static const char *comp[2] = {"samples", "labels"};
    if (o->nlayouts != 2 || !o->layouts)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: layouts and data structure do not match: %d "
                       "layouts for 2 components (samples, labels)", o->nlayouts);
    for (int c = 0; c < 2; c++) {
        const sb_layout *l = &o->layouts[c];
        int want = c == 0 ? 1 + src->nd : 1;
        if (l->nd != want)
            return sb_fail(err, SB_EXIT_INPUT, "dataset: layouts and data structure do not match: "
                           "the %s layout has rank %d, the %s have rank %d (batch dim first)",
                           comp[c], l->nd, comp[c], want);
        if (!mesh_equal(&l->mesh, o->mesh))
            return sb_fail(err, SB_EXIT_INPUT, "dataset: the %s layout is on another mesh than "
                           "the dataset's", comp[c]);
        if (batch_axis >= 0 && l->axis[0] != batch_axis)
            return sb_fail(err, SB_EXIT_INPUT, "dataset: batch dim '%s' was named, but it is not "
                           "the first sharded dim of the %s layout (dim 0 is %s)", o->batch_axis,
                           comp[c], l->axis[0] < 0 ? SB_UNSHARDED : l->mesh.axis[l->axis[0]]);
        if (batch_axis < 0 && l->axis[0] >= 0)
            return sb_fail(err, SB_EXIT_INPUT, "dataset: the %s layout shards the batch dim over "
                           "'%s' but no batch dim was named", comp[c], l->mesh.axis[l->axis[0]]);
        for (int d = 1; d < l->nd; d++)
            if (l->axis[d] >= 0)
                return sb_fail(err, SB_EXIT_INPUT, "dataset: the %s layout shards dim %d over "
                               "'%s'; only the batch dim can be sharded", comp[c], d,
                               l->mesh.axis[l->axis[d]]);
    }
    return 0;
}

/* Batch sizes: per replica = global / replicas, checked against a dataset
 * already batched per replica; batches per epoch after drop-remainder. */
static int check_sizes(sb_dataset *d, const sb_dataset_opts *o, int replicas, sb_error *err)
{
    if (o->global_batch < 1)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: global batch size %lld",
                       (long long)o->global_batch);
    if (o->global_batch % replicas)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: global batch size %lld is not divisible by "
                       "the %d replicas of batch dim '%s'", (long long)o->global_batch, replicas,
                       o->batch_axis);
    d->global = o->global_batch;
    d->per_replica = o->global_batch / replicas;
    if (o->per_replica_batch && o->per_replica_batch != d->per_replica)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: per-replica batch size mismatch: the dataset "
                       "is batched with %lld per replica, but global batch %lld over %d replicas "
                       "is %lld", (long long)o->per_replica_batch, (long long)o->global_batch,
                       replicas, (long long)d->per_replica);
    int64_t n = d->src->count;
    if (!o->drop_remainder && n % d->global)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: %lld samples are not a multiple of the global "
                       "batch %lld (set drop_remainder)", (long long)n, (long long)d->global);
    d->batches = n / d->global;
    if (d->batches == 0)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: %lld samples hold no full global batch of "
                       "%lld", (long long)n, (long long)d->global);
    return 0;
}

/* The next batch into sl (producer side). */
static int produce(sb_dataset *d, slot *sl)
{
    if (d->perm_epoch != d->next_epoch) {
        sb_dataset_permutation(d->seed, d->next_epoch, d->src->count, d->perm);
        d->perm_epoch = d->next_epoch;
    }
    int64_t base = d->next_batch * d->global + d->replica * d->per_replica;
    for (int64_t j = 0; j < d->per_replica; j++) {
        int64_t i = d->perm[base + j];
        sl->index[j] = i;
        if (source_read(d->src, i, sl->x + j * d->src->sample_floats, &sl->labels[j], d->scratch,
                        &sl->err))
            return sl->rc = -1;
    }
    sl->epoch = d->next_epoch;
    if (++d->next_batch == d->batches) {
        d->next_batch = 0;
        d->next_epoch++;
    }
    return sl->rc = 0;
}

static void *prefetch_main(void *arg)
{
    sb_dataset *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->s.full && !d->stop)
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop)
            break;
        pthread_mutex_unlock(&d->mu);
        produce(d, &d->s); /* the consumer does not touch the slot while it is empty */
        pthread_mutex_lock(&d->mu);
        d->s.full = 1;
        pthread_cond_broadcast(&d->cv);
        if (d->s.rc)
            break; /* an error ends prefetching; next() reports it */
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static int dataset_alloc(sb_dataset *d, sb_error *err)
{
    int64_t n = d->per_replica;
    d->s.x = sb_malloc((size_t)(n * d->src->sample_floats) * sizeof(float), err);
    d->s.labels = sb_malloc((size_t)n * sizeof(int32_t), err);
    d->s.index = sb_malloc((size_t)n * sizeof(int64_t), err);
    d->perm = sb_malloc((size_t)d->src->count * sizeof(int64_t), err);
    d->scratch = sb_malloc(d->src->record_bytes + 1, err);
    return d->s.x && d->s.labels && d->s.index && d->perm && d->scratch ? 0 : -1;
}

static void dataset_free(sb_dataset *d)
{
    free(d->s.x);
    free(d->s.labels);
    free(d->s.index);
    free(d->perm);
    free(d->scratch);
    free(d);
}

int sb_dataset_open(sb_data_source *src, int rank, const sb_dataset_opts *o, sb_dataset **out,
                    sb_error *err)
{
    *out = NULL;
    int ba = -1, g[SB_MESH_MAX_AXES];
    if (o->batch_axis && (ba = sb_mesh_axis(o->mesh, o->batch_axis)) < 0)
        return sb_fail(err, SB_EXIT_INPUT, "dataset: batch dim '%s' is not an axis of mesh '%s'",
                       o->batch_axis, o->mesh->name);
    if (!sb_mesh_coords(o->mesh, rank, g))
        return sb_fail(err, SB_EXIT_INPUT, "dataset: rank %d is not a device of mesh '%s'", rank,
                       o->mesh->name);
    if (check_layouts(src, o, ba, err))
        return -1;
    sb_dataset *d = sb_calloc(1, sizeof *d, err);
    if (!d)
        return -1;
    d->src = src;
    d->seed = o->seed;
    d->replica = ba < 0 ? 0 : g[ba];
    d->perm_epoch = -1;
    if (check_sizes(d, o, ba < 0 ? 1 : o->mesh->size[ba], err) || dataset_alloc(d, err)) {
        dataset_free(d);
        return -1;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (o->prefetch) {
        int e = pthread_create(&d->thread, NULL, prefetch_main, d);
        if (e) {
            sb_dataset_close(d);
            return sb_fail(err, SB_EXIT_INTERNAL, "dataset: cannot start the prefetch thread: %s",
                           strerror(e));
        }
        d->prefetch = 1;
    }
    *out = d;
    return 0;
}

int64_t sb_dataset_per_replica_batch(const sb_dataset *d) { return d->per_replica; }
int64_t sb_dataset_batches_per_epoch(const sb_dataset *d) { return d->batches; }

int sb_dataset_next(sb_dataset *d, float *x, int32_t *labels, int64_t *index, int64_t *epoch,
                    sb_error *err)
{
    slot *s = &d->s;
    if (d->prefetch) {
        pthread_mutex_lock(&d->mu);
        while (!s->full)
            pthread_cond_wait(&d->cv, &d->mu);
        pthread_mutex_unlock(&d->mu);
    } else {
        produce(d, s);
    }
    int rc = s->rc;
    if (rc) {
        if (err)
            *err = s->err;
        return -1; /* the error stays: later calls report it again */
    }
    int64_t n = d->per_replica;
    memcpy(x, s->x, (size_t)(n * d->src->sample_floats) * sizeof(float));
    memcpy(labels, s->labels, (size_t)n * sizeof *labels);
    if (index)
        memcpy(index, s->index, (size_t)n * sizeof *index);
    if (epoch)
        *epoch = s->epoch;
    if (d->prefetch) {
        pthread_mutex_lock(&d->mu);
        s->full = 0;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
    return 0;
}

void sb_dataset_close(sb_dataset *d)
{
    if (!d)
        return;
    if (d->prefetch) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    dataset_free(d);
}
