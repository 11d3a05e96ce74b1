/* box_runs.h: the geometry of a box copy (kernels.h's sb_strided_box_copy),
 * shared by the CPU kernel (k_tensor.c) and the cuda backend's plan
 * (cuda/cuda_host.c). Internal to runtime/. */
#ifndef SB_RUNTIME_KERNELS_BOX_RUNS_H
#define SB_RUNTIME_KERNELS_BOX_RUNS_H

#include <stdint.h>

#include "shardbench/kernels.h"

/* dst[d0 + sum i_k*ds_k] (+)= src[s0 + sum i_k*ss_k] for i in size[0..nd),
 * strides in elements, row-major. */
typedef struct {
    int nd;
    int64_t size[SB_MAX_DIMS];
    int64_t ds[SB_MAX_DIMS], ss[SB_MAX_DIMS];
    int64_t d0, s0;
} sb_box_runs;

/* The copy of box `size` at dst_lo in an array of dst_dims from src_lo in an
 * array of src_dims (nd >= 1, every size > 0), with the trailing axes that
 * both arrays hold whole merged into longer runs. */
void sb_box_runs_make(sb_box_runs *r, const int *dst_dims, const int *dst_lo,
                      const int *src_dims, const int *src_lo, const int *size, int nd);

#endif
