/* runtime/kernels/k_gemm.c: row-major GEMM and strided batched GEMM over OpenBLAS
 * cblas_sgemm, the workhorse of dense, conv (im2col) and LSTM kernels.
 * Not a BLAS: no other precision, no column-major entry point. */
#include "shardbench/kernels.h"

#include <cblas.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int sb_cpu_threads(int n)
{
    if (n > 0)
        openblas_set_num_threads(n);
    int t = openblas_get_num_threads();
#ifdef _OPENMP
    omp_set_num_threads(t);
#endif
    return t;
}

int sb_cpu_threads_sync(void)
{
#ifdef _OPENMP
    /* OMP_NUM_THREADS, when set, is the user's word for the kernels' loops */
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env)
        return omp_get_max_threads();
#endif
    return sb_cpu_threads(0);
}

void sb_cpu_passive_wait(char **argv)
{
#ifdef _OPENMP
    if (getenv("OMP_WAIT_POLICY"))
        return;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv); /* returns only on failure: go on as we are */
#else
    (void)argv;
#endif
}

int sb_cpu_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

void sb_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb, float beta,
             float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { // empty sum: C = beta * C
        for (int m = 0; m < M; m++) {
            float *row = C + (size_t)m * ldc;
            for (int n = 0; n < N; n++)
                row[n] = beta == 0.0f ? 0.0f : beta * row[n];
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
}

void sb_gemm_batched(int trans_a, int trans_b, int M, int N, int K,
                     float alpha, const float *A, int lda, ptrdiff_t stride_a,
                     const float *B, int ldb, ptrdiff_t stride_b, float beta,
                     float *C, int ldc, ptrdiff_t stride_c, int batch)
{
    for (int i = 0; i < batch; i++)
        sb_gemm(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda,
                B + i * stride_b, ldb, beta, C + i * stride_c, ldc);
}
