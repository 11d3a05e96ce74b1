/* runtime/cuda/cuda_host.h: the host-side logic of the cuda backend, in
 * plain C with no CUDA header, so CI (no GPU) unit-tests it
 * (tests/unit/cuda_host.c): the device-memory pool's arithmetic, the cuDNN
 * algorithm cache, precision parsing, conv window / box-copy / permute /
 * reduce-mean geometry handed to the kernels, the rank -> GPU mapping, the
 * communicator cache (NCCL or host-staged MPI per MPI communicator), the
 * estimate of NCCL's own buffers, the map of the weights' bf16 copies and
 * the count of step timing events.
 * What it is not: anything that calls CUDA, cuBLAS, cuDNN or NCCL
 * (backend_cuda.cu, comm_cuda.cu do). */
#ifndef SB_RUNTIME_CUDA_HOST_H
#define SB_RUNTIME_CUDA_HOST_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "shardbench/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reports rank, file, line and cause, then ends the job (MPI_Abort when MPI
 * runs): the backend's and the kernels' failures, which cannot return. */
void sbc_die(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* ---- precision ------------------------------------------------------------ */

typedef enum { SBC_FP32 = 0, SBC_TF32 = 1, SBC_BF16 = 2 } sbc_precision;

/* "fp32", "tf32", "bf16" (any case); NULL or "" is fp32. Returns 0, or -1
 * with a message in msg naming the bad value and the valid ones. */
int sbc_precision_parse(const char *s, sbc_precision *out, char *msg, size_t msg_len);
const char *sbc_precision_name(sbc_precision p);

/* ---- device memory pool (offsets into one cudaMalloc'd block) ------------ */

typedef struct {
    size_t off, size;
    int used;
} sbc_block;

typedef struct {
    size_t capacity;    /* bytes of the block */
    size_t align;       /* every allocation starts and ends on this (power of 2) */
    size_t in_use, peak;
    long nalloc, nfail;
    sbc_block *b;       /* sorted by offset, tiling [0, capacity) */
    int n, cap;
} sbc_pool;

/* capacity is rounded down to align; align must be a power of two. */
int sbc_pool_init(sbc_pool *p, size_t capacity, size_t align);
void sbc_pool_fini(sbc_pool *p);
/* Best fit. 0 and *off, or -1 when no free block is large enough (or out
 * of host memory for the bookkeeping). bytes 0 takes one align unit. */
int sbc_pool_alloc(sbc_pool *p, size_t bytes, size_t *off);
/* 0, or -1 if off is not the start of a block in use. Merges neighbours. */
int sbc_pool_free(sbc_pool *p, size_t off);
/* The block in use that holds offset off: 0 with its start and size, or
 * -1 (off is in a free block or past the end). */
int sbc_pool_block_at(const sbc_pool *p, size_t off, size_t *start, size_t *size);
size_t sbc_pool_largest_free(const sbc_pool *p);
/* Bytes a request of `bytes` occupies. */
size_t sbc_pool_rounded(const sbc_pool *p, size_t bytes);
/* Pool size for a rank: frac of the free bytes, shared evenly by the ranks
 * that use the same device, capped by limit_bytes when > 0, rounded down
 * to align. */
size_t sbc_pool_size_for(size_t free_bytes, double frac, int sharing, size_t limit_bytes,
                         size_t align);

/* ---- cuDNN algorithm cache ------------------------------------------------ */

enum { SBC_CONV_FWD = 0, SBC_CONV_BWD_DATA = 1, SBC_CONV_BWD_FILTER = 2 };
#define SBC_KEY_INTS 20

typedef struct {
    int v[SBC_KEY_INTS];
} sbc_conv_key;

#define SBC_CONV_ALTS 7 /* further algorithms kept per shape, fastest first */

typedef struct {
    int algo;           /* cudnn*Algo_t value */
    int math;           /* cudnnMathType_t value */
    size_t workspace;   /* bytes */
    /* the search's next choices (status success, math allowed), fastest
     * first: what runs when the pool cannot spare `workspace` bytes */
    int nalt;
    int alt_algo[SBC_CONV_ALTS], alt_math[SBC_CONV_ALTS];
    size_t alt_ws[SBC_CONV_ALTS];
} sbc_conv_algo;

typedef struct {
    sbc_conv_key *keys;
    sbc_conv_algo *vals;
    unsigned char *used;
    size_t cap, n;
    long hits, misses;
} sbc_algo_cache;

/* The key of one convolution problem (all sizes as cuDNN sees them; dil_h,
 * dil_w: the taps' spacing, groups: the filter groups). */
sbc_conv_key sbc_conv_key_make(int kind, int B, int C, int H, int W, int N, int R, int S,
                               int pad_h, int pad_w, int stride_h, int stride_w, int H_out,
                               int W_out, int dil_h, int dil_w, int groups, int precision);
/* 1 and *val on a hit, 0 on a miss (counted). */
int sbc_algo_cache_get(sbc_algo_cache *c, const sbc_conv_key *k, sbc_conv_algo *val);
/* Inserts or replaces; 0, or -1 out of host memory. */
int sbc_algo_cache_put(sbc_algo_cache *c, const sbc_conv_key *k, const sbc_conv_algo *val);
void sbc_algo_cache_free(sbc_algo_cache *c);
/* Appends (algo, math, ws) to a's candidates: the first call sets the
 * primary, later ones the alternatives (beyond SBC_CONV_ALTS: dropped).
 * Call in the search's order (fastest first). */
void sbc_conv_algo_add(sbc_conv_algo *a, int n_before, int algo, int math, size_t ws);
/* The candidate to run when `avail` bytes of workspace can be had: the
 * first of the primary and its alternatives, in order, whose workspace is
 * at most avail, copied to *run (its alternatives cleared). Returns its
 * index (0 the primary, i + 1 alternative i), or -1 when none fits. */
int sbc_conv_algo_fit(const sbc_conv_algo *a, size_t avail, sbc_conv_algo *run);

/* ---- conv window geometry -------------------------------------------------- */

/* cuDNN's legacy conv takes symmetric, non-negative padding and derives the
 * output size from it; the kernels.h semantics take any local padding
 * (negative on halo boxes) and an independent output size. Direct (pad >= 0
 * and smaller than the window, cuDNN's derived size the wanted one): cuDNN
 * reads inp as it is with pad (ph, pw). Staged: cuDNN reads a staged copy X'
 * of xh x xw with no padding, X'[y][x] = inp[y + oh][x + ow] (0 outside
 * inp), which yields exactly H_out x W_out outputs. */
typedef struct {
    int direct;
    int ph, pw;         /* direct: cuDNN padding */
    int xh, xw;         /* the spatial size cuDNN reads */
    int oh, ow;         /* staged: offset of X' in inp (= -pad_top, -pad_left) */
} sbc_window;

/* 0, or -1 when the geometry is empty or invalid (sizes <= 0). R and S are
 * the window's extent: a dilated kernel's is dil * (taps - 1) + 1. */
int sbc_conv_window(int H_in, int W_in, int R, int S, int sh, int sw, int pt, int pl, int H_out,
                    int W_out, sbc_window *g);

/* ---- box copy, permute and reduce-mean geometry ---------------------------- */

/* dst[d0 + sum i_k*ds_k] (+)= src[s0 + sum i_k*ss_k] for i in size[0..nd):
 * sb_strided_box_copy with trailing axes that both arrays hold whole merged
 * into longer runs. nd == 0 after planning: nothing to copy. */
typedef struct {
    int nd;
    int size[SB_MAX_DIMS];
    int64_t ds[SB_MAX_DIMS], ss[SB_MAX_DIMS];
    int64_t d0, s0;
    int64_t count;      /* elements copied */
    int contiguous;     /* one run (nd == 1): a plain memcpy when not accumulating */
} sbc_box_plan;

void sbc_box_plan_make(sbc_box_plan *p, const int *dst_dims, const int *dst_lo,
                       const int *src_dims, const int *src_lo, const int *size, int nd);

/* out index (row-major over out dims) -> inp offset: sum_k i_k * istride[k]. */
typedef struct {
    int nd;
    int odims[SB_MAX_DIMS];
    int64_t istride[SB_MAX_DIMS];
    int64_t count;
    int identity;       /* perm is the identity: a flat copy */
} sbc_perm_plan;

void sbc_perm_plan_make(sbc_perm_plan *p, int nd, const int *dims, const int *perm);

/* reduce-mean: kept axes (in order) and reduced axes (in order) with their
 * input strides; out is row-major over the kept axes. */
typedef struct {
    int nk, nr;
    int kdims[SB_MAX_DIMS], rdims[SB_MAX_DIMS];
    int64_t kstride[SB_MAX_DIMS], rstride[SB_MAX_DIMS];
    int64_t n_out, n_red, n_in;
    float scale;        /* 1 / (count > 0 ? count : n_red) */
} sbc_reduce_plan;

void sbc_reduce_plan_make(sbc_reduce_plan *p, int nd, const int *dims, unsigned axes, long count);

/* ---- ranks and GPUs ---------------------------------------------------------- */

/* This process's rank and rank count on its node from the launcher's
 * environment (Open MPI, MPICH/Hydra, MVAPICH, Slurm); 0 and both set, or
 * -1 when none is present. getenv is passed for the tests (NULL: getenv). */
int sbc_local_rank_env(const char *(*get)(const char *), int *local_rank, int *local_size);
/* Device of a local rank: round robin. */
int sbc_device_for(int local_rank, int ndev);
/* How many of local_size ranks map to device dev. */
int sbc_ranks_on_device(int local_size, int ndev, int dev);
/* Tasks on node `nodeid` from Slurm's SLURM_TASKS_PER_NODE: a comma list of
 * counts, each N or N(xK) for K nodes in a row ("4(x2),3": nodes 0 and 1
 * run 4, node 2 runs 3). The count, or -1 when the text is malformed or has
 * no such node. */
int sbc_slurm_tasks_on_node(const char *tasks_per_node, int nodeid);
/* Local ranks sharing this rank's device. Ranks all see the same ndev
 * devices (CUDA_VISIBLE_DEVICES alike, cudaGetDeviceCount) and map round
 * robin: sbc_ranks_on_device. A launcher that hands each task devices of its
 * own (Slurm's SLURM_GPUS_PER_TASK > 0, gpus_per_task here) shares none: 1. */
int sbc_sharing_for(int local_size, int ndev, int dev, int gpus_per_task);

/* ---- cuDNN math types ------------------------------------------------------------ */

/* cudnnMathType_t's values (conv.cu checks them against cudnn.h). */
enum { SBC_MATH_DEFAULT = 0, SBC_MATH_TENSOR_OP = 1, SBC_MATH_TENSOR_OP_CONVERSION = 2, SBC_MATH_FMA = 3 };
/* Whether a convolution algorithm found with math type `math` may run in
 * precision p: fp32 takes FMA math only (no TF32 or converted tensor-op
 * math, which cuDNN's default math allows on Ampere and later); tf32 and
 * bf16 take any but TENSOR_OP_CONVERSION (fp32 data rounded to fp16). */
int sbc_conv_math_ok(sbc_precision p, int math);
/* The math type the descriptor asks cuDNN's search for: FMA in fp32 (never
 * tensor cores), tensor-op math chosen explicitly in tf32 and bf16. */
int sbc_conv_math_for(sbc_precision p);

/* ---- versions ---------------------------------------------------------------------- */

/* CUDA's encoded version (1000 * major + 10 * minor, cudaRuntimeGetVersion,
 * CUDART_VERSION) as "13.0"; 0 as "none". Returns buf. */
const char *sbc_cuda_version_str(int v, char *buf, size_t len);
/* cuDNN 9's encoded version (10000 * major + 100 * minor + patch,
 * cudnnGetVersion, CUDNN_VERSION) as "9.10.2". Returns buf. */
const char *sbc_cudnn_version_str(long v, char *buf, size_t len);
/* NCCL's encoded version (ncclGetVersion, NCCL_VERSION_CODE: 10000 * major +
 * 100 * minor + patch since 2.9) as "2.28.3". Returns buf. */
const char *sbc_nccl_version_str(int v, char *buf, size_t len);

/* Identity of the GPU a rank drives: node and device UUID, hashed. */
typedef struct {
    uint64_t node, gpu;
} sbc_gpu_id;

/* 1 when every rank in ids[n] has a GPU of its own (no two ranks share one). */
int sbc_gpus_distinct(const sbc_gpu_id *ids, int n);
uint64_t sbc_hash_bytes(const void *p, size_t n);

/* Communication mode (SHARDBENCH_COMM): auto (NCCL when every rank of a
 * communicator has its own GPU, else host-staged MPI), nccl, mpi. */
typedef enum { SBC_COMM_AUTO = 0, SBC_COMM_NCCL = 1, SBC_COMM_MPI = 2 } sbc_comm_mode;
int sbc_comm_mode_parse(const char *s, sbc_comm_mode *out, char *msg, size_t msg_len);
/* Path for one communicator: 1 NCCL, 0 MPI; -1 with msg when mode is nccl
 * but ranks share a GPU (NCCL cannot hold two ranks on one GPU). */
int sbc_comm_choose(sbc_comm_mode mode, int gpus_distinct, int nranks, char *msg,
                    size_t msg_len);

/* ---- NCCL's own device memory ------------------------------------------------------ */

/* NCCL allocates buffers of its own (cudaMalloc, outside the pool) for each
 * communicator; this estimates them from NCCL's documented environment
 * variables and their defaults (NCCL 2.x, src/init.cc and env docs):
 *   per connection = NCCL_BUFFSIZE (Simple, default 4 MiB)
 *                  + NCCL_LL_BUFFSIZE (default 8 lines x 512 threads x
 *                    8 steps x 16 B = 512 KiB)
 *                  + NCCL_LL128_BUFFSIZE (default 120 elements x 640
 *                    threads x 8 steps x 8 B = 4.6875 MiB)
 *   collectives    = channels x conns x per connection, channels =
 *                    NCCL_MAX_NCHANNELS when set, else SBC_NCCL_CHANNELS
 *                    (NCCL picks by topology; 32 is its most on NVSwitch
 *                    machines, so this errs high), conns = 1 (the ring's
 *                    receive side) + 1 for the tree when nranks > 2
 *   send/recv      = (nranks - 1) peers x NCCL_P2P_NVL_CHUNKSIZE (default
 *                    512 KiB) x 8 steps (relayouts' grouped send/recv)
 * and 0 for one rank. An estimate: NVLS (NVLink SHARP) buffers, proxy and
 * host memory are left out, and NCCL >= 2.22 connects lazily (only what a
 * collective uses). get is getenv for the tests (NULL: getenv). */
#define SBC_NCCL_CHANNELS 32
typedef struct {
    size_t per_conn;    /* bytes of one connection's three protocol buffers */
    int channels, conns;
    size_t coll_bytes, p2p_bytes, bytes; /* bytes = coll_bytes + p2p_bytes */
} sbc_nccl_estimate;

size_t sbc_nccl_comm_bytes(int nranks, const char *(*get)(const char *), sbc_nccl_estimate *e);

/* The device memory kept out of the pool for NCCL (bytes): 0 unless NCCL
 * may serve this rank (world > 1 ranks, its GPU its own, comm mode not
 * mpi); then SHARDBENCH_CUDA_NCCL_MB when set (MiB), else
 * SBC_NCCL_RESERVE_COMMS communicators of the world's size
 * (sbc_nccl_comm_bytes). */
#define SBC_NCCL_RESERVE_COMMS 8
size_t sbc_nccl_reserve(int world, int sharing, int nccl_possible,
                        const char *(*get)(const char *));
/* sbc_pool_size_for, then no more than free_bytes - reserve (0 when the
 * reserve takes it all), rounded down to align. */
size_t sbc_pool_size_reserving(size_t free_bytes, double frac, int sharing, size_t limit_bytes,
                               size_t reserve, size_t align);

/* ---- bf16 shadows of weights ------------------------------------------------------ */

/* In bf16 the backend keeps a bf16 copy ("shadow") of the weight buffers
 * the executor declares (sb_backend.weight_set) that GEMMs read: made at
 * the first GEMM that reads the weight after it changed (once per update),
 * then read by every GEMM until the weight changes again; the GEMM's other
 * operand is converted as before. The map: buffers by address (device
 * pointers as integers), sorted, never overlapping. `fresh` is 0 from the
 * weight's change (weight_set, or the backend's own writes into it:
 * from_host, zero, the updates, the all-gather) until the copy is made
 * again. */
typedef struct {
    uintptr_t base;
    size_t bytes;       /* the fp32 buffer's */
    void *shadow;       /* bytes / 2 of bf16, from the pool; NULL until a GEMM reads it */
    int fresh;          /* 1: shadow holds the buffer's values */
} sbc_shadow;

typedef struct {
    sbc_shadow *e;
    int n, cap;
    size_t shadow_bytes; /* held by the entries' shadows */
} sbc_shadow_map;

/* The entry whose buffer holds [p, p + bytes) (bytes 0: holds p), or NULL. */
sbc_shadow *sbc_shadow_find(const sbc_shadow_map *m, uintptr_t p, size_t bytes);
/* The entry of the buffer starting at base, or NULL. */
sbc_shadow *sbc_shadow_at(const sbc_shadow_map *m, uintptr_t base);
/* Adds an entry (stale, shadow as given, may be NULL); 0, or -1 when it
 * overlaps an entry, bytes is 0 or out of host memory (nothing added). */
int sbc_shadow_add(sbc_shadow_map *m, uintptr_t base, size_t bytes, void *shadow);
/* Gives entry e its shadow (bytes / 2 counted in shadow_bytes); the one it
 * had, or NULL. */
void *sbc_shadow_attach(sbc_shadow_map *m, sbc_shadow *e, void *shadow);
/* Removes the entry starting at base; its shadow (to free), or NULL. */
void *sbc_shadow_remove(sbc_shadow_map *m, uintptr_t base);
/* Marks every entry that overlaps [p, p + bytes) stale; how many. */
int sbc_shadow_stale(sbc_shadow_map *m, uintptr_t p, size_t bytes);
void sbc_shadow_map_free(sbc_shadow_map *m);

/* ---- bf16 conversions of GEMM operands that are no weight ------------------------- */

/* In bf16 a GEMM operand that is no weight's (an activation, a gradient)
 * is converted to bf16 at the GEMM. The backend keeps those conversions
 * and hands them to later GEMMs that read the same span (or a part of it)
 * for as long as the fp32 source is unchanged: every backend table entry
 * that may write device memory is wrapped (writes.hpp) to drop the kept
 * conversions whose source lies in a pool block it writes (the blocks its
 * non-const pointer arguments point into; all of them for an entry that
 * names none, or a pointer outside the pool), a GEMM drops those its
 * output overlaps, and a released block drops those in it. So a kept
 * conversion is never read after its source changed, without the backend
 * knowing how much of a block each kernel writes. It saves the conversions
 * of operands that several GEMMs read: the forward's input X again in the
 * backward (dW = X^T dC), dC twice (dX = dC W^T, dW = X^T dC), the
 * projections of one input.
 *
 * The conversions kept hold at most max_bytes of bf16 (least recently used
 * go first). One is `pinned` while a GEMM that reads it is being enqueued:
 * eviction passes over it, so a buffer the GEMM still reads is not handed
 * to its other operand. */
typedef struct {
    uintptr_t base;     /* the fp32 span converted (device pointer as integer) */
    size_t bytes;       /* its fp32 bytes; the bf16 conversion holds bytes / 2 */
    void *b16;
    long used;          /* the cache's clock at its last use (least recent goes first) */
    int pinned;
} sbc_act_conv;

typedef struct {
    sbc_act_conv *e;
    int n, cap;
    long clock;
    size_t bytes;       /* bf16 bytes held */
    size_t max_bytes;   /* no more kept than this */
} sbc_act_cache;

/* The bf16 of [p, p + bytes) from a kept conversion that holds all of it
 * (pinned, marked used), or NULL. */
void *sbc_act_find(sbc_act_cache *c, uintptr_t p, size_t bytes);
/* Keeps b16 as the conversion of [p, p + bytes), pinned, after the least
 * recently used unpinned ones went (each to put) until it fits max_bytes.
 * 0, or -1 when it is not kept (larger than max_bytes, no room beside
 * the pinned ones, or no host memory): the caller frees b16 after its
 * GEMM. */
int sbc_act_keep(sbc_act_cache *c, uintptr_t p, size_t bytes, void *b16, void (*put)(void *));
/* Floats a strided batch of stored rows x cols matrices (row stride ld,
 * batch stride `stride`) spans: what a GEMM operand reads. */
size_t sbc_span_floats(int rows, int cols, int ld, ptrdiff_t stride, int batch);
/* The memory and the conversion kernel sbc_act_operand works with. get
 * makes what room it can (the unpinned kept conversions go first) and ends
 * the job when there is none. */
typedef struct {
    void *(*get)(size_t bytes, const char *what);
    void (*put)(void *p);
    void (*to_bf16)(void *dst, const float *src, size_t n); /* queued after the source's writes */
} sbc_act_mem;
/* A GEMM operand that is no weight's, n floats at p, in bf16: from a kept
 * conversion that holds it (*reused 1), else converted into memory from
 * get and kept (*reused 0). When it cannot be kept (sbc_act_keep) *tmp is
 * set, to put after the GEMM (else NULL). */
const void *sbc_act_operand(sbc_act_cache *c, const sbc_act_mem *m, const float *p, size_t n,
                            void **tmp, int *reused, const char *what);
/* Unpins every conversion (the GEMM is enqueued). */
void sbc_act_unpin(sbc_act_cache *c);
/* Drops the conversions overlapping [p, p + bytes), or every one when
 * bytes is 0, pinned ones too unless keep_pinned; each b16 goes to
 * put(b16). How many went. */
int sbc_act_drop(sbc_act_cache *c, uintptr_t p, size_t bytes, int keep_pinned,
                 void (*put)(void *));
/* Every conversion to put, and the cache's own memory. */
void sbc_act_free(sbc_act_cache *c, void (*put)(void *));

/* ---- step timing events ---------------------------------------------------------- */

/* How many timing events to hold for `need` marks when `have` exist:
 * have when enough, else doubled from max(have, first) until >= need. */
int sbc_grow_count(int have, int need, int first);

/* ---- communicator cache ---------------------------------------------------------- */

/* One entry per MPI communicator the backend has all-reduced over: the
 * chosen path and, for NCCL, the communicator handle. Keyed by the MPI
 * handle; an MPI attribute on the communicator evicts the entry (and
 * destroys the NCCL communicator through `destroy`) when MPI frees it, so
 * a handle value MPI reuses never meets a stale entry. */
typedef struct {
    MPI_Comm comm;
    int use_nccl;
    void *handle;
} sbc_comm_entry;

typedef struct sbc_comm_cache sbc_comm_cache;

sbc_comm_cache *sbc_comm_cache_new(void (*destroy)(void *handle));
/* The entry of comm, or NULL. */
sbc_comm_entry *sbc_comm_cache_find(sbc_comm_cache *c, MPI_Comm comm);
/* Adds comm (must be absent); NULL when out of memory or MPI refuses the
 * attribute. */
sbc_comm_entry *sbc_comm_cache_add(sbc_comm_cache *c, MPI_Comm comm, int use_nccl, void *handle);
int sbc_comm_cache_size(const sbc_comm_cache *c);
/* ncclCommSplit's color for an MPI_Comm_split color: itself, or
 * SBC_SPLIT_NOCOLOR (NCCL_SPLIT_NOCOLOR) for a rank in no group (< 0). */
enum { SBC_SPLIT_NOCOLOR = -1 };
int sbc_nccl_split_color(int mpi_color);
/* Entry i (0 <= i < size), else NULL: for polling every live handle. */
sbc_comm_entry *sbc_comm_cache_at(sbc_comm_cache *c, int i);
/* When MPI frees a communicator its entry goes at once but its handle is
 * only queued: handles are destroyed here, outside MPI's attribute
 * callbacks (the backend reaps at its next communicator lookup and at its
 * explicit teardown). Returns how many were destroyed. */
int sbc_comm_cache_reap(sbc_comm_cache *c);
int sbc_comm_cache_pending(const sbc_comm_cache *c);
/* Destroys every handle, queued or live, and the cache (the attributes
 * become inert). Call before MPI_Finalize to keep it out of callbacks. */
void sbc_comm_cache_free(sbc_comm_cache *c);

#ifdef __cplusplus
}
#endif
#endif
