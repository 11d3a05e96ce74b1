/* cpuset.c: a rank's share of its node's CPUs, the launcher's binding and
 * the thread count that fits them (shardbench/cpuset.h). */
#define _GNU_SOURCE
#include "shardbench/cpuset.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

enum { NBITS = CPU_SETSIZE };

#define BIT_SET(b, i) ((b)[(i) / 8] |= (unsigned char)(1u << ((i) % 8)))
#define BIT_ON(b, i) (((b)[(i) / 8] >> ((i) % 8)) & 1u)

const char *sb_binding_name(sb_binding b)
{
    switch (b) {
    case SB_BIND_DEFAULT: return "the launcher's default binding";
    case SB_BIND_EXPLICIT: return "a binding given to the launcher";
    default: return "not bound";
    }
}

int sb_cpulist_parse(const char *s, unsigned char *bits, int nbits)
{
    memset(bits, 0, (size_t)(nbits + 7) / 8);
    if (!s)
        return -1;
    int count = 0;
    const char *p = s;
    while (*p && *p != '\n') {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0 || a >= nbits)
            return -1;
        p = end;
        b = a;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a || b >= nbits)
                return -1;
            p = end;
        }
        for (long i = a; i <= b; i++)
            if (!BIT_ON(bits, i)) {
                BIT_SET(bits, i);
                count++;
            }
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            return -1;
    }
    return count;
}

void sb_cpulist_format(const unsigned char *bits, int nbits, char *buf, int n)
{
    int len = 0;
    buf[0] = '\0';
    for (int i = 0; i < nbits && len < n; i++) {
        if (!BIT_ON(bits, i))
            continue;
        int j = i;
        while (j + 1 < nbits && BIT_ON(bits, j + 1))
            j++;
        int w = j > i ? snprintf(buf + len, (size_t)(n - len), "%s%d-%d", len ? "," : "", i, j)
                      : snprintf(buf + len, (size_t)(n - len), "%s%d", len ? "," : "", i);
        if (w < 0 || w >= n - len) {
            if (n >= 4)
                snprintf(buf + (n - 4 > len ? len : n - 4), 4, "...");
            return;
        }
        len += w;
        i = j;
    }
}

void sb_cpuset_share(int ncpus, int r, int n, int *first, int *count)
{
    if (ncpus < 1)
        ncpus = 1;
    if (n < 1)
        n = 1;
    if (r < 0)
        r = 0;
    if (n >= ncpus) { /* as many ranks as CPUs or more: one each, round robin */
        *first = r % ncpus;
        *count = 1;
        return;
    }
    int base = ncpus / n, extra = ncpus % n;
    *first = r * base + (r < extra ? r : extra);
    *count = base + (r < extra);
}

static const char *env_in(char **env, const char *name)
{
    size_t len = strlen(name);
    for (char **e = env; e && *e; e++)
        if (!strncmp(*e, name, len) && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

sb_binding sb_cpuset_binding(char **env)
{
    static const char *const explicit_vars[] = {
        "OMPI_MCA_hwloc_base_binding_policy", "OMPI_MCA_hwloc_base_cpu_list",
        "OMPI_MCA_hwloc_base_cpu_set",        "OMPI_MCA_hwloc_base_slot_list",
        "OMPI_MCA_rmaps_base_mapping_policy", "OMPI_MCA_rmaps_rank_file_path",
        "OMPI_MCA_rmaps_base_cpus_per_rank",
    };
    if (!env_in(env, "OMPI_COMM_WORLD_LOCAL_SIZE")) {
        /* another launcher: it may have bound the rank, never override it */
        if (env_in(env, "SLURM_CPU_BIND") || env_in(env, "SLURM_CPU_BIND_TYPE")
            || env_in(env, "HYDRA_BINDING") || env_in(env, "I_MPI_PIN_DOMAIN"))
            return SB_BIND_EXPLICIT;
        return SB_BIND_NONE;
    }
    for (size_t i = 0; i < sizeof explicit_vars / sizeof explicit_vars[0]; i++) {
        const char *v = env_in(env, explicit_vars[i]);
        if (v && *v)
            return SB_BIND_EXPLICIT;
    }
    const char *b = env_in(env, "OMPI_MCA_orte_bound_at_launch");
    return b && !strcmp(b, "1") ? SB_BIND_DEFAULT : SB_BIND_NONE;
}

/* The node's CPUs as a bitmap; returns their count. */
static int node_cpus(unsigned char *bits)
{
    char path[4200] = "", line[4096];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "0::", 3)) { /* cgroup v2 */
                line[strcspn(line, "\n")] = '\0';
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpuset.cpus.effective", line + 3);
            }
        fclose(f);
    }
    const char *tries[] = {path, "/sys/devices/system/cpu/online"};
    for (int t = 0; t < 2; t++) {
        if (!tries[t][0] || !(f = fopen(tries[t], "r")))
            continue;
        int n = fgets(line, sizeof line, f) ? sb_cpulist_parse(line, bits, NBITS) : -1;
        fclose(f);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > NBITS)
        n = NBITS;
    memset(bits, 0, NBITS / 8);
    for (int i = 0; i < n; i++)
        BIT_SET(bits, i);
    return (int)n;
}

static int affinity(unsigned char *bits)
{
    cpu_set_t set;
    memset(bits, 0, NBITS / 8);
    if (sched_getaffinity(0, sizeof set, &set))
        return 0;
    int n = 0;
    for (int i = 0; i < NBITS; i++)
        if (CPU_ISSET(i, &set)) {
            BIT_SET(bits, i);
            n++;
        }
    return n;
}

/* The CPUs of local rank r of n: its share of the node's CPUs. */
static int share_bits(const unsigned char *node, int nnode, int r, int n, unsigned char *out)
{
    int first, count, k = 0, got = 0;
    sb_cpuset_share(nnode, r, n, &first, &count);
    memset(out, 0, NBITS / 8);
    for (int i = 0; i < NBITS && got < count; i++)
        if (BIT_ON(node, i) && k++ >= first) {
            BIT_SET(out, i);
            got++;
        }
    return got;
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    char *end;
    long x = v && *v ? strtol(v, &end, 10) : -1;
    return v && *v && !*end && x >= 0 && x < 1 << 20 ? (int)x : def;
}

static int keep_flag(int argc, char **argv)
{
    for (int i = 1; i < argc && argv[i]; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--keep-binding"))
            return 1;
    }
    return 0;
}

int sb_cpuset_widen(int argc, char **argv)
{
    if (getenv(SB_CPUSET_FROM_ENV) || keep_flag(argc, argv))
        return 0;
    if (sb_cpuset_binding(environ) != SB_BIND_DEFAULT)
        return 0;
    int lsize = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1),
        lrank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    unsigned char node[NBITS / 8], now[NBITS / 8], share[NBITS / 8];
    int nnode = node_cpus(node), nnow = affinity(now);
    int nshare = share_bits(node, nnode, lrank, lsize, share);
    if (nnow < 1 || nnow >= nshare)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < NBITS; i++)
        if (BIT_ON(share, i))
            CPU_SET(i, &set);
    if (sched_setaffinity(0, sizeof set, &set))
        return 0; /* not allowed: stay as we are */
    char from[256];
    sb_cpulist_format(now, NBITS, from, sizeof from);
    setenv(SB_CPUSET_FROM_ENV, from, 1);
    return 1;
}

void sb_cpuset_reexec(char **argv)
{
    execv("/proc/self/exe", argv);
}

void sb_cpuset_get(sb_cpuset *cs, int local_rank, int local_size, int keep)
{
    memset(cs, 0, sizeof *cs);
    unsigned char node[NBITS / 8], now[NBITS / 8];
    cs->node_cpus = node_cpus(node);
    cs->cpus = affinity(now);
    sb_cpulist_format(now, NBITS, cs->list, sizeof cs->list);
    if (local_size < 1) {
        local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
        local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    }
    cs->local_rank = local_rank < 0 ? 0 : local_rank;
    cs->local_size = local_size;
    int first;
    sb_cpuset_share(cs->node_cpus, cs->local_rank, cs->local_size, &first, &cs->share);
    cs->binding = sb_cpuset_binding(environ);
    cs->keep = keep;
    const char *from = getenv(SB_CPUSET_FROM_ENV);
    unsigned char start[NBITS / 8];
    int nstart = from ? sb_cpulist_parse(from, start, NBITS) : -1;
    if (nstart > 0) {
        cs->widened = 1;
        cs->start_cpus = nstart;
        sb_cpulist_format(start, NBITS, cs->start_list, sizeof cs->start_list);
    } else {
        cs->start_cpus = cs->cpus;
        snprintf(cs->start_list, sizeof cs->start_list, "%s", cs->list);
    }
    if (from)
        unsetenv(SB_CPUSET_FROM_ENV); /* not for the processes this one starts */
    int t;
    if ((t = env_int("OPENBLAS_NUM_THREADS", 0)) > 0) {
        cs->threads = t;
        cs->threads_from = "OPENBLAS_NUM_THREADS";
    } else if ((t = env_int("OMP_NUM_THREADS", 0)) > 0) {
        cs->threads = t;
        cs->threads_from = "OMP_NUM_THREADS";
    } else {
        cs->threads = cs->cpus > 0 && cs->cpus < cs->share ? cs->cpus : cs->share;
        cs->threads_from = "share";
    }
}

void sb_cpuset_describe(const sb_cpuset *cs, char *buf, int n)
{
    char how[400] = "";
    if (cs->widened)
        snprintf(how, sizeof how, "; widened from %s, %s", cs->start_list,
                 sb_binding_name(SB_BIND_DEFAULT));
    else if (cs->binding == SB_BIND_DEFAULT)
        snprintf(how, sizeof how, "; %s%s", sb_binding_name(cs->binding),
                 cs->keep && cs->cpus < cs->share ? ", kept (--keep-binding)" : "");
    else if (cs->binding == SB_BIND_EXPLICIT)
        snprintf(how, sizeof how, "; %s, kept", sb_binding_name(cs->binding));
    snprintf(buf, (size_t)n, "cpus %s (%d of %d, share %d of %d rank%s on the node%s), threads %d (%s)",
             cs->list, cs->cpus, cs->node_cpus, cs->share, cs->local_size,
             cs->local_size == 1 ? "" : "s", how, cs->threads, cs->threads_from);
}
