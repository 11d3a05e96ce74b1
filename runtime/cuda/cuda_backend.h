/* runtime/cuda/cuda_backend.h: what the cuda backend offers beyond the
 * sb_backend table (runtime.h): its statistics (pool size, peak device
 * memory, cuDNN algorithm cache, communicators, NCCL's buffers, bf16
 * weight copies) and CUDA-event timing on its stream. Only in builds with
 * SB_HAVE_CUDA. */
#ifndef SB_RUNTIME_CUDA_BACKEND_H
#define SB_RUNTIME_CUDA_BACKEND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;             /* CUDA device this rank drives */
    int sharing;            /* local ranks sharing that device */
    const char *precision;  /* fp32, tf32, bf16 */
    const char *comm_mode;  /* auto, nccl, mpi */
    size_t pool_bytes;      /* the one cudaMalloc'd block (0 until first alloc) */
    size_t in_use_bytes, peak_bytes; /* of the pool: tensors, cuDNN workspace, staging */
    long allocs, failed_allocs;
    long algo_hits, algo_misses; /* cuDNN algorithm cache */
    int nccl_comms, mpi_comms;   /* communicators seen, by path */
    long conv_fallbacks;         /* convolutions run with a fallback algorithm (workspace) */
    /* NCCL's own buffers (outside the pool): kept out of the pool for
     * them, estimated for the communicators made (sbc_nccl_comm_bytes);
     * the device's free memory now (cudaMemGetInfo) */
    size_t nccl_reserve_bytes, nccl_est_bytes, device_free_bytes;
    /* bf16: the weights' bf16 copies held now (buffers, bytes, in the
     * pool; none once the executor is freed), how
     * often one was made (once per change of a weight a GEMM reads), GEMM
     * operands read from one, GEMM operands converted at the GEMM; of
     * those, the operands that are no weight's (activations, their
     * gradients; with SHARDBENCH_CUDA_BF16_COPIES=0 the weights too) and
     * the floats they read; counts since the backend started */
    int bf16_copies;
    size_t bf16_copy_bytes;
    long bf16_copy_refreshes, bf16_copy_hits, bf16_conversions;
    long bf16_act_conversions;
    double bf16_act_floats;
    /* bf16: GEMM operands that are no weight's read from a conversion an
     * earlier GEMM made and kept (no write since; sbc_act_cache), and the
     * bf16 bytes kept now */
    long bf16_act_reuses;
    size_t bf16_act_kept_bytes;
} sb_cuda_stats;

/* 0 and *s when the backend is initialized; -1 otherwise. */
int sb_cuda_stats_get(sb_cuda_stats *s);

/* The CUDA runtime, cuBLAS, cuDNN and NCCL versions compiled against, and
 * those loaded at run time with the driver's CUDA version ("none (no
 * driver)" without one); needs no GPU and does not start the backend.
 * Returns buf. */
const char *sb_cuda_versions(char *buf, size_t len);

/* NCCL on this rank's GPU, no MPI: a 1-rank communicator's all-reduce and
 * grouped send/recv to itself, results checked. 0, or -1 with the cause in
 * msg. Needs the backend started (sb_backend_cuda_get). */
int sb_cuda_nccl_selftest(char *msg, size_t len);

/* Explicit teardown before MPI_Finalize: destroys every NCCL communicator
 * (none is destroyed inside MPI's attribute callbacks). No-op when the
 * backend never started. */
void sb_cuda_finalize(void);

/* CUDA events on the backend's stream: start, then the milliseconds of
 * the work queued since (waits for it). */
void sb_cuda_timer_start(void);
double sb_cuda_timer_stop_ms(void);

/* bf16: `calls` fp32 -> bf16 conversions of n floats in all (each of the
 * mean size), as the GEMMs make them for operands that are no weight's, re-timed alone on the
 * backend's stream (perf/gpu: what keeping activations in bf16 would save
 * at the GEMMs). Milliseconds; 0 for nothing to convert; -1 with the cause
 * in msg when the backend is not started or its pool has no room. */
double sb_cuda_convert_ms(double n, long calls, char *msg, size_t len);

#ifdef __cplusplus
}
#endif
#endif
