/* runtime/cuda/cuda_internal.h: the cuda backend's own declarations
 * (backend_cuda.cu: set-up, memory, cuBLAS, communication; conv.cu:
 * cuDNN; families.cu: kernel tables); its own kernels are in kernels/cuda/
 * (k_cuda.h). Not a public header. */
#ifndef SB_RUNTIME_CUDA_INTERNAL_H
#define SB_RUNTIME_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernels/cuda/k_cuda.h"
#include "cuda_host.h"
#include "shardbench/backend.h"

/* The pool's alignment of every block (bytes). */
#define POOL_ALIGN 256

/* The backend's one stream: every kernel, library call and copy. */
cudaStream_t sbc_stream(void);

/* Scratch from the pool (stream-ordered reuse is safe: one stream). Ends
 * the job with a clear message when the pool is exhausted. */
void *sbc_scratch(size_t bytes, const char *what);
void sbc_scratch_free(void *p);

/* conv.cu: cuDNN's handle and descriptors on the stream, with what the
 * backend lends it (0, or -1 with msg); the algorithm cache's hits and
 * misses and the fallbacks run; the conv family (cuDNN convolutions, the
 * kernels' pooling). Its scratch is the kernels' (sbk_scratch). */
typedef struct {
    sbc_precision (*precision)(void); /* the GEMMs' and convolutions' precision now */
    size_t (*pool_largest)(int init); /* the pool's largest free block (init: make the pool) */
    void (*zero)(float *p, size_t n); /* zeroes on the stream, as the backend's zero entry */
} sbc_conv_host;
int sbc_conv_init(cudaStream_t stream, const sbc_conv_host *host, char *msg, size_t n);
void sbc_conv_stats(long *hits, long *misses, long *fallbacks);
extern const sb_conv_kernels sbc_conv;

/* families.cu: the kernel families whose entries are runtime/kernels/cuda/'s
 * kernels as they are. */
extern const sb_embed_kernels sbc_embed;
extern const sb_lstm_kernels sbc_lstm;
extern const sb_norm_kernels sbc_norm;
extern const sb_softmax_kernels sbc_softmax;
extern const sb_rope_kernels sbc_rope;
extern const sb_pointwise_kernels sbc_pointwise;
extern const sb_sum_kernels sbc_sum;
extern const sb_moe_kernels sbc_moe;
extern const sb_move_kernels sbc_move;

#endif
