/* shardbench/cpuset.h: the CPUs and threads of one rank.
 *
 * Each rank gets a share of its node's CPUs: the node's CPUs divided by the
 * ranks on that node (disjoint shares in CPU order, the first ranks one
 * more when it does not divide; one CPU each when the ranks outnumber the
 * CPUs). Its kernels run min(share, CPUs of its affinity) threads, unless
 * the user set OPENBLAS_NUM_THREADS or OMP_NUM_THREADS: those win.
 *
 * A launcher's default binding may confine a rank to fewer CPUs than its
 * share (OpenMPI binds each rank to one core when there are at most 2
 * ranks); such a rank widens its affinity to its share, unless
 * --keep-binding. A binding the user asked for is kept as it is. OpenMPI
 * (4.x: mpirun, orted) exports OMPI_MCA_orte_bound_at_launch=1 when it bound
 * the rank; an explicit binding or mapping (--bind-to, --cpu-set/--cpu-list,
 * --map-by, --rankfile, --cpus-per-proc, or the same MCA parameters set in
 * the environment) exports the parameter it set:
 * OMPI_MCA_hwloc_base_binding_policy, OMPI_MCA_hwloc_base_cpu_list (or
 * _cpu_set, _slot_list), OMPI_MCA_rmaps_base_mapping_policy,
 * OMPI_MCA_rmaps_rank_file_path, OMPI_MCA_rmaps_base_cpus_per_rank. Bound
 * at launch with none of those is the default binding. Other launchers
 * (srun, hydra) are never overridden: their binding counts as explicit.
 * The node's CPUs: the cgroup's cpuset (cgroup v2 cpuset.cpus.effective),
 * else the online CPUs. */
#ifndef SHARDBENCH_CPUSET_H
#define SHARDBENCH_CPUSET_H

#ifdef __cplusplus
extern "C" {
#endif

/* How the launcher left the rank's affinity. */
typedef enum {
    SB_BIND_NONE,     /* not bound by a launcher (or launched without one) */
    SB_BIND_DEFAULT,  /* the launcher's default binding */
    SB_BIND_EXPLICIT, /* a binding or mapping the user gave the launcher */
} sb_binding;

typedef struct {
    int node_cpus;              /* CPUs of the node */
    int local_rank, local_size; /* this rank among the ranks of its node */
    int share;                  /* CPUs of its share */
    sb_binding binding;
    int keep;                   /* --keep-binding */
    int widened;                /* widened from the launcher's default binding */
    int start_cpus;             /* CPUs of the affinity the launcher gave */
    int cpus;                   /* CPUs of the affinity now */
    char start_list[256];       /* those CPUs as a list, e.g. "0" */
    char list[256];             /* e.g. "0-1" */
    int threads;                /* threads for the kernels */
    const char *threads_from;   /* "share", "OPENBLAS_NUM_THREADS" or "OMP_NUM_THREADS" */
} sb_cpuset;

/* For main() of a program that runs the CPU kernels under MPI, first thing,
 * before MPI_Init (libraries start their threads with the affinity they
 * find): when the launcher's default binding gave this rank fewer CPUs than
 * its share (local rank and size from the launcher's environment) and argv
 * holds no --keep-binding, sets the affinity to the share, records the
 * affinity it had in the environment (for sb_cpuset_get) and returns 1;
 * else 0. The caller then re-executes the program (sb_cpuset_reexec) so
 * that every library starts with the new affinity. */
int sb_cpuset_widen(int argc, char **argv);
/* execv of /proc/self/exe with argv; returns only on failure. */
void sb_cpuset_reexec(char **argv);

/* Fills cs for this process; local_rank/local_size from MPI
 * (MPI_Comm_split_type shared), or -1 for the launcher's environment
 * (else one rank). keep: --keep-binding was given. */
void sb_cpuset_get(sb_cpuset *cs, int local_rank, int local_size, int keep);

/* One line for a program's header, e.g. "cpus 0-1 (2 of 2, share 2; widened
 * from 0, the launcher's default binding), threads 2 (share)". */
void sb_cpuset_describe(const sb_cpuset *cs, char *buf, int n);
const char *sb_binding_name(sb_binding b);

/* Pure parts, for tests. The share of local rank r of n on the node's CPUs
 * cpus[0..ncpus): its first CPU index into cpus and its count. */
void sb_cpuset_share(int ncpus, int r, int n, int *first, int *count);
/* Classifies the launcher's binding from an environment (NULL-terminated
 * "NAME=VALUE" strings, like environ). */
sb_binding sb_cpuset_binding(char **env);
/* Parses a CPU list ("0-3,8,10-11") into a bitmap of nbits bits; returns
 * the count of CPUs, -1 if malformed. Writes the list form of a bitmap. */
int sb_cpulist_parse(const char *s, unsigned char *bits, int nbits);
void sb_cpulist_format(const unsigned char *bits, int nbits, char *buf, int n);

#define SB_CPUSET_FROM_ENV "SHARDBENCH_CPUSET_FROM"

#ifdef __cplusplus
}
#endif
#endif
