/* probe.c: a fixed amount of work timed on one rank, beside every timed
 * step of `run` (JSON probe_seconds), so that a nightly comparison can tell
 * a slower build from a slower machine (measure/regress.c: samples divided by
 * their launch's probe). The work never changes: 32 single-precision GEMMs
 * of 128 x 128 x 128 through the same BLAS and thread count as the ops
 * (about 134 MFLOP, a few milliseconds on one core). */
#include "probe.h"

#include <cblas.h>
#include <mpi.h>

#define PROBE_N 128
#define PROBE_REPS 32

double cli_probe_seconds(void)
{
    static float a[PROBE_N * PROBE_N], b[PROBE_N * PROBE_N], c[PROBE_N * PROBE_N];
    static int ready;
    if (!ready) {
        for (int i = 0; i < PROBE_N * PROBE_N; i++) {
            a[i] = (float)(i % 7) * 0.125f;
            b[i] = (float)(i % 5) * 0.25f;
        }
        ready = 1;
    }
    double t0 = MPI_Wtime();
    for (int r = 0; r < PROBE_REPS; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, PROBE_N, PROBE_N, PROBE_N, 1.0f, a,
                    PROBE_N, b, PROBE_N, r ? 1.0f : 0.0f, c, PROBE_N);
    return MPI_Wtime() - t0;
}
