/* runtime/cuda/cuda_host.c: host-side logic of the cuda backend (see
 * cuda_host.h): pool arithmetic, algorithm cache, precision and comm-mode
 * parsing, geometry for the kernels, rank -> GPU mapping, communicator
 * cache. Plain C, no CUDA: unit-tested on hosts without a GPU. */
#define _GNU_SOURCE
#include "cuda_host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../kernels/box_runs.h"
#include "shardbench/common.h"

/* ---- errors ------------------------------------------------------------------- */

void sbc_die(const char *file, int line, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    int init = 0, fin = 0, rank = -1;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "shardbench: cuda backend: rank %d: %s:%d: %s\n", rank, file, line, buf);
    fflush(stderr);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* ---- precision, comm mode ----------------------------------------------------- */

static const char *const prec_names[] = {"fp32", "tf32", "bf16"};

int sbc_precision_parse(const char *s, sbc_precision *out, char *msg, size_t msg_len)
{
    *out = SBC_FP32;
    if (!s || !*s)
        return 0;
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(s, prec_names[i])) {
            *out = (sbc_precision)i;
            return 0;
        }
    if (msg && msg_len)
        snprintf(msg, msg_len, "unknown precision '%s' (fp32, tf32, bf16)", s);
    return -1;
}

const char *sbc_precision_name(sbc_precision p)
{
    return (unsigned)p < 3 ? prec_names[p] : "?";
}

int sbc_comm_mode_parse(const char *s, sbc_comm_mode *out, char *msg, size_t msg_len)
{
    static const char *const names[] = {"auto", "nccl", "mpi"};
    *out = SBC_COMM_AUTO;
    if (!s || !*s)
        return 0;
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(s, names[i])) {
            *out = (sbc_comm_mode)i;
            return 0;
        }
    if (msg && msg_len)
        snprintf(msg, msg_len, "unknown communication mode '%s' (auto, nccl, mpi)", s);
    return -1;
}

int sbc_comm_choose(sbc_comm_mode mode, int gpus_distinct, int nranks, char *msg, size_t msg_len)
{
    switch (mode) {
    case SBC_COMM_MPI: return 0;
    case SBC_COMM_NCCL:
        if (!gpus_distinct) {
            if (msg && msg_len)
                snprintf(msg, msg_len,
                         "SHARDBENCH_COMM=nccl, but ranks of a %d-rank communicator share a GPU "
                         "(one NCCL communicator cannot hold two ranks on one GPU); use "
                         "SHARDBENCH_COMM=mpi or one GPU per rank",
                         nranks);
            return -1;
        }
        return 1;
    default: return gpus_distinct ? 1 : 0;
    }
}

/* ---- pool ------------------------------------------------------------------------ */

int sbc_pool_init(sbc_pool *p, size_t capacity, size_t align)
{
    memset(p, 0, sizeof *p);
    if (align == 0 || (align & (align - 1)))
        return -1;
    p->align = align;
    p->capacity = capacity & ~(align - 1);
    p->cap = 64;
    p->b = malloc((size_t)p->cap * sizeof *p->b);
    if (!p->b)
        return -1;
    p->n = 0;
    if (p->capacity) {
        p->b[0] = (sbc_block){0, p->capacity, 0};
        p->n = 1;
    }
    return 0;
}

void sbc_pool_fini(sbc_pool *p)
{
    free(p->b);
    memset(p, 0, sizeof *p);
}

size_t sbc_pool_rounded(const sbc_pool *p, size_t bytes)
{
    if (bytes == 0)
        return p->align;
    if (bytes > SIZE_MAX - p->align)
        return 0;
    return (bytes + p->align - 1) & ~(p->align - 1);
}

int sbc_pool_alloc(sbc_pool *p, size_t bytes, size_t *off)
{
    size_t need = sbc_pool_rounded(p, bytes);
    int best = -1;
    for (int i = 0; i < p->n && need; i++)
        if (!p->b[i].used && p->b[i].size >= need && (best < 0 || p->b[i].size < p->b[best].size))
            best = i;
    if (best < 0) {
        p->nfail++;
        return -1;
    }
    if (p->b[best].size > need) { /* split: the tail stays free */
        if (p->n == p->cap) {
            sbc_block *nb = realloc(p->b, (size_t)p->cap * 2 * sizeof *nb);
            if (!nb) {
                p->nfail++;
                return -1;
            }
            p->b = nb;
            p->cap *= 2;
        }
        memmove(&p->b[best + 2], &p->b[best + 1], (size_t)(p->n - best - 1) * sizeof *p->b);
        p->b[best + 1] = (sbc_block){p->b[best].off + need, p->b[best].size - need, 0};
        p->b[best].size = need;
        p->n++;
    }
    p->b[best].used = 1;
    p->in_use += need;
    if (p->in_use > p->peak)
        p->peak = p->in_use;
    p->nalloc++;
    *off = p->b[best].off;
    return 0;
}

static void pool_remove(sbc_pool *p, int i)
{
    memmove(&p->b[i], &p->b[i + 1], (size_t)(p->n - i - 1) * sizeof *p->b);
    p->n--;
}

int sbc_pool_free(sbc_pool *p, size_t off)
{
    int lo = 0, hi = p->n - 1, i = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (p->b[mid].off == off) {
            i = mid;
            break;
        }
        if (p->b[mid].off < off)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    if (i < 0 || !p->b[i].used)
        return -1;
    p->b[i].used = 0;
    p->in_use -= p->b[i].size;
    if (i + 1 < p->n && !p->b[i + 1].used) {
        p->b[i].size += p->b[i + 1].size;
        pool_remove(p, i + 1);
    }
    if (i > 0 && !p->b[i - 1].used) {
        p->b[i - 1].size += p->b[i].size;
        pool_remove(p, i);
    }
    return 0;
}

int sbc_pool_block_at(const sbc_pool *p, size_t off, size_t *start, size_t *size)
{
    int lo = 0, hi = p->n - 1, i = -1; /* the last block starting at or before off */
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (p->b[mid].off <= off) {
            i = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    if (i < 0 || !p->b[i].used || off - p->b[i].off >= p->b[i].size)
        return -1;
    *start = p->b[i].off;
    *size = p->b[i].size;
    return 0;
}

size_t sbc_pool_largest_free(const sbc_pool *p)
{
    size_t m = 0;
    for (int i = 0; i < p->n; i++)
        if (!p->b[i].used && p->b[i].size > m)
            m = p->b[i].size;
    return m;
}

size_t sbc_pool_size_for(size_t free_bytes, double frac, int sharing, size_t limit_bytes,
                         size_t align)
{
    if (sharing < 1)
        sharing = 1;
    if (frac <= 0 || frac > 1)
        frac = 1;
    size_t s = (size_t)((double)free_bytes * frac) / (size_t)sharing;
    if (limit_bytes && s > limit_bytes)
        s = limit_bytes;
    return align ? s & ~(align - 1) : s;
}

/* ---- algorithm cache ------------------------------------------------------------- */

sbc_conv_key sbc_conv_key_make(int kind, int B, int C, int H, int W, int N, int R, int S,
                               int pad_h, int pad_w, int stride_h, int stride_w, int H_out,
                               int W_out, int dil_h, int dil_w, int groups, int precision)
{
    sbc_conv_key k;
    memset(&k, 0, sizeof k);
    int v[] = {kind,  B,         C,        H,     W,     N,     R,     S,      pad_h,    pad_w,
               stride_h, stride_w, H_out, W_out, dil_h, dil_w, groups, precision};
    _Static_assert(sizeof v <= sizeof k.v, "SBC_KEY_INTS holds every field");
    memcpy(k.v, v, sizeof v);
    return k;
}

static uint64_t key_hash(const sbc_conv_key *k)
{
    return sbc_hash_bytes(k->v, sizeof k->v);
}

static size_t cache_slot(const sbc_algo_cache *c, const sbc_conv_key *k, int *found)
{
    size_t i = (size_t)(key_hash(k) & (c->cap - 1));
    for (;;) {
        if (!c->used[i]) {
            *found = 0;
            return i;
        }
        if (!memcmp(c->keys[i].v, k->v, sizeof k->v)) {
            *found = 1;
            return i;
        }
        i = (i + 1) & (c->cap - 1);
    }
}

int sbc_algo_cache_get(sbc_algo_cache *c, const sbc_conv_key *k, sbc_conv_algo *val)
{
    int found = 0;
    if (c->cap) {
        size_t i = cache_slot(c, k, &found);
        if (found) {
            *val = c->vals[i];
            c->hits++;
            return 1;
        }
    }
    c->misses++;
    return 0;
}

static int cache_grow(sbc_algo_cache *c)
{
    sbc_algo_cache n = {0};
    n.cap = c->cap ? c->cap * 2 : 16;
    n.keys = calloc(n.cap, sizeof *n.keys);
    n.vals = calloc(n.cap, sizeof *n.vals);
    n.used = calloc(n.cap, 1);
    if (!n.keys || !n.vals || !n.used) {
        free(n.keys);
        free(n.vals);
        free(n.used);
        return -1;
    }
    for (size_t i = 0; i < c->cap; i++)
        if (c->used[i]) {
            int found;
            size_t j = cache_slot(&n, &c->keys[i], &found);
            n.keys[j] = c->keys[i];
            n.vals[j] = c->vals[i];
            n.used[j] = 1;
        }
    n.n = c->n;
    n.hits = c->hits;
    n.misses = c->misses;
    free(c->keys);
    free(c->vals);
    free(c->used);
    *c = n;
    return 0;
}

int sbc_algo_cache_put(sbc_algo_cache *c, const sbc_conv_key *k, const sbc_conv_algo *val)
{
    if ((c->n + 1) * 4 > c->cap * 3 && cache_grow(c))
        return -1;
    int found;
    size_t i = cache_slot(c, k, &found);
    c->keys[i] = *k;
    c->vals[i] = *val;
    if (!found) {
        c->used[i] = 1;
        c->n++;
    }
    return 0;
}

void sbc_algo_cache_free(sbc_algo_cache *c)
{
    free(c->keys);
    free(c->vals);
    free(c->used);
    memset(c, 0, sizeof *c);
}

/* ---- conv window ------------------------------------------------------------------ */

/* cuDNN's output extent for input n, window k, stride s, symmetric pad p */
static int cudnn_out(int n, int k, int s, int p)
{
    int span = n + 2 * p - k;
    return span < 0 ? 0 : span / s + 1;
}

int sbc_conv_window(int H_in, int W_in, int R, int S, int sh, int sw, int pt, int pl, int H_out,
                    int W_out, sbc_window *g)
{
    memset(g, 0, sizeof *g);
    if (H_in <= 0 || W_in <= 0 || R <= 0 || S <= 0 || sh <= 0 || sw <= 0 || H_out <= 0
        || W_out <= 0)
        return -1;
    /* padding smaller than the window too: not every cuDNN algorithm takes more */
    if (pt >= 0 && pl >= 0 && pt < R && pl < S && cudnn_out(H_in, R, sh, pt) == H_out
        && cudnn_out(W_in, S, sw, pl) == W_out) {
        g->direct = 1;
        g->ph = pt;
        g->pw = pl;
        g->xh = H_in;
        g->xw = W_in;
        return 0;
    }
    g->direct = 0;
    g->xh = (H_out - 1) * sh + R;
    g->xw = (W_out - 1) * sw + S;
    g->oh = -pt;
    g->ow = -pl;
    return 0;
}

/* ---- box copy, permute, reduce ------------------------------------------------------ */

void sbc_box_plan_make(sbc_box_plan *p, const int *dst_dims, const int *dst_lo,
                       const int *src_dims, const int *src_lo, const int *size, int nd)
{
    memset(p, 0, sizeof *p);
    if (nd <= 0) { /* a scalar */
        p->nd = 1;
        p->size[0] = 1;
        p->ds[0] = p->ss[0] = 1;
        p->count = 1;
        p->contiguous = 1;
        return;
    }
    for (int d = 0; d < nd; d++)
        if (size[d] <= 0)
            return; /* nd 0: nothing */
    sb_box_runs r;
    sb_box_runs_make(&r, dst_dims, dst_lo, src_dims, src_lo, size, nd);
    nd = r.nd;
    p->d0 = r.d0;
    p->s0 = r.s0;
    p->count = 1;
    for (int d = 0; d < nd; d++) {
        p->ds[d] = r.ds[d];
        p->ss[d] = r.ss[d];
        /* merged runs may exceed INT_MAX only when a tensor does; sizes are int */
        p->size[d] = (int)r.size[d];
        p->count *= r.size[d];
    }
    p->nd = nd;
    p->contiguous = nd == 1;
}

void sbc_perm_plan_make(sbc_perm_plan *p, int nd, const int *dims, const int *perm)
{
    memset(p, 0, sizeof *p);
    if (nd <= 0) {
        p->nd = 1;
        p->odims[0] = 1;
        p->istride[0] = 1;
        p->count = 1;
        p->identity = 1;
        return;
    }
    int64_t sin[SB_MAX_DIMS], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        sin[d] = s;
        s *= dims[d];
    }
    p->nd = nd;
    p->count = 1;
    p->identity = 1;
    for (int d = 0; d < nd; d++) {
        p->odims[d] = dims[perm[d]];
        p->istride[d] = sin[perm[d]];
        p->count *= p->odims[d];
        p->identity &= perm[d] == d;
    }
    if (p->count <= 0)
        p->count = 0;
}

void sbc_reduce_plan_make(sbc_reduce_plan *p, int nd, const int *dims, unsigned axes, long count)
{
    memset(p, 0, sizeof *p);
    int64_t s = 1;
    int64_t st[SB_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = s;
        s *= dims[d];
    }
    p->n_in = nd > 0 ? s : 0;
    p->n_out = p->n_red = 1;
    for (int d = 0; d < nd; d++) {
        if (axes & (1u << d)) {
            p->rdims[p->nr] = dims[d];
            p->rstride[p->nr++] = st[d];
            p->n_red *= dims[d];
        } else {
            p->kdims[p->nk] = dims[d];
            p->kstride[p->nk++] = st[d];
            p->n_out *= dims[d];
        }
    }
    if (p->n_out < 0)
        p->n_out = 0;
    if (p->n_red < 0)
        p->n_red = 0;
    double c = count > 0 ? (double)count : (double)p->n_red;
    p->scale = c > 0 ? (float)(1.0f / (float)c) : 0.0f;
}

/* ---- ranks and GPUs -------------------------------------------------------------- */

static const char *plain_getenv(const char *k) { return getenv(k); }

int sbc_local_rank_env(const char *(*get)(const char *), int *local_rank, int *local_size)
{
    static const char *const pairs[][2] = {
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
        {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
        {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    };
    if (!get)
        get = plain_getenv;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const char *r = get(pairs[i][0]), *s = get(pairs[i][1]);
        if (!r || !*r)
            continue;
        char *end;
        long lr = strtol(r, &end, 10);
        if (*end || lr < 0)
            continue;
        long ls = lr + 1;
        if (s && *s) {
            long v = strtol(s, &end, 10);
            if (!*end && v > lr)
                ls = v;
        }
        if (!strcmp(pairs[i][0], "SLURM_LOCALID")) {
            /* SLURM_TASKS_PER_NODE ("4(x2),3") and this node's index say
             * it for every distribution; SLURM_NTASKS_PER_NODE is only set
             * with --ntasks-per-node */
            const char *tpn = get("SLURM_TASKS_PER_NODE"), *nid = get("SLURM_NODEID");
            long node = nid && *nid ? strtol(nid, &end, 10) : -1;
            int v = node >= 0 && !*end && tpn ? sbc_slurm_tasks_on_node(tpn, (int)node) : -1;
            if (v > lr)
                ls = v;
        }
        *local_rank = (int)lr;
        *local_size = (int)ls;
        return 0;
    }
    return -1;
}

int sbc_slurm_tasks_on_node(const char *tpn, int nodeid)
{
    if (!tpn || nodeid < 0)
        return -1;
    const char *p = tpn;
    long node = 0;
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        long n = strtol(p, &end, 10), k = 1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x' || p[2] < '0' || p[2] > '9')
                return -1;
            k = strtol(p + 2, &end, 10);
            if (*end != ')' || k < 1)
                return -1;
            p = end + 1;
        }
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
        if (n < 0 || n > 1 << 20)
            return -1;
        if (nodeid < node + k)
            return (int)n;
        node += k;
    }
    return -1;
}

int sbc_sharing_for(int local_size, int ndev, int dev, int gpus_per_task)
{
    if (gpus_per_task > 0 && ndev > 0 && dev >= 0 && dev < ndev)
        return 1;
    return sbc_ranks_on_device(local_size, ndev, dev);
}

int sbc_conv_math_ok(sbc_precision p, int math)
{
    if (p == SBC_FP32)
        return math == SBC_MATH_FMA;
    return math == SBC_MATH_DEFAULT || math == SBC_MATH_TENSOR_OP || math == SBC_MATH_FMA;
}

void sbc_conv_algo_add(sbc_conv_algo *a, int n_before, int algo, int math, size_t ws)
{
    if (n_before == 0) {
        *a = (sbc_conv_algo){.algo = algo, .math = math, .workspace = ws};
        return;
    }
    if (a->nalt >= SBC_CONV_ALTS)
        return;
    a->alt_algo[a->nalt] = algo;
    a->alt_math[a->nalt] = math;
    a->alt_ws[a->nalt] = ws;
    a->nalt++;
}

int sbc_conv_algo_fit(const sbc_conv_algo *a, size_t avail, sbc_conv_algo *run)
{
    if (a->workspace <= avail) {
        *run = (sbc_conv_algo){.algo = a->algo, .math = a->math, .workspace = a->workspace};
        return 0;
    }
    for (int i = 0; i < a->nalt && i < SBC_CONV_ALTS; i++)
        if (a->alt_ws[i] <= avail) {
            *run = (sbc_conv_algo){.algo = a->alt_algo[i], .math = a->alt_math[i],
                                   .workspace = a->alt_ws[i]};
            return i + 1;
        }
    return -1;
}

int sbc_conv_math_for(sbc_precision p) { return p == SBC_FP32 ? SBC_MATH_FMA : SBC_MATH_TENSOR_OP; }

const char *sbc_cuda_version_str(int v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
    return buf;
}

const char *sbc_cudnn_version_str(long v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%ld.%ld.%ld", v / 10000, v % 10000 / 100, v % 100);
    return buf;
}

const char *sbc_nccl_version_str(int v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "none");
    else if (v < 20900) /* before 2.9: 1000 * major + 100 * minor + patch */
        snprintf(buf, len, "%d.%d.%d", v / 1000, v % 1000 / 100, v % 100);
    else
        snprintf(buf, len, "%d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
    return buf;
}

int sbc_device_for(int local_rank, int ndev)
{
    return ndev > 0 ? (local_rank < 0 ? 0 : local_rank % ndev) : -1;
}

int sbc_ranks_on_device(int local_size, int ndev, int dev)
{
    if (ndev <= 0 || dev < 0 || dev >= ndev)
        return 0;
    int n = 0;
    for (int r = 0; r < local_size; r++)
        n += r % ndev == dev;
    return n;
}

uint64_t sbc_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

int sbc_gpus_distinct(const sbc_gpu_id *ids, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (ids[i].node == ids[j].node && ids[i].gpu == ids[j].gpu)
                return 0;
    return 1;
}

/* ---- communicator cache ----------------------------------------------------------- */

struct sbc_comm_cache {
    sbc_comm_entry **e;
    int n, cap;
    int keyval;
    void (*destroy)(void *handle);
    void **pending; /* handles of freed communicators, destroyed by sbc_comm_cache_reap */
    int npending, cappending;
};

/* Drops comm's entry; its handle waits in pending (destroying an NCCL
 * communicator inside MPI's attribute callback, i.e. inside MPI_Comm_free
 * or MPI_Finalize, is what this avoids). -1 when out of host memory for
 * pending: then the handle is destroyed at once. */
static void cache_evict(sbc_comm_cache *c, MPI_Comm comm)
{
    for (int i = 0; i < c->n; i++)
        if (c->e[i]->comm == comm) {
            void *h = c->e[i]->handle;
            free(c->e[i]);
            c->e[i] = c->e[--c->n];
            if (!h || !c->destroy)
                return;
            if (c->npending == c->cappending) {
                int nc = c->cappending ? 2 * c->cappending : 8;
                void **np = realloc(c->pending, (size_t)nc * sizeof *np);
                if (!np) {
                    c->destroy(h);
                    return;
                }
                c->pending = np;
                c->cappending = nc;
            }
            c->pending[c->npending++] = h;
            return;
        }
}

/* MPI calls this when a communicator carrying our attribute is freed. */
static int comm_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)keyval;
    (void)attr;
    cache_evict((sbc_comm_cache *)extra, comm);
    return MPI_SUCCESS;
}

int sbc_nccl_split_color(int mpi_color) { return mpi_color < 0 ? SBC_SPLIT_NOCOLOR : mpi_color; }

int sbc_comm_cache_reap(sbc_comm_cache *c)
{
    int k = c->npending;
    for (int i = 0; i < k; i++)
        c->destroy(c->pending[i]);
    c->npending = 0;
    return k;
}

int sbc_comm_cache_pending(const sbc_comm_cache *c) { return c->npending; }

sbc_comm_entry *sbc_comm_cache_at(sbc_comm_cache *c, int i)
{
    return i >= 0 && i < c->n ? c->e[i] : NULL;
}

sbc_comm_cache *sbc_comm_cache_new(void (*destroy)(void *handle))
{
    sbc_comm_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->destroy = destroy;
    c->keyval = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_fn, &c->keyval, c)
        != MPI_SUCCESS) {
        free(c);
        return NULL;
    }
    return c;
}

sbc_comm_entry *sbc_comm_cache_find(sbc_comm_cache *c, MPI_Comm comm)
{
    for (int i = 0; i < c->n; i++)
        if (c->e[i]->comm == comm)
            return c->e[i];
    return NULL;
}

sbc_comm_entry *sbc_comm_cache_add(sbc_comm_cache *c, MPI_Comm comm, int use_nccl, void *handle)
{
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 16;
        sbc_comm_entry **ne = realloc(c->e, (size_t)nc * sizeof *ne);
        if (!ne)
            return NULL;
        c->e = ne;
        c->cap = nc;
    }
    sbc_comm_entry *en = malloc(sizeof *en);
    if (!en)
        return NULL;
    *en = (sbc_comm_entry){comm, use_nccl, handle};
    c->e[c->n++] = en;
    if (MPI_Comm_set_attr(comm, c->keyval, en) != MPI_SUCCESS) {
        c->n--;
        free(en);
        return NULL;
    }
    return en;
}

int sbc_comm_cache_size(const sbc_comm_cache *c) { return c->n; }

void sbc_comm_cache_free(sbc_comm_cache *c)
{
    if (!c)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    while (c->n > 0) {
        MPI_Comm comm = c->e[c->n - 1]->comm;
        if (!fin)
            MPI_Comm_delete_attr(comm, c->keyval); /* evicts through comm_delete_fn */
        if (c->n > 0 && c->e[c->n - 1]->comm == comm)
            cache_evict(c, comm);
    }
    sbc_comm_cache_reap(c);
    free(c->pending);
    if (!fin)
        MPI_Comm_free_keyval(&c->keyval);
    free(c->e);
    free(c);
}

int sbc_grow_count(int have, int need, int first)
{
    if (need <= have)
        return have;
    int n = have > first ? have : first > 0 ? first : 1;
    while (n < need)
        n *= 2;
    return n;
}

/* ---- bf16 shadows of weights ---- */

/* index of the first entry whose base is > p */
static int shadow_upper(const sbc_shadow_map *m, uintptr_t p)
{
    int lo = 0, hi = m->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (m->e[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

sbc_shadow *sbc_shadow_find(const sbc_shadow_map *m, uintptr_t p, size_t bytes)
{
    int i = shadow_upper(m, p) - 1; /* the last entry starting at or before p */
    if (i < 0)
        return NULL;
    sbc_shadow *e = &m->e[i];
    size_t off = (size_t)(p - e->base);
    if (off >= e->bytes || bytes > e->bytes - off)
        return NULL;
    return e;
}

sbc_shadow *sbc_shadow_at(const sbc_shadow_map *m, uintptr_t base)
{
    int i = shadow_upper(m, base) - 1;
    return i >= 0 && m->e[i].base == base ? &m->e[i] : NULL;
}

int sbc_shadow_add(sbc_shadow_map *m, uintptr_t base, size_t bytes, void *shadow)
{
    if (!bytes || base + bytes < base)
        return -1;
    int i = shadow_upper(m, base);
    if (i > 0 && m->e[i - 1].base + m->e[i - 1].bytes > base)
        return -1; /* the one before reaches into it (or starts at base) */
    if (i < m->n && m->e[i].base < base + bytes)
        return -1; /* it reaches into the next */
    if (sb_grow((void **)&m->e, &m->cap, m->n, sizeof *m->e, 64))
        return -1;
    memmove(&m->e[i + 1], &m->e[i], (size_t)(m->n - i) * sizeof *m->e);
    m->e[i] = (sbc_shadow){base, bytes, NULL, 0};
    m->n++;
    sbc_shadow_attach(m, &m->e[i], shadow);
    return 0;
}

void *sbc_shadow_attach(sbc_shadow_map *m, sbc_shadow *e, void *shadow)
{
    void *old = e->shadow;
    if (old)
        m->shadow_bytes -= e->bytes / 2;
    e->shadow = shadow;
    if (shadow)
        m->shadow_bytes += e->bytes / 2;
    return old;
}

void *sbc_shadow_remove(sbc_shadow_map *m, uintptr_t base)
{
    sbc_shadow *e = sbc_shadow_at(m, base);
    if (!e)
        return NULL;
    void *s = sbc_shadow_attach(m, e, NULL);
    int i = (int)(e - m->e);
    memmove(&m->e[i], &m->e[i + 1], (size_t)(m->n - i - 1) * sizeof *m->e);
    m->n--;
    return s;
}

int sbc_shadow_stale(sbc_shadow_map *m, uintptr_t p, size_t bytes)
{
    int k = 0, i = shadow_upper(m, p) - 1; /* the last entry starting at or before p */
    /* entries that start before p + bytes and end after p */
    for (i = i < 0 ? 0 : i; bytes && i < m->n && m->e[i].base < p + bytes; i++)
        if (m->e[i].base + m->e[i].bytes > p && m->e[i].fresh) {
            m->e[i].fresh = 0;
            k++;
        }
    return k;
}

void sbc_shadow_map_free(sbc_shadow_map *m)
{
    free(m->e);
    *m = (sbc_shadow_map){0};
}

/* ---- bf16 conversions of GEMM operands ---- */

void *sbc_act_find(sbc_act_cache *c, uintptr_t p, size_t bytes)
{
    for (int i = 0; i < c->n; i++) {
        sbc_act_conv *e = &c->e[i];
        if (p < e->base || p - e->base >= e->bytes || bytes > e->bytes - (p - e->base))
            continue;
        e->used = ++c->clock;
        e->pinned = 1;
        return (char *)e->b16 + (p - e->base) / 2;
    }
    return NULL;
}

static void act_remove(sbc_act_cache *c, int i, void (*put)(void *))
{
    put(c->e[i].b16);
    c->bytes -= c->e[i].bytes / 2;
    c->e[i] = c->e[--c->n];
}

int sbc_act_keep(sbc_act_cache *c, uintptr_t p, size_t bytes, void *b16, void (*put)(void *))
{
    size_t need = bytes / 2;
    if (need > c->max_bytes || sb_grow((void **)&c->e, &c->cap, c->n, sizeof *c->e, 64))
        return -1;
    while (c->bytes + need > c->max_bytes) { /* the least recently used unpinned one goes */
        int at = -1;
        for (int i = 0; i < c->n; i++)
            if (!c->e[i].pinned && (at < 0 || c->e[i].used < c->e[at].used))
                at = i;
        if (at < 0)
            return -1;
        act_remove(c, at, put);
    }
    c->e[c->n++] = (sbc_act_conv){p, bytes, b16, ++c->clock, 1};
    c->bytes += need;
    return 0;
}

size_t sbc_span_floats(int rows, int cols, int ld, ptrdiff_t stride, int batch)
{
    size_t one = (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
    return (size_t)(batch - 1) * (size_t)(stride > 0 ? stride : 0) + one;
}

const void *sbc_act_operand(sbc_act_cache *c, const sbc_act_mem *m, const float *p, size_t n,
                            void **tmp, int *reused, const char *what)
{
    *tmp = NULL;
    void *kept = sbc_act_find(c, (uintptr_t)p, n * sizeof(float));
    *reused = kept != NULL;
    if (kept)
        return kept;
    void *b16 = m->get(n * 2, what);
    m->to_bf16(b16, p, n);
    /* those evicted are unpinned: no GEMM being enqueued reads them */
    if (sbc_act_keep(c, (uintptr_t)p, n * sizeof(float), b16, m->put))
        *tmp = b16;
    return b16;
}

void sbc_act_unpin(sbc_act_cache *c)
{
    for (int i = 0; i < c->n; i++)
        c->e[i].pinned = 0;
}

int sbc_act_drop(sbc_act_cache *c, uintptr_t p, size_t bytes, int keep_pinned,
                 void (*put)(void *))
{
    int k = 0;
    for (int i = 0; i < c->n;) {
        sbc_act_conv *e = &c->e[i];
        int hit = bytes == 0 || (e->base < p + bytes && p < e->base + e->bytes);
        if (!hit || (keep_pinned && e->pinned)) {
            i++;
            continue;
        }
        act_remove(c, i, put);
        k++;
    }
    return k;
}

void sbc_act_free(sbc_act_cache *c, void (*put)(void *))
{
    sbc_act_drop(c, 0, 0, 0, put);
    free(c->e);
    c->e = NULL;
    c->n = c->cap = 0;
}

/* ---- NCCL's own device memory ---- */

/* a positive size from the environment, else def */
static size_t env_size(const char *(*get)(const char *), const char *name, size_t def)
{
    const char *v = get(name);
    if (!v || !*v)
        return def;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end || x <= 0 ? def : (size_t)x;
}

size_t sbc_nccl_comm_bytes(int nranks, const char *(*get)(const char *), sbc_nccl_estimate *e)
{
    sbc_nccl_estimate z = {0};
    if (!get)
        get = plain_getenv;
    if (nranks >= 2) {
        z.per_conn = env_size(get, "NCCL_BUFFSIZE", (size_t)1 << 22) +
                     env_size(get, "NCCL_LL_BUFFSIZE", (size_t)8 * 512 * 8 * 16) +
                     env_size(get, "NCCL_LL128_BUFFSIZE", (size_t)120 * 640 * 8 * 8);
        z.channels = (int)env_size(get, "NCCL_MAX_NCHANNELS", SBC_NCCL_CHANNELS);
        z.conns = nranks > 2 ? 2 : 1;
        z.coll_bytes = (size_t)z.channels * (size_t)z.conns * z.per_conn;
        z.p2p_bytes = (size_t)(nranks - 1) * env_size(get, "NCCL_P2P_NVL_CHUNKSIZE", (size_t)1 << 19) * 8;
        z.bytes = z.coll_bytes + z.p2p_bytes;
    }
    if (e)
        *e = z;
    return z.bytes;
}

size_t sbc_nccl_reserve(int world, int sharing, int nccl_possible,
                        const char *(*get)(const char *))
{
    if (!get)
        get = plain_getenv;
    if (world < 2 || sharing > 1 || !nccl_possible)
        return 0;
    const char *mb = get("SHARDBENCH_CUDA_NCCL_MB");
    if (mb && *mb) {
        char *end;
        long long v = strtoll(mb, &end, 10);
        if (!*end && v >= 0)
            return (size_t)v << 20;
    }
    return SBC_NCCL_RESERVE_COMMS * sbc_nccl_comm_bytes(world, get, NULL);
}

size_t sbc_pool_size_reserving(size_t free_bytes, double frac, int sharing, size_t limit_bytes,
                               size_t reserve, size_t align)
{
    size_t b = sbc_pool_size_for(free_bytes, frac, sharing, limit_bytes, align);
    size_t room = free_bytes > reserve ? free_bytes - reserve : 0;
    if (b > room)
        b = align ? room & ~(align - 1) : room;
    return b;
}
