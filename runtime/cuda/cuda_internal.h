/* runtime/cuda/cuda_internal.h: the cuda backend's own declarations
 * (backend_cuda.cu: set-up, memory, cuBLAS, cuDNN, communication); its own
 * kernels are in kernels/cuda/ (k_cuda.h). Not a public header. */
#ifndef SB_RUNTIME_CUDA_INTERNAL_H
#define SB_RUNTIME_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernels/cuda/k_cuda.h"

/* The backend's one stream: every kernel, library call and copy. */
cudaStream_t sbc_stream(void);

/* Scratch from the pool (stream-ordered reuse is safe: one stream). Ends
 * the job with a clear message when the pool is exhausted. */
void *sbc_scratch(size_t bytes, const char *what);
void sbc_scratch_free(void *p);

#endif
