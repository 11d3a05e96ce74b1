/* runtime/cuda/cuda_internal.h: the cuda backend's own declarations
 * (backend_cuda.cu: set-up, memory, cuBLAS, cuDNN, communication;
 * families.cu: kernel tables); its own kernels are in kernels/cuda/
 * (k_cuda.h). Not a public header. */
#ifndef SB_RUNTIME_CUDA_INTERNAL_H
#define SB_RUNTIME_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernels/cuda/k_cuda.h"
#include "shardbench/backend.h"

/* The backend's one stream: every kernel, library call and copy. */
cudaStream_t sbc_stream(void);

/* Scratch from the pool (stream-ordered reuse is safe: one stream). Ends
 * the job with a clear message when the pool is exhausted. */
void *sbc_scratch(size_t bytes, const char *what);
void sbc_scratch_free(void *p);

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
