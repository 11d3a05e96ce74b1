/* launch.cuh: what the cuda kernels (kernels/cuda/k_*.cu) share: the
 * launch geometry on the kernels' stream, grid-stride loops, and block and
 * warp reductions. Included by those files only. */
#ifndef SB_RUNTIME_KERNELS_CUDA_LAUNCH_CUH
#define SB_RUNTIME_KERNELS_CUDA_LAUNCH_CUH

#include <stdint.h>

#include "k_cuda.h"

#define TPB 256

static inline unsigned grid_for(int64_t n)
{
    int64_t b = (n + TPB - 1) / TPB;
    if (b > 65535LL * 16)
        b = 65535LL * 16; /* grid-stride loops cover the rest */
    return (unsigned)(b < 1 ? 1 : b);
}

#define GRID_STRIDE(i, n)                                                                 \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n);  \
         i += (int64_t)gridDim.x * blockDim.x)

#define LAUNCH(kernel, n, ...)                                                           \
    do {                                                                                 \
        if ((int64_t)(n) > 0) {                                                          \
            kernel<<<grid_for((int64_t)(n)), TPB, 0, sbk_stream()>>>(__VA_ARGS__);       \
            SBC_LAUNCHED();                                                              \
        }                                                                                \
    } while (0)

/* ---- block and warp reductions ---- */

__device__ static inline double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ static inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

/* sum over the block (blockDim.x a multiple of 32, <= 1024); valid in thread 0 */
__device__ static inline double block_sum(double v)
{
    __shared__ double part[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        part[wid] = v;
    __syncthreads();
    v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
    if (wid == 0)
        v = warp_sum(v);
    return v;
}

#endif
