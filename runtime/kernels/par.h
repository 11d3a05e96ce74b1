/* runtime/kernels/par.h: OpenMP for the CPU kernels' loops (internal).
 *
 * SB_PAR(clauses) puts `#pragma omp parallel for clauses` on the next loop
 * when the library is built with OpenMP, and nothing otherwise. Every loop
 * so marked writes disjoint outputs per iteration and reduces only within
 * an iteration, so results do not depend on the thread count. Loops of less
 * than SB_PAR_MIN elements stay on one thread (a fork costs microseconds).
 * The thread count follows OpenBLAS's (sb_cpu_threads in kernels.h). */
#ifndef SB_RUNTIME_PAR_H
#define SB_RUNTIME_PAR_H

#define SB_PAR_MIN 32768

#ifdef _OPENMP
#define SB_PRAGMA(x) _Pragma(#x)
#define SB_PAR(clauses) SB_PRAGMA(omp parallel for schedule(static) clauses)
#else
#define SB_PAR(clauses)
#endif

#endif
