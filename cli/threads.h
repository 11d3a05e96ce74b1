/* threads.h: a rank's CPUs and kernel threads for the commands that run the
 * CPU kernels (run, calibrate); shardbench/cpuset.h says how they are
 * chosen. */
#ifndef SB_CLI_THREADS_H
#define SB_CLI_THREADS_H

#include <stdio.h>

#include <mpi.h>

#include "shardbench/cpuset.h"

/* Collective over comm: finds this rank's place on its node
 * (MPI_Comm_split_type shared), fills cs and sets the kernels' threads
 * (OpenBLAS and the OpenMP loops) to its share unless the user set
 * OPENBLAS_NUM_THREADS or OMP_NUM_THREADS; cs->threads is then the count
 * in force. keep: --keep-binding. */
void cli_cpu_setup(MPI_Comm comm, int keep, sb_cpuset *cs);

/* Collective: rank 0 prints one `# cpus ...` line to f (size 1), else one
 * `# rank R: cpus ...` line per rank (the first 16 ranks and the last). */
void cli_cpu_report(MPI_Comm comm, const sb_cpuset *cs, FILE *f);

/* Collective over comm: *core becomes the communicator of the ranks bound
 * to the same single (logical) CPU as this one on its node; ranks on two
 * hyperthreads of one physical core count as apart (MPI_COMM_NULL for a rank
 * not bound to exactly one CPU); returns the most ranks any core holds
 * (more than 1: ranks take turns on it). */
int cli_core_comm(MPI_Comm comm, MPI_Comm *core);

#endif
