/* threads.c: a rank's CPUs and kernel threads (threads.h). */
#include "threads.h"

#include <string.h>

#include "shardbench/kernels.h"

void cli_cpu_setup(MPI_Comm comm, int keep, sb_cpuset *cs)
{
    MPI_Comm local;
    int lrank = -1, lsize = -1;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_rank(local, &lrank);
        MPI_Comm_size(local, &lsize);
        MPI_Comm_free(&local);
    }
    sb_cpuset_get(cs, lrank, lsize, keep);
    if (!strcmp(cs->threads_from, "share"))
        sb_cpu_threads(cs->threads);
    cs->threads = sb_cpu_threads_sync();
}

void cli_cpu_report(MPI_Comm comm, const sb_cpuset *cs, FILE *f)
{
    enum { LINE = 512 };
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char mine[LINE];
    sb_cpuset_describe(cs, mine, LINE);
    if (size == 1) {
        fprintf(f, "# %s\n", mine);
        return;
    }
    for (int r = 0; r < size; r++) {
        if (r >= 16 && r != size - 1)
            continue;
        if (r == size - 1 && size > 17 && rank == 0)
            fprintf(f, "# ...\n");
        char line[LINE];
        if (r == 0) {
            memcpy(line, mine, LINE);
        } else if (rank == r) {
            MPI_Send(mine, LINE, MPI_CHAR, 0, 0, comm);
            continue;
        } else if (rank == 0) {
            MPI_Recv(line, LINE, MPI_CHAR, r, 0, comm, MPI_STATUS_IGNORE);
        } else {
            continue;
        }
        if (rank == 0)
            fprintf(f, "# rank %d: %s\n", r, line);
    }
}
