/* agree.c: one verdict for every rank of a communicator (dtensor.h). */
#include "shardbench/dtensor.h"

#include <stdio.h>

int sb_agree(MPI_Comm comm, int rc, sb_error *err, int *failed_rank)
{
    int rank, code = rc ? (err->code ? err->code : SB_EXIT_INTERNAL) : 0, worst = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, comm);
    if (!worst)
        return 0;
    /* the message of the lowest failing rank, to every rank */
    int who = code ? rank : 1 << 30, first = 0;
    MPI_Allreduce(&who, &first, 1, MPI_INT, MPI_MIN, comm);
    char msg[sizeof err->msg];
    if (rank == first)
        snprintf(msg, sizeof msg, "%s", err->msg);
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, comm);
    if (rank != first)
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    err->code = worst;
    if (failed_rank)
        *failed_rank = first;
    return -1;
}
