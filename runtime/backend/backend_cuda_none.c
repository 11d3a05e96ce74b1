/* backend_cuda_none.c: the answer when this build has no CUDA backend. */
#include "shardbench/backend.h"

#ifndef SB_HAVE_CUDA
const sb_backend *sb_backend_cuda_get(sb_error *err)
{
    sb_fail(err, SB_EXIT_INPUT,
            "the cuda backend is not compiled into this build (configure with nvcc present and "
            "-DSHARDBENCH_CUDA=ON); use --backend cpu");
    return NULL;
}
#endif
