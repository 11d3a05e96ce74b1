/* test_zero.c: ZeRO's backend collectives (runtime.h: reduce_scatter,
 * allgather) on the CPU and cpu-devmem backends, over MPI_COMM_WORLD and
 * over a split half of it, with the executor's slicing (rank r of q owns
 * [r*ceil(n/q), min(n, (r+1)*ceil(n/q)))): even, uneven and empty slices
 * (n < q), n = 0 and 1. Each rank's buffer holds known values; the
 * reduce-scatter must give each rank the sum of its slice over the ranks,
 * the all-gather every slice from its owner, exactly (small integers).
 *
 *   mpirun -np P test_zero      (P = 2, 3, 4) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/runtime.h"

static int failures, wrank;

static void slices(int64_t n, int q, int *count, int *displ)
{
    int64_t chunk = (n + q - 1) / q;
    for (int r = 0; r < q; r++) {
        int64_t lo = r * chunk < n ? r * chunk : n, hi = (r + 1) * chunk < n ? (r + 1) * chunk : n;
        displ[r] = (int)lo;
        count[r] = (int)(hi - lo);
    }
}

/* value of element i on rank r before the collectives */
static float val(int r, int64_t i) { return (float)((r + 1) * 1000 + i % 977); }

static void check_one(const sb_backend *be, MPI_Comm comm, int64_t n)
{
    int q, me;
    MPI_Comm_size(comm, &q);
    MPI_Comm_rank(comm, &me);
    int *count = malloc((size_t)q * sizeof *count), *displ = malloc((size_t)q * sizeof *displ);
    slices(n, q, count, displ);
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    float *d = n ? be->alloc((size_t)n * sizeof(float)) : NULL;
    float *s = count[me] ? be->alloc((size_t)count[me] * sizeof(float)) : NULL;
    for (int64_t i = 0; i < n; i++)
        h[i] = val(me, i);
    if (n)
        be->from_host(d, h, (size_t)n);
    /* reduce-scatter: my slice summed over the ranks */
    int rc = be->reduce_scatter(d, s, count, displ, comm);
    float *hs = malloc((size_t)(count[me] ? count[me] : 1) * sizeof *hs);
    if (count[me])
        be->to_host(hs, s, (size_t)count[me]);
    int bad = rc != 0;
    for (int i = 0; i < count[me] && !bad; i++) {
        float want = 0;
        for (int r = 0; r < q; r++)
            want += val(r, displ[me] + i);
        bad = hs[i] != want;
    }
    if (bad) {
        failures++;
        printf("FAIL %s reduce_scatter n=%lld q=%d rank %d (rc %d)\n", be->name, (long long)n, q,
               me, rc);
    }
    /* all-gather: my slice set to -(global index + 1), the rest garbage */
    for (int64_t i = 0; i < n; i++)
        h[i] = i >= displ[me] && i < displ[me] + count[me] ? -(float)(i + 1) : 12345.0f;
    if (n)
        be->from_host(d, h, (size_t)n);
    rc = be->allgather(d, count, displ, comm);
    if (n)
        be->to_host(h, d, (size_t)n);
    bad = rc != 0;
    for (int64_t i = 0; i < n && !bad; i++)
        bad = h[i] != -(float)(i + 1);
    if (bad) {
        failures++;
        printf("FAIL %s allgather n=%lld q=%d rank %d (rc %d)\n", be->name, (long long)n, q, me, rc);
    }
    if (d)
        be->release(d);
    if (s)
        be->release(s);
    free(h);
    free(hs);
    free(count);
    free(displ);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
    const sb_backend *bes[2] = {&sb_backend_cpu, sb_backend_cpu_devmem()};
    const int64_t ns[] = {0, 1, 2, 3, 5, 8, 13, 64, 1001};
    for (int b = 0; b < 2; b++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            check_one(bes[b], MPI_COMM_WORLD, ns[k]);
            check_one(bes[b], half, ns[k]);
        }
    MPI_Comm_free(&half);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("test_zero: %s (%d failures)\n", all ? "FAILED" : "ok", all);
    MPI_Finalize();
    return all ? 1 : 0;
}
