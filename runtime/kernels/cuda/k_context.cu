/* k_context.cu: the cuda kernels' context (k_cuda.h), set by the backend. */
#include "k_cuda.h"

static cudaStream_t stream;
static void *(*scratch_get)(size_t, const char *);
static void (*scratch_put)(void *);

void sbk_context_set(cudaStream_t s, void *(*scratch)(size_t bytes, const char *what),
                     void (*scratch_free)(void *p))
{
    stream = s;
    scratch_get = scratch;
    scratch_put = scratch_free;
}

cudaStream_t sbk_stream(void) { return stream; }

void *sbk_scratch(size_t bytes, const char *what)
{
    if (!scratch_get)
        sbc_die(__FILE__, __LINE__, "scratch for %s before the cuda backend started", what);
    return scratch_get(bytes, what);
}

void sbk_scratch_free(void *p)
{
    if (p && scratch_put)
        scratch_put(p);
}
