/* threads.c: a rank's CPUs and kernel threads (threads.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "threads.h"

#include <sched.h>
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

int cli_core_comm(MPI_Comm comm, MPI_Comm *core)
{
    cpu_set_t set;
    int cpu = -1;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
        for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
            if (CPU_ISSET(c, &set))
                cpu = c;
    *core = MPI_COMM_NULL;
    MPI_Comm node;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        node = MPI_COMM_NULL;
    if (node != MPI_COMM_NULL) {
        if (MPI_Comm_split(node, cpu >= 0 ? cpu : MPI_UNDEFINED, 0, core) != MPI_SUCCESS)
            *core = MPI_COMM_NULL;
        MPI_Comm_free(&node);
    }
    int n = 1, most = 1;
    if (*core != MPI_COMM_NULL)
        MPI_Comm_size(*core, &n);
    MPI_Allreduce(&n, &most, 1, MPI_INT, MPI_MAX, comm);
    return most;
}
