/* runtime/cuda/backend_cuda.cu: the cuda backend's sb_backend table
 * (runtime.h) for NVIDIA GPUs: start-up (device choice by local rank, "no
 * GPU" detection), the device-memory pool (one cudaMalloc, sub-allocated by
 * cuda_host.c's arithmetic; peak reported), cuBLAS strided batched GEMM in
 * fp32 / tf32 / bf16 (convolutions: conv.cu), the in-place all-reduce and the relayout
 * exchange (NCCL all-reduce and grouped send/recv per MPI communicator when
 * every rank has its own GPU, else host-staged MPI; relayouts pack and
 * unpack on the device, sb_relayout_run_mem). The other kernels are
 * in runtime/kernels/cuda/. What it is not: a second executor, or a user of
 * managed memory. One stream carries everything; `sync` waits for it; the
 * executor's step marks are CUDA events on it, read once per step
 * (cuda_mark, cuda_marks_read). In bf16 each weight buffer the executor
 * declares (weight_set) keeps a bf16 copy in the pool for the GEMMs, and
 * the other operands' conversions are kept for later GEMMs until their
 * source's block may have been written (sbc_act_cache: every table entry
 * that may write is wrapped, writes.hpp) or is freed. The pool leaves room for
 * NCCL's own buffers (sbc_nccl_reserve).
 *
 * Environment (`shardbench run --precision P --comm C` sets the first two):
 *   SHARDBENCH_PRECISION  fp32 (default) | tf32 | bf16 (bf16 GEMM operands:
 *                         weights from their bf16 copies, the other operand
 *                         converted and kept for later GEMMs while its
 *                         source is unwritten; fp32 accumulation;
 *                         convolutions then use tf32)
 *   SHARDBENCH_COMM       auto (default) | nccl | mpi
 *   SHARDBENCH_CUDA_POOL_MB   pool size (default: 85% of the free device
 *                         memory, shared evenly by the ranks on the GPU)
 *   SHARDBENCH_CUDA_NCCL_MB   device memory the pool leaves for NCCL's
 *                         buffers (default: an estimate, sbc_nccl_reserve)
 *   SHARDBENCH_CUDA_BF16_COPIES=0  bf16: no weight copies and no kept
 *                         conversions, both GEMM operands converted per
 *                         GEMM (to compare against)
 *   SHARDBENCH_CUDA_BF16_KEEP_MB  bf16: the most the kept conversions hold
 *                         (default a quarter of the pool; 0 keeps none)
 *   SHARDBENCH_CUDA_REPORT=1  print pool and cache figures at exit */
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_backend.h"
#include "cuda_internal.h"
#include "writes.hpp"
#include "shardbench/runtime.h"

#define CUBLAS_WS_BYTES ((size_t)32 << 20)

static struct {
    int ready;              /* 1: initialized; -1: failed (msg) */
    char msg[512];
    int device, sharing;
    cudaStream_t stream;
    cublasHandle_t blas;
    sbc_precision prec;
    sbc_comm_mode comm_mode;
    char *base;             /* the pool's block */
    sbc_pool pool;
    int pool_ready;
    sbc_comm_cache *comms;
    float *stage;           /* pinned host staging for the MPI path */
    size_t stage_n;
    float *a2a_send, *a2a_recv; /* pinned staging of relayout exchanges (MPI path) */
    size_t a2a_send_n, a2a_recv_n;
    cudaEvent_t ev0, ev1;
    cudaEvent_t *marks;     /* the executor's step marks (cuda_mark), created as needed */
    int nmarks;
    sbc_shadow_map shadows; /* bf16: the weights' bf16 copies (cuda_weight_set) */
    long shadow_hits, shadow_misses; /* bf16 GEMM operands read from a copy / converted */
    long act_conversions;            /* of those, operands that are no weight */
    double act_conversion_floats;    /* the floats those read */
    sbc_act_cache acts;              /* bf16: those conversions, kept for later GEMMs */
    long act_reuses;                 /* GEMM operands read from a kept conversion */
    long shadow_refreshes;  /* bf16 copies made (once per change of a weight read by a GEMM) */
    int no_shadows;         /* SHARDBENCH_CUDA_BF16_COPIES=0: convert every operand per GEMM */
    sbc_gpu_id me;
    int nccl_comms, mpi_comms;
    size_t nccl_reserve;    /* device memory kept out of the pool for NCCL (sbc_nccl_reserve) */
    size_t nccl_est;        /* NCCL's estimated buffers of the communicators made (sbc_nccl_comm_bytes) */
    int nccl_warned;
} g;

/* ---- errors (sbc_die: cuda_host.c) ---------------------------------------------- */

#define SBC_BLAS(call)                                                                  \
    do {                                                                                \
        cublasStatus_t s_ = (call);                                                     \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                \
            sbc_die(__FILE__, __LINE__, "%s: cuBLAS status %d", #call, (int)s_);        \
    } while (0)

#define SBC_DNN(call)                                                                   \
    do {                                                                                \
        cudnnStatus_t s_ = (call);                                                      \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                 \
            sbc_die(__FILE__, __LINE__, "%s: %s", #call, cudnnGetErrorString(s_));      \
    } while (0)

cudaStream_t sbc_stream(void) { return g.stream; }
static sbc_precision precision_now(void) { return g.prec; }

/* ---- pool ------------------------------------------------------------------------ */

static void pool_init(void)
{
    if (g.pool_ready)
        return;
    size_t free_b = 0, total_b = 0;
    SBC_CUDA(cudaMemGetInfo(&free_b, &total_b));
    size_t limit = 0;
    const char *mb = getenv("SHARDBENCH_CUDA_POOL_MB");
    if (mb && *mb)
        limit = (size_t)strtoull(mb, NULL, 10) << 20;
    /* NCCL's own buffers (cudaMalloc'd by NCCL, outside the pool) stay out of it */
    int world = 1, mpi_on = 0;
    MPI_Initialized(&mpi_on);
    if (mpi_on)
        MPI_Comm_size(MPI_COMM_WORLD, &world);
    g.nccl_reserve = sbc_nccl_reserve(world, g.sharing, g.comm_mode != SBC_COMM_MPI, NULL);
    size_t bytes = sbc_pool_size_reserving(free_b, 0.85, g.sharing, limit, g.nccl_reserve,
                                           POOL_ALIGN);
    if (bytes < ((size_t)64 << 20))
        sbc_die(__FILE__, __LINE__,
                "device %d: only %zu MiB free of %zu MiB for the memory pool (%d rank(s) share "
                "the GPU, %zu MiB kept for NCCL's buffers); free memory or set "
                "SHARDBENCH_CUDA_POOL_MB (SHARDBENCH_CUDA_NCCL_MB: NCCL's share)",
                g.device, free_b >> 20, total_b >> 20, g.sharing, g.nccl_reserve >> 20);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess)
        sbc_die(__FILE__, __LINE__, "device %d: cudaMalloc of the %zu MiB memory pool: %s",
                g.device, bytes >> 20, cudaGetErrorString(e));
    g.base = (char *)p;
    if (sbc_pool_init(&g.pool, bytes, POOL_ALIGN))
        sbc_die(__FILE__, __LINE__, "out of host memory");
    g.pool_ready = 1;
    /* bf16: the conversions of GEMM operands kept for later GEMMs hold at
     * most a quarter of the pool (SHARDBENCH_CUDA_BF16_KEEP_MB) */
    g.acts.max_bytes = bytes / 4;
    const char *keep = getenv("SHARDBENCH_CUDA_BF16_KEEP_MB");
    if (keep && *keep) {
        char *end;
        unsigned long long v = strtoull(keep, &end, 10);
        if (keep[0] < '0' || keep[0] > '9' || *end || v > (SIZE_MAX >> 20))
            sbc_die(__FILE__, __LINE__,
                    "SHARDBENCH_CUDA_BF16_KEEP_MB=%s: not a number of MiB (0 keeps none)", keep);
        g.acts.max_bytes = (size_t)v << 20;
    }
    /* cuBLAS's workspace from the pool too (it would cudaMalloc its own) */
    void *ws = sbc_scratch(CUBLAS_WS_BYTES, "cuBLAS workspace");
    SBC_BLAS(cublasSetWorkspace(g.blas, ws, CUBLAS_WS_BYTES));
}

static void pool_put(void *p);

/* NULL when the pool has no room, even after the kept bf16 conversions
 * that no GEMM being enqueued reads went (they are only a saving). */
static void *pool_get(size_t bytes)
{
    pool_init();
    size_t off;
    if (!sbc_pool_alloc(&g.pool, bytes, &off))
        return g.base + off;
    if (g.acts.n && sbc_act_drop(&g.acts, 0, 0, 1, pool_put) && !sbc_pool_alloc(&g.pool, bytes, &off))
        return g.base + off;
    return NULL;
}

static void pool_put(void *p)
{
    if (!p)
        return;
    if (!g.pool_ready || (char *)p < g.base || sbc_pool_free(&g.pool, (size_t)((char *)p - g.base)))
        sbc_die(__FILE__, __LINE__, "release of %p, which the pool did not hand out", p);
}

void *sbc_scratch(size_t bytes, const char *what)
{
    void *p = pool_get(bytes);
    if (!p)
        sbc_die(__FILE__, __LINE__,
                "device memory pool exhausted: %zu bytes for %s (pool %zu MiB, in use %zu MiB, "
                "largest free block %zu MiB); set SHARDBENCH_CUDA_POOL_MB or use smaller sizes",
                bytes, what, g.pool.capacity >> 20, g.pool.in_use >> 20,
                sbc_pool_largest_free(&g.pool) >> 20);
    return p;
}

void sbc_scratch_free(void *p) { pool_put(p); }

static size_t pool_largest(int init)
{
    if (init)
        pool_init();
    return sbc_pool_largest_free(&g.pool);
}

static void shadows_release(void);

/* Every kept bf16 conversion of a GEMM operand dropped: the pool needs the
 * room, or an entry may write anything. */
static void acts_forget(void)
{
    if (g.acts.n)
        sbc_act_drop(&g.acts, 0, 0, 0, pool_put);
}

/* The kept conversions whose source lies in the pool block holding p
 * dropped (it is written or freed); all of them for a p outside the pool. */
static void acts_block_written(const void *p)
{
    size_t start, size;
    if (!g.acts.n || !p)
        return;
    if (!g.pool_ready || (const char *)p < g.base
        || sbc_pool_block_at(&g.pool, (size_t)((const char *)p - g.base), &start, &size)) {
        acts_forget();
        return;
    }
    sbc_act_drop(&g.acts, (uintptr_t)(g.base + start), size, 0, pool_put);
}

/* A GEMM wrote n floats at C: the kept conversions of what they overlap
 * go. Once, after it: until then they hold the values it reads (one of its
 * operands may be one of them). */
static void acts_written_span(const float *C, size_t n)
{
    if (g.acts.n)
        sbc_act_drop(&g.acts, (uintptr_t)C, n * sizeof(float), 0, pool_put);
}

/* writes.hpp's hook, after every entry that may write device
 * memory: what it may write, or all. */
static void acts_written(void *const *outs, int n, int all)
{
    if (!g.acts.n)
        return;
    if (all) {
        acts_forget();
        return;
    }
    for (int i = 0; i < n; i++)
        acts_block_written(outs[i]);
}

static void *cuda_alloc(size_t bytes)
{
    void *p = pool_get(bytes); /* kept conversions go first (pool_get) */
    if (!p && g.shadows.shadow_bytes) { /* tensors before bf16 copies: they are made again */
        shadows_release();
        p = pool_get(bytes);
    }
    if (!p) /* the caller reports the failure; say why */
        fprintf(stderr,
                "shardbench: cuda backend: device %d: memory pool exhausted: %zu bytes wanted, "
                "pool %zu MiB, in use %zu MiB, largest free block %zu MiB "
                "(SHARDBENCH_CUDA_POOL_MB sets the pool size)\n",
                g.device, bytes, g.pool.capacity >> 20, g.pool.in_use >> 20,
                sbc_pool_largest_free(&g.pool) >> 20);
    return p;
}
/* The bf16 copy of a weight buffer dropped (a buffer released or no more
 * a weight), back to the pool. */
static void shadow_drop(const void *base)
{
    void *s = sbc_shadow_remove(&g.shadows, (uintptr_t)base);
    if (s)
        pool_put(s);
}

/* Every bf16 copy back to the pool (entries kept, stale): for a tensor the
 * pool has no room for otherwise. Between ops only (cuda_alloc), never
 * inside a GEMM that holds a copy's pointer. */
static void shadows_release(void)
{
    for (int i = 0; i < g.shadows.n; i++) {
        void *s = sbc_shadow_attach(&g.shadows, &g.shadows.e[i], NULL);
        g.shadows.e[i].fresh = 0;
        if (s)
            pool_put(s);
    }
}

/* The backend itself wrote n floats at p: a bf16 copy there is stale until
 * the executor's next weight_set. */
static void shadow_written(const float *p, size_t n)
{
    if (g.shadows.n && n)
        sbc_shadow_stale(&g.shadows, (uintptr_t)p, n * sizeof(float));
}

static void cuda_release(void *p)
{
    if (p && g.shadows.n)
        shadow_drop(p);
    acts_block_written(p); /* a block the pool may hand out again */
    pool_put(p);
}

static void cuda_zero(float *p, size_t n)
{
    shadow_written(p, n);
    if (n)
        SBC_CUDA(cudaMemsetAsync(p, 0, n * sizeof(float), g.stream));
}

/* sb_backend.weight_set: in bf16 the weight buffer w (n floats) is entered
 * in the map (or its entry marked stale: the values changed); the bf16
 * copy is made by the first GEMM that reads it (bf16_operand), so weights
 * no GEMM reads (convolutions') get none. fp32 and tf32 keep no copies.
 * n == 0: the entry and its copy go. */
static void cuda_weight_set(const float *w, size_t n)
{
    if (g.prec != SBC_BF16 || g.no_shadows || !w)
        return;
    sbc_shadow *e = sbc_shadow_at(&g.shadows, (uintptr_t)w);
    if (e && (n == 0 || e->bytes != n * sizeof(float))) {
        shadow_drop(w);
        e = NULL;
    }
    if (n == 0)
        return;
    if (e)
        e->fresh = 0;
    else if (sbc_shadow_add(&g.shadows, (uintptr_t)w, n * sizeof(float), NULL))
        return; /* overlaps a buffer entered already, or no host memory: converted per GEMM */
}

/* A bf16 GEMM operand (a span of `n` floats at p): read from its weight
 * buffer's bf16 copy, made (converted, once per change of the weight) when
 * stale; no weight's: read from a kept conversion that holds it, else
 * converted and kept (sbc_act_cache; pinned until the GEMM is enqueued);
 * else (a weight with no room for its copy, keeping off, every place
 * pinned) converted into scratch (*tmp set, to free after the GEMM). */
static const void *bf16_operand(const float *p, size_t n, void **tmp, const char *what)
{
    *tmp = NULL;
    sbc_shadow *e = g.shadows.n ? sbc_shadow_find(&g.shadows, (uintptr_t)p, n * sizeof(float))
                                : NULL;
    if (e && !e->fresh) {
        if (!e->shadow) {
            void *b16 = pool_get(e->bytes / 2);
            if (b16)
                sbc_shadow_attach(&g.shadows, e, b16);
        }
        if (e->shadow) { /* the whole buffer: the stream orders it after its last write */
            sbk_to_bf16(e->shadow, (const float *)e->base, e->bytes / sizeof(float));
            e->fresh = 1;
            g.shadow_refreshes++;
        }
    }
    if (e && e->fresh) {
        g.shadow_hits++;
        return (const char *)e->shadow + ((uintptr_t)p - e->base) / 2;
    }
    int reused = 0;
    const void *b16;
    if (!e && !g.no_shadows) {
        static const sbc_act_mem mem = {sbc_scratch, pool_put, sbk_to_bf16};
        b16 = sbc_act_operand(&g.acts, &mem, p, n, tmp, &reused, what);
    } else {
        b16 = *tmp = sbc_scratch(n * 2, what);
        sbk_to_bf16(*tmp, p, n);
    }
    if (reused) {
        g.act_reuses++;
        return b16;
    }
    g.shadow_misses++;
    if (!e) { /* no weight's span (a weight with no room for its copy is not counted) */
        g.act_conversions++;
        g.act_conversion_floats += (double)n;
    }
    return b16;
}

/* Waits for the stream. With NCCL communicators live it polls instead of
 * blocking: a collective whose peer failed never completes, so each poll
 * also asks every communicator for its asynchronous error and ends the job
 * with NCCL's message (after ncclCommAbort) rather than hanging. */
static void cuda_sync(void)
{
    if (!g.comms || !g.nccl_comms) {
        SBC_CUDA(cudaStreamSynchronize(g.stream));
        return;
    }
    for (;;) {
        cudaError_t q = cudaStreamQuery(g.stream);
        if (q == cudaSuccess)
            return;
        if (q != cudaErrorNotReady)
            SBC_CUDA(q);
        sbc_comm_entry *e;
        for (int i = 0; (e = sbc_comm_cache_at(g.comms, i)) != NULL; i++) {
            ncclResult_t st = ncclSuccess;
            if (!e->use_nccl || !e->handle)
                continue;
            ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)e->handle, &st);
            if (r == ncclSuccess && st == ncclInProgress)
                continue;
            if (r != ncclSuccess || st != ncclSuccess) {
                const char *why = ncclGetErrorString(r != ncclSuccess ? r : st);
                const char *last = ncclGetLastError((ncclComm_t)e->handle);
                ncclCommAbort((ncclComm_t)e->handle);
                e->handle = NULL;
                sbc_die(__FILE__, __LINE__,
                        "NCCL communicator failed while waiting (a peer failed or left?): %s%s%s",
                        why, last && *last ? ": " : "", last ? last : "");
            }
        }
        usleep(50);
    }
}

static void cuda_to_host(float *host, const float *dev, size_t n)
{
    if (!n)
        return;
    SBC_CUDA(cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost, g.stream));
    cuda_sync();
}

static void cuda_from_host(float *dev, const float *host, size_t n)
{
    if (!n)
        return;
    shadow_written(dev, n);
    SBC_CUDA(cudaMemcpyAsync(dev, host, n * sizeof(float), cudaMemcpyHostToDevice, g.stream));
    cuda_sync(); /* the caller may free host right away */
}

/* ---- GEMM (cuBLAS) ------------------------------------------------------------------ */

/* Row-major C = alpha op(A) op(B) + beta C as column-major C^T = op(B)^T op(A)^T. */
static void cuda_gemm_batched(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                              int lda, ptrdiff_t sa, const float *B, int ldb, ptrdiff_t sb,
                              float beta, float *C, int ldc, ptrdiff_t sc, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0)
        return;
    if (K <= 0) { /* empty sum: C = beta C */
        sbk_scale_matrix(C, M, N, ldc, sc, batch, beta);
        acts_written_span(C, sbc_span_floats(M, N, ldc, sc, batch));
        return;
    }
    cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (g.prec == SBC_BF16) {
        /* a weight operand from its bf16 copy (cuda_weight_set), the
         * other converted here */
        size_t na = sbc_span_floats(ta ? K : M, ta ? M : K, lda, sa, batch),
               nb = sbc_span_floats(tb ? N : K, tb ? K : N, ldb, sb, batch);
        void *ta16, *tb16;
        const void *a16 = bf16_operand(A, na, &ta16, "bf16 GEMM operand A"),
                   *b16 = bf16_operand(B, nb, &tb16, "bf16 GEMM operand B");
        SBC_BLAS(cublasGemmStridedBatchedEx(g.blas, opB, opA, N, M, K, &alpha, b16, CUDA_R_16BF,
                                            ldb, (long long)sb, a16, CUDA_R_16BF, lda,
                                            (long long)sa, &beta, C, CUDA_R_32F, ldc,
                                            (long long)sc, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
        sbc_act_unpin(&g.acts); /* enqueued: later pool traffic is ordered after it */
        acts_written_span(C, sbc_span_floats(M, N, ldc, sc, batch));
        if (ta16)
            sbc_scratch_free(ta16);
        if (tb16)
            sbc_scratch_free(tb16);
        return;
    }
    cublasComputeType_t ct = g.prec == SBC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    SBC_BLAS(cublasGemmStridedBatchedEx(g.blas, opB, opA, N, M, K, &alpha, B, CUDA_R_32F, ldb,
                                        (long long)sb, A, CUDA_R_32F, lda, (long long)sa, &beta,
                                        C, CUDA_R_32F, ldc, (long long)sc, batch, ct,
                                        CUBLAS_GEMM_DEFAULT));
}

/* ---- communication ------------------------------------------------------------------- */

static void nccl_destroy(void *h) { ncclCommDestroy((ncclComm_t)h); }

static void comm_fail(char *msg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, 512, fmt, ap);
    va_end(ap);
}

/* A new NCCL communicator of n ranks: its buffers' estimate counted, and
 * one warning when the estimates pass what the pool left for NCCL. */
static void nccl_count(int n)
{
    g.nccl_comms++;
    g.nccl_est += sbc_nccl_comm_bytes(n, NULL, NULL);
    if (g.pool_ready && !g.nccl_warned && g.nccl_est > g.nccl_reserve) {
        g.nccl_warned = 1;
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        fprintf(stderr,
                "shardbench: cuda backend: rank %d: NCCL's buffers of %d communicators, about "
                "%zu MiB, pass the %zu MiB kept out of the memory pool for them "
                "(SHARDBENCH_CUDA_NCCL_MB)\n",
                rank, g.nccl_comms, g.nccl_est >> 20, g.nccl_reserve >> 20);
    }
}

/* First all-reduce over comm (collective over it): learn which GPUs its
 * ranks drive, choose the path, make the NCCL communicator. */
static sbc_comm_entry *comm_setup(MPI_Comm comm, char *msg)
{
    int n, r;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    sbc_gpu_id *ids = (sbc_gpu_id *)malloc((size_t)n * sizeof *ids);
    if (!ids) {
        comm_fail(msg, "out of host memory");
        return NULL;
    }
    MPI_Allgather(&g.me, (int)sizeof g.me, MPI_BYTE, ids, (int)sizeof g.me, MPI_BYTE, comm);
    int distinct = sbc_gpus_distinct(ids, n);
    free(ids);
    int use = sbc_comm_choose(g.comm_mode, distinct, n, msg, 512);
    if (use < 0)
        return NULL;
    ncclComm_t nc = NULL;
    if (use) {
        ncclUniqueId id;
        int ok = r != 0 || ncclGetUniqueId(&id) == ncclSuccess, all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
        if (!all) {
            comm_fail(msg, "ncclGetUniqueId failed on the communicator's rank 0");
            return NULL;
        }
        MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm);
        ncclResult_t res = ncclCommInitRank(&nc, n, id, r);
        if (res != ncclSuccess) {
            comm_fail(msg, "ncclCommInitRank (%d ranks): %s", n, ncclGetErrorString(res));
            return NULL;
        }
    }
    sbc_comm_entry *e = sbc_comm_cache_add(g.comms, comm, use, nc);
    if (!e) {
        if (nc)
            ncclCommDestroy(nc);
        comm_fail(msg, "out of host memory (communicator cache)");
        return NULL;
    }
    if (use)
        nccl_count(n);
    else
        g.mpi_comms++;
    return e;
}

/* The communicator cache entry of comm, set up at its first use
 * (collective over comm). NULL (after a message on stderr) on failure. */
static sbc_comm_entry *comm_entry(MPI_Comm comm, const char *what)
{
    if (!g.comms && !(g.comms = sbc_comm_cache_new(nccl_destroy))) {
        fprintf(stderr, "shardbench: cuda backend: cannot create the communicator cache\n");
        return NULL;
    }
    sbc_comm_cache_reap(g.comms); /* NCCL comms of freed MPI comms, out of MPI's callbacks */
    sbc_comm_entry *e = sbc_comm_cache_find(g.comms, comm);
    if (!e) {
        char msg[512] = "";
        e = comm_setup(comm, msg);
        if (!e) {
            int rank;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            fprintf(stderr, "shardbench: cuda backend: rank %d: %s: %s\n", rank, what, msg);
        }
    }
    return e;
}

/* Grows a pinned host buffer to n floats. */
static float *pinned(float **buf, size_t *have, size_t n)
{
    if (*have < n) {
        if (*buf)
            SBC_CUDA(cudaFreeHost(*buf));
        *buf = NULL;
        SBC_CUDA(cudaMallocHost((void **)buf, (n ? n : 1) * sizeof(float)));
        *have = n;
    }
    return *buf;
}

/* Span (floats) that counts and displacements cover in a buffer. */
static size_t span_of(const int *count, const int *displ, int n)
{
    size_t s = 0;
    for (int p = 0; p < n; p++)
        if (count[p] > 0 && (size_t)displ[p] + (size_t)count[p] > s)
            s = (size_t)displ[p] + (size_t)count[p];
    return s;
}

static int staged_allreduce(float *p, size_t n, MPI_Op op, MPI_Comm comm)
{
    pinned(&g.stage, &g.stage_n, n);
    cuda_to_host(g.stage, p, n);
    float *h = g.stage;
    size_t left = n;
    while (left > 0) {
        int chunk = left > ((size_t)1 << 30) ? 1 << 30 : (int)left;
        int rc = MPI_Allreduce(MPI_IN_PLACE, h, chunk, MPI_FLOAT, op, comm);
        if (rc != MPI_SUCCESS)
            return rc;
        h += chunk;
        left -= (size_t)chunk;
    }
    cuda_from_host(p, g.stage, n);
    return 0;
}

static int cuda_allreduce(float *p, size_t n, MPI_Op op, MPI_Comm comm)
{
    int size;
    if (n == 0 || comm == MPI_COMM_NULL)
        return 0;
    MPI_Comm_size(comm, &size);
    if (size == 1)
        return 0;
    sbc_comm_entry *e = comm_entry(comm, "all-reduce");
    if (!e)
        return MPI_ERR_OTHER;
    ncclRedOp_t nop = op == MPI_SUM ? ncclSum : op == MPI_MAX ? ncclMax : op == MPI_MIN ? ncclMin
                                                                         : op == MPI_PROD ? ncclProd
                                                                                          : ncclNumOps;
    if (e->use_nccl && nop != ncclNumOps) {
        ncclResult_t res = ncclAllReduce(p, p, n, ncclFloat, nop, (ncclComm_t)e->handle, g.stream);
        if (res != ncclSuccess) {
            fprintf(stderr, "shardbench: cuda backend: ncclAllReduce of %zu floats: %s\n", n,
                    ncclGetErrorString(res));
            return MPI_ERR_OTHER;
        }
        return 0;
    }
    return staged_allreduce(p, n, op, comm);
}

/* ZeRO's collectives (runtime.h): ncclReduceScatter / ncclAllGather when
 * NCCL serves comm and the slices are equal (NCCL's blocks are), else
 * staged through pinned host memory and MPI_Reduce_scatter /
 * MPI_Allgatherv (uneven slices, ranks sharing a GPU). */
static int equal_counts(const int *count, int q)
{
    for (int r = 1; r < q; r++)
        if (count[r] != count[0])
            return 0;
    return 1;
}

static int cuda_reduce_scatter(const float *send, float *recv, const int *count, const int *displ,
                               MPI_Comm comm)
{
    int q, me;
    MPI_Comm_size(comm, &q);
    MPI_Comm_rank(comm, &me);
    size_t n = (size_t)displ[q - 1] + (size_t)count[q - 1];
    sbc_comm_entry *e = comm_entry(comm, "reduce-scatter");
    if (!e)
        return MPI_ERR_OTHER;
    if (e->use_nccl && equal_counts(count, q)) {
        if (count[0] == 0)
            return 0;
        ncclResult_t res = ncclReduceScatter(send, recv, (size_t)count[0], ncclFloat, ncclSum,
                                             (ncclComm_t)e->handle, g.stream);
        if (res != ncclSuccess) {
            fprintf(stderr, "shardbench: cuda backend: ncclReduceScatter of %zu floats: %s\n", n,
                    ncclGetErrorString(res));
            return MPI_ERR_OTHER;
        }
        return 0;
    }
    float *hs = pinned(&g.a2a_send, &g.a2a_send_n, n);
    float *hr = pinned(&g.a2a_recv, &g.a2a_recv_n, (size_t)count[me]);
    if (n)
        cuda_to_host(hs, send, n);
    int rc = MPI_Reduce_scatter(hs, hr, count, MPI_FLOAT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    if (count[me])
        cuda_from_host(recv, hr, (size_t)count[me]);
    return 0;
}

static int cuda_allgather(float *p, const int *count, const int *displ, MPI_Comm comm)
{
    int q, me;
    MPI_Comm_size(comm, &q);
    MPI_Comm_rank(comm, &me);
    size_t n = (size_t)displ[q - 1] + (size_t)count[q - 1];
    shadow_written(p, n);
    sbc_comm_entry *e = comm_entry(comm, "all-gather");
    if (!e)
        return MPI_ERR_OTHER;
    if (e->use_nccl && equal_counts(count, q)) {
        if (count[0] == 0)
            return 0;
        ncclResult_t res = ncclAllGather(p + displ[me], p, (size_t)count[0], ncclFloat,
                                         (ncclComm_t)e->handle, g.stream);
        if (res != ncclSuccess) {
            fprintf(stderr, "shardbench: cuda backend: ncclAllGather of %zu floats: %s\n", n,
                    ncclGetErrorString(res));
            return MPI_ERR_OTHER;
        }
        return 0;
    }
    float *h = pinned(&g.stage, &g.stage_n, n);
    if (count[me])
        cuda_to_host(h + displ[me], p + displ[me], (size_t)count[me]);
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, count, displ, MPI_FLOAT, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    if (n)
        cuda_from_host(p, h, n);
    return 0;
}

/* A relayout's exchange of packed overlaps in device memory: NCCL grouped
 * send/recv when every rank of comm has its own GPU, else staged through
 * pinned host memory and MPI_Alltoallv (ranks sharing a GPU). */
static int cuda_alltoallv(const float *sbuf, const int *scount, const int *sdispl, float *rbuf,
                          const int *rcount, const int *rdispl, MPI_Comm comm)
{
    int n;
    MPI_Comm_size(comm, &n);
    sbc_comm_entry *e = comm_entry(comm, "relayout");
    if (!e)
        return MPI_ERR_OTHER;
    if (e->use_nccl) {
        ncclComm_t nc = (ncclComm_t)e->handle;
        ncclResult_t res = ncclGroupStart();
        for (int p = 0; p < n && res == ncclSuccess; p++) {
            if (scount[p] > 0)
                res = ncclSend(sbuf + sdispl[p], (size_t)scount[p], ncclFloat, p, nc, g.stream);
            if (res == ncclSuccess && rcount[p] > 0)
                res = ncclRecv(rbuf + rdispl[p], (size_t)rcount[p], ncclFloat, p, nc, g.stream);
        }
        ncclResult_t end = ncclGroupEnd();
        if (res == ncclSuccess)
            res = end;
        if (res != ncclSuccess) {
            fprintf(stderr, "shardbench: cuda backend: relayout send/recv: %s\n",
                    ncclGetErrorString(res));
            return MPI_ERR_OTHER;
        }
        return MPI_SUCCESS;
    }
    size_t ns = span_of(scount, sdispl, n), nr = span_of(rcount, rdispl, n);
    float *hs = pinned(&g.a2a_send, &g.a2a_send_n, ns);
    float *hr = pinned(&g.a2a_recv, &g.a2a_recv_n, nr);
    if (ns)
        SBC_CUDA(cudaMemcpyAsync(hs, sbuf, ns * sizeof(float), cudaMemcpyDeviceToHost, g.stream));
    SBC_CUDA(cudaStreamSynchronize(g.stream));
    int rc = MPI_Alltoallv(hs, scount, sdispl, MPI_FLOAT, hr, rcount, rdispl, MPI_FLOAT, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    /* only the received ranges: a direct receive lands inside the caller's
     * buffer, whose other elements must stay as they are */
    for (int p = 0; p < n; p++)
        if (rcount[p] > 0)
            SBC_CUDA(cudaMemcpyAsync(rbuf + rdispl[p], hr + rdispl[p], (size_t)rcount[p] * sizeof(float),
                                     cudaMemcpyHostToDevice, g.stream));
    SBC_CUDA(cudaStreamSynchronize(g.stream)); /* the host buffer is reused */
    return MPI_SUCCESS;
}

/* ---- stats, timing --------------------------------------------------------------------- */

/* The executor's step marks: event k recorded on the stream, no wait; the
 * events are created at a mark number's first use and recorded again in
 * later steps. */
static void cuda_mark(int k)
{
    if (k < 0)
        return;
    if (k >= g.nmarks) {
        int n = sbc_grow_count(g.nmarks, k + 1, 256);
        cudaEvent_t *p = (cudaEvent_t *)realloc(g.marks, (size_t)n * sizeof *p);
        if (!p)
            sbc_die(__FILE__, __LINE__, "out of host memory (%d timing events)", n);
        g.marks = p;
        for (int i = g.nmarks; i < n; i++)
            SBC_CUDA(cudaEventCreate(&g.marks[i]));
        g.nmarks = n;
    }
    SBC_CUDA(cudaEventRecord(g.marks[k], g.stream));
}

/* One wait for the stream (cuda_sync: NCCL failures end the job rather
 * than hang), then each mark's seconds after mark 0. */
static int cuda_marks_read(int n, double *t)
{
    if (n <= 0)
        return 0;
    if (n > g.nmarks)
        return -1;
    cuda_sync();
    t[0] = 0;
    for (int k = 1; k < n; k++) {
        float ms = 0;
        SBC_CUDA(cudaEventElapsedTime(&ms, g.marks[0], g.marks[k]));
        t[k] = ms * 1e-3;
    }
    return 0;
}

extern "C" const char *sb_cuda_versions(char *buf, size_t len)
{
    char a[5][32], b[5][32];
    int rt = 0, drv = 0, nccl = 0, cbm = 0, cbn = 0, cbp = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess)
        rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        drv = 0;
    if (ncclGetVersion(&nccl) != ncclSuccess)
        nccl = 0;
    cublasGetProperty(MAJOR_VERSION, &cbm);
    cublasGetProperty(MINOR_VERSION, &cbn);
    cublasGetProperty(PATCH_LEVEL, &cbp);
    snprintf(b[2], sizeof b[2], "%d.%d.%d", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
    snprintf(a[2], sizeof a[2], "%d.%d.%d", cbm, cbn, cbp);
    snprintf(buf, len,
             "compiled against CUDA runtime %s, cuBLAS %s, cuDNN %s, NCCL %s; "
             "loaded: CUDA runtime %s, driver %s, cuBLAS %s, cuDNN %s, NCCL %s",
             sbc_cuda_version_str(CUDART_VERSION, b[0], sizeof b[0]), b[2],
             sbc_cudnn_version_str((long)CUDNN_VERSION, b[3], sizeof b[3]),
             sbc_nccl_version_str(NCCL_VERSION_CODE, b[4], sizeof b[4]),
             sbc_cuda_version_str(rt, a[0], sizeof a[0]),
             drv ? sbc_cuda_version_str(drv, a[1], sizeof a[1]) : "none (no driver)", a[2],
             sbc_cudnn_version_str((long)cudnnGetVersion(), a[3], sizeof a[3]),
             sbc_nccl_version_str(nccl, a[4], sizeof a[4]));
    return buf;
}

extern "C" int sb_cuda_stats_get(sb_cuda_stats *s)
{
    if (g.ready != 1)
        return -1;
    static const char *const modes[] = {"auto", "nccl", "mpi"};
    memset(s, 0, sizeof *s);
    s->device = g.device;
    s->sharing = g.sharing;
    s->precision = sbc_precision_name(g.prec);
    s->comm_mode = modes[g.comm_mode];
    if (g.pool_ready) {
        s->pool_bytes = g.pool.capacity;
        s->in_use_bytes = g.pool.in_use;
        s->peak_bytes = g.pool.peak;
        s->allocs = g.pool.nalloc;
        s->failed_allocs = g.pool.nfail;
    }
    sbc_conv_stats(&s->algo_hits, &s->algo_misses, &s->conv_fallbacks);
    s->nccl_comms = g.nccl_comms;
    s->mpi_comms = g.mpi_comms;
    s->nccl_reserve_bytes = g.nccl_reserve;
    s->nccl_est_bytes = g.nccl_est;
    size_t fb = 0, tb = 0;
    if (cudaMemGetInfo(&fb, &tb) == cudaSuccess)
        s->device_free_bytes = fb;
    s->bf16_copies = 0;
    for (int i = 0; i < g.shadows.n; i++)
        s->bf16_copies += g.shadows.e[i].shadow != NULL;
    s->bf16_copy_bytes = g.shadows.shadow_bytes;
    s->bf16_copy_hits = g.shadow_hits;
    s->bf16_conversions = g.shadow_misses;
    s->bf16_act_conversions = g.act_conversions;
    s->bf16_act_floats = g.act_conversion_floats;
    s->bf16_copy_refreshes = g.shadow_refreshes;
    s->bf16_act_reuses = g.act_reuses;
    s->bf16_act_kept_bytes = g.acts.bytes;
    return 0;
}

/* Re-times a step's per-GEMM bf16 conversions alone (perf/gpu): `calls`
 * fp32 -> bf16 conversions of n floats in all, each of the mean size
 * n / calls, from consecutive slices of a source of min(n, 64 Mi) floats
 * (wrapping: beyond L2's size a slice is not read from L2 more often than
 * in the step), on the backend's stream, timed by CUDA events.
 * Milliseconds, or -1 (with why in msg) when the backend is not started or
 * the pool has no room. */
extern "C" double sb_cuda_convert_ms(double n, long calls, char *msg, size_t len)
{
    snprintf(msg, len, "ok");
    if (g.ready != 1 || !g.pool_ready) {
        snprintf(msg, len, "the cuda backend is not started");
        return -1;
    }
    if (calls <= 0 || !(n >= 1))
        return 0;
    size_t each = (size_t)(n / (double)calls), cap = (size_t)64 << 20;
    if (each < 1)
        each = 1;
    size_t total = (size_t)n < cap ? (size_t)n : cap;
    if (total < each)
        total = each;
    float *src = (float *)pool_get(total * sizeof(float));
    void *dst = src ? pool_get(each * 2) : NULL;
    if (!dst) {
        pool_put(src);
        snprintf(msg, len, "no room in the pool for %zu MiB of fp32 to convert",
                 (total * sizeof(float)) >> 20);
        return -1;
    }
    sbk_fill(src, total, 1.0f);
    sbk_to_bf16(dst, src, each); /* warm-up: the kernel loaded */
    sb_cuda_timer_start();
    size_t at = 0;
    for (long i = 0; i < calls; i++) {
        if (at + each > total)
            at = 0;
        sbk_to_bf16(dst, src + at, each);
        at += each;
    }
    double ms = sb_cuda_timer_stop_ms();
    pool_put(dst);
    pool_put(src);
    return ms;
}

extern "C" void sb_cuda_timer_start(void) { SBC_CUDA(cudaEventRecord(g.ev0, g.stream)); }

extern "C" double sb_cuda_timer_stop_ms(void)
{
    float ms = 0;
    SBC_CUDA(cudaEventRecord(g.ev1, g.stream));
    SBC_CUDA(cudaEventSynchronize(g.ev1));
    SBC_CUDA(cudaEventElapsedTime(&ms, g.ev0, g.ev1));
    return ms;
}

static void report_at_exit(void)
{
    sb_cuda_stats s;
    if (sb_cuda_stats_get(&s))
        return;
    fprintf(stderr,
            "cuda backend: device %d (%d rank(s)), %s, pool %zu MiB, peak %.1f MiB, %ld allocs "
            "(%ld failed), cuDNN algo cache %ld hits / %ld searches, %ld fallback(s), %d NCCL + %d MPI comms, "
            "NCCL buffers about %zu MiB (%zu MiB kept out of the pool), %zu MiB free on the device, "
            "bf16 weight copies %d (%.1f MiB, made %ld times, %ld GEMM operands read from them, %ld converted, "
            "%ld of them no weight's, %.1f MiB of fp32 read for those, %ld read again from a kept "
            "conversion, %.1f MiB kept now)\n",
            s.device, s.sharing, s.precision, s.pool_bytes >> 20, (double)s.peak_bytes / 1048576.0,
            s.allocs, s.failed_allocs, s.algo_hits, s.algo_misses, s.conv_fallbacks, s.nccl_comms, s.mpi_comms,
            s.nccl_est_bytes >> 20, s.nccl_reserve_bytes >> 20, s.device_free_bytes >> 20,
            s.bf16_copies, (double)s.bf16_copy_bytes / 1048576.0, s.bf16_copy_refreshes,
            s.bf16_copy_hits, s.bf16_conversions, s.bf16_act_conversions,
            s.bf16_act_floats * 4.0 / 1048576.0, s.bf16_act_reuses,
            (double)s.bf16_act_kept_bytes / 1048576.0);
}

/* NCCL for real on this rank's GPU with no MPI: a 1-rank communicator
 * (ncclCommInitAll), an all-reduce (sum, then max) and a grouped
 * send/recv to itself, on the backend's stream, each result checked
 * against its expected value. 0, or -1 with the cause in msg. */
extern "C" int sb_cuda_nccl_selftest(char *msg, size_t len)
{
    enum { N = 4099 }; /* not a multiple of NCCL's chunking */
    snprintf(msg, len, "ok");
    if (!g.ready) {
        snprintf(msg, len, "the cuda backend is not started");
        return -1;
    }
    ncclComm_t nc = NULL;
    int dev = g.device;
    ncclResult_t r = ncclCommInitAll(&nc, 1, &dev);
    if (r != ncclSuccess) {
        snprintf(msg, len, "ncclCommInitAll (1 rank, device %d): %s", dev, ncclGetErrorString(r));
        return -1;
    }
    float *h = (float *)malloc(2 * N * sizeof(float)), *d = NULL;
    if (!h) {
        ncclCommDestroy(nc);
        snprintf(msg, len, "out of host memory");
        return -1;
    }
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 97) - 40.0f; /* a: N floats, b: N floats */
    SBC_CUDA(cudaMalloc((void **)&d, 2 * N * sizeof(float)));
    SBC_CUDA(cudaMemcpyAsync(d, h, N * sizeof(float), cudaMemcpyHostToDevice, g.stream));
    SBC_CUDA(cudaMemsetAsync(d + N, 0, N * sizeof(float), g.stream));
    int rc = 0;
    const char *step = "";
    /* 1 rank: sum and max of one contribution are the contribution */
    if ((r = ncclAllReduce(d, d, N, ncclFloat, ncclSum, nc, g.stream)) != ncclSuccess)
        step = "ncclAllReduce (sum)";
    else if ((r = ncclAllReduce(d, d, N, ncclFloat, ncclMax, nc, g.stream)) != ncclSuccess)
        step = "ncclAllReduce (max)";
    else {
        /* grouped send/recv to itself: b (d + N) becomes a */
        ncclResult_t e;
        r = ncclGroupStart();
        if (r == ncclSuccess)
            r = ncclSend(d, N, ncclFloat, 0, nc, g.stream);
        if (r == ncclSuccess)
            r = ncclRecv(d + N, N, ncclFloat, 0, nc, g.stream);
        e = ncclGroupEnd();
        if (r == ncclSuccess)
            r = e;
        if (r != ncclSuccess)
            step = "grouped ncclSend/ncclRecv to itself";
    }
    if (r != ncclSuccess) {
        snprintf(msg, len, "%s: %s", step, ncclGetErrorString(r));
        rc = -1;
    }
    SBC_CUDA(cudaStreamSynchronize(g.stream));
    ncclResult_t st = ncclSuccess;
    if (!rc && (ncclCommGetAsyncError(nc, &st) != ncclSuccess || st != ncclSuccess)) {
        snprintf(msg, len, "NCCL asynchronous error: %s", ncclGetErrorString(st));
        rc = -1;
    }
    if (!rc) {
        float *got = h + N;
        SBC_CUDA(cudaMemcpy(got, d, N * sizeof(float), cudaMemcpyDeviceToHost));
        for (int k = 0; k < 2 && !rc; k++) {
            if (k)
                SBC_CUDA(cudaMemcpy(got, d + N, N * sizeof(float), cudaMemcpyDeviceToHost));
            for (int i = 0; i < N; i++)
                if (got[i] != (float)(i % 97) - 40.0f) {
                    snprintf(msg, len, "%s: element %d is %g, expected %g",
                             k ? "send/recv to itself" : "all-reduce", i, (double)got[i],
                             (double)((float)(i % 97) - 40.0f));
                    rc = -1;
                    break;
                }
        }
    }
    SBC_CUDA(cudaFree(d));
    free(h);
    ncclCommDestroy(nc);
    return rc;
}

static_assert(SBC_SPLIT_NOCOLOR == NCCL_SPLIT_NOCOLOR, "cuda_host.h's no-color is NCCL's");

/* After the executor's MPI_Comm_split of parent (collective over parent):
 * when NCCL serves parent, child's NCCL communicator is ncclCommSplit from
 * parent's with the same color and key (so NCCL ranks are MPI ranks), not
 * a fresh ncclCommInitRank at child's first collective. Ranks outside
 * every group take part with NCCL_SPLIT_NOCOLOR. On the MPI path child is
 * set up at its first use as before. */
static void cuda_comm_split(MPI_Comm parent, int color, int key, MPI_Comm child)
{
    sbc_comm_entry *pe = comm_entry(parent, "communicator split");
    if (!pe)
        sbc_die(__FILE__, __LINE__, "cannot set up the parent communicator of a split");
    if (!pe->use_nccl || !pe->handle)
        return;
    ncclComm_t nc = NULL;
    ncclResult_t r = ncclCommSplit((ncclComm_t)pe->handle, sbc_nccl_split_color(color), key, &nc,
                                   NULL);
    if (r != ncclSuccess)
        sbc_die(__FILE__, __LINE__, "ncclCommSplit (color %d, key %d): %s", color, key,
                ncclGetErrorString(r));
    if (child == MPI_COMM_NULL) {
        if (nc)
            ncclCommDestroy(nc);
        return;
    }
    if (!nc)
        sbc_die(__FILE__, __LINE__, "ncclCommSplit gave no communicator for color %d", color);
    if (!sbc_comm_cache_add(g.comms, child, 1, nc))
        sbc_die(__FILE__, __LINE__, "out of host memory (communicator cache)");
    int cn = 1;
    MPI_Comm_size(child, &cn);
    nccl_count(cn);
}

/* Destroys the NCCL communicators of MPI communicators freed since the last
 * lookup (the executor calls it after freeing its groups). */
static void cuda_comm_release(void)
{
    if (g.comms)
        sbc_comm_cache_reap(g.comms);
}

/* Explicit teardown, before MPI_Finalize: every NCCL communicator destroyed
 * here, none inside MPI's attribute callbacks. The backend stays usable
 * (communicators are set up again at their next use). */
extern "C" void sb_cuda_finalize(void)
{
    if (!g.ready)
        return;
    if (g.comms) {
        SBC_CUDA(cudaStreamSynchronize(g.stream));
        sbc_comm_cache_free(g.comms);
        g.comms = NULL;
    }
    sbc_act_free(&g.acts, pool_put);
}

/* The optimizer updates write their weight: its bf16 copy goes stale
 * until the executor's weight_set after the update. */
static void cuda_sgd_update(float *w, float *g_, size_t n, float lr)
{
    shadow_written(w, n);
    sbk_sgd_update(w, g_, n, lr);
}

static void cuda_adam_update(float *w, float *g_, float *m, float *v, size_t n, float lr,
                             float beta1, float beta2, float eps, int t)
{
    shadow_written(w, n);
    sbk_adam_update(w, g_, m, v, n, lr, beta1, beta2, eps, t);
}

/* ---- the table ------------------------------------------------------------------------- */

/* The table as written; `table`, handed out, is it with every entry that
 * may write device memory wrapped to drop, after it, the kept bf16
 * conversions of what it may have written (writes.hpp), made at init. */
static const sb_gemm_kernels raw_gemm = {
    .gemm_batched = cuda_gemm_batched,
};
static const sb_optim_kernels raw_optim = {
    .sgd_update = cuda_sgd_update,
    .adam_update = cuda_adam_update,
};
static const sb_backend raw_table = {
    .name = "cuda",
    .host_memory = 0,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .zero = cuda_zero,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .weight_set = cuda_weight_set,
    .sync = cuda_sync,
    .mark = cuda_mark,
    .marks_read = cuda_marks_read,
    .comm_release = cuda_comm_release,
    .comm_split = cuda_comm_split,
    .finalize = sb_cuda_finalize,
    .allreduce = cuda_allreduce,
    .alltoallv = cuda_alltoallv,
    .reduce_scatter = cuda_reduce_scatter,
    .allgather = cuda_allgather,
    .gemm = &raw_gemm,
    .conv = &sbc_conv,
    .embed = &sbc_embed,
    .lstm = &sbc_lstm,
    .norm = &sbc_norm,
    .softmax = &sbc_softmax,
    .rope = &sbc_rope,
    .pointwise = &sbc_pointwise,
    .sum = &sbc_sum,
    .moe = &sbc_moe,
    .move = &sbc_move,
    .optim = &raw_optim,
};
static sb_backend table;
struct cuda_tag;

static int init_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g.msg, sizeof g.msg, fmt, ap);
    va_end(ap);
    g.ready = -1;
    return -1;
}

static int init(void)
{
    char m[256];
    if (sbc_precision_parse(getenv("SHARDBENCH_PRECISION"), &g.prec, m, sizeof m))
        return init_fail("SHARDBENCH_PRECISION: %s", m);
    if (sbc_comm_mode_parse(getenv("SHARDBENCH_COMM"), &g.comm_mode, m, sizeof m))
        return init_fail("SHARDBENCH_COMM: %s", m);
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess)
        return init_fail("no GPU: cudaGetDeviceCount: %s", cudaGetErrorString(e));
    if (ndev == 0)
        return init_fail("no GPU: cudaGetDeviceCount found no CUDA device");
    int lr = 0, ls = 1;
    if (sbc_local_rank_env(NULL, &lr, &ls)) { /* no launcher variables: one rank */
        lr = 0;
        ls = 1;
    }
    g.device = sbc_device_for(lr, ndev);
    const char *gpt = getenv("SLURM_GPUS_PER_TASK");
    g.sharing = sbc_sharing_for(ls, ndev, g.device, gpt ? atoi(gpt) : 0);
    if ((e = cudaSetDevice(g.device)) != cudaSuccess)
        return init_fail("no GPU: cudaSetDevice(%d): %s", g.device, cudaGetErrorString(e));
    if ((e = cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return init_fail("no GPU: cudaStreamCreate: %s", cudaGetErrorString(e));
    sbk_context_set(g.stream, sbc_scratch, sbc_scratch_free); /* the kernels' stream and scratch */
    cublasStatus_t bs = cublasCreate(&g.blas);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return init_fail("no GPU: cublasCreate failed (status %d)", (int)bs);
    SBC_BLAS(cublasSetStream(g.blas, g.stream));
    SBC_BLAS(cublasSetPointerMode(g.blas, CUBLAS_POINTER_MODE_HOST));
    static const sbc_conv_host lent = {precision_now, pool_largest, cuda_zero};
    if (sbc_conv_init(g.stream, &lent, g.msg, sizeof g.msg))
        return init_fail("%s", g.msg);
    SBC_CUDA(cudaEventCreate(&g.ev0));
    SBC_CUDA(cudaEventCreate(&g.ev1));
    cudaDeviceProp prop;
    SBC_CUDA(cudaGetDeviceProperties(&prop, g.device));
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    g.me.node = sbc_hash_bytes(host, strlen(host));
    g.me.gpu = sbc_hash_bytes(&prop.uuid, sizeof prop.uuid);
    const char *cp = getenv("SHARDBENCH_CUDA_BF16_COPIES");
    g.no_shadows = cp && !strcmp(cp, "0");
    sbc_writes<cuda_tag>::table(&raw_table, &table, acts_written);
    const char *rep = getenv("SHARDBENCH_CUDA_REPORT");
    if (rep && *rep && strcmp(rep, "0"))
        atexit(report_at_exit);
    g.ready = 1;
    return 0;
}

extern "C" const sb_backend *sb_backend_cuda_get(sb_error *err)
{
    if (g.ready == 0)
        init();
    if (g.ready != 1) {
        sb_fail(err, SB_EXIT_INPUT, "%s", g.msg);
        return NULL;
    }
    return &table;
}
