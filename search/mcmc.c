/* mcmc.c: FlexFlow-style Markov-chain Monte Carlo search over per-op
 * configs (Jia et al., SysML 2019), on the same cost function as the exact
 * DP. Start from the expert strategy (or a given one); each iteration picks
 * one op uniformly and proposes, with probability 1/2, a uniformly drawn
 * other config of it (FlexFlow's move); with 1/4 the config that copies a
 * random neighbour's split of every dim name they share; with 1/4 a block
 * move (a random config for the op, then 1-11 ops reached breadth-first
 * from it copy the splits of the op that reached them, so a layout change
 * can cross a chain of ops whose single changes each cost a relayout). The
 * change in cost is computed locally for single moves (the op and its
 * edges) and in full for block moves, and accepted by
 * the Metropolis rule with a temperature relative to the current cost,
 * cooled geometrically to a thousandth of itself over the chain. The budget
 * is shared by 4 chains at T/4, T, 4T and 16T, each from the start (the
 * cheaper of expert and data parallel); a chain that finds nothing better
 * for 1/20 of its share goes back to the best strategy seen. The
 * best strategy seen is returned with its cost over time. Seedable: the
 * same seed and budget give the same result (a time limit that ends the
 * chain early does not). Not exact: the DP is (dp.c). */
#include "shardbench/candidates.h"
#include "shardbench/strategy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sb_mcmc_opts_default(sb_mcmc_opts *o)
{
    memset(o, 0, sizeof *o);
    o->budget = 200000;
    o->time_limit = 60;
    o->seed = 1;
    o->temperature = 0.005;
}

void sb_mcmc_result_free(sb_mcmc_result *r)
{
    if (!r)
        return;
    free(r->choice);
    free(r->trace);
    r->choice = NULL;
    r->trace = NULL;
}

static uint64_t next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(next(s) >> 11) * 0x1.0p-53; }

static double edge_cost(const sb_problem *pb, const sb_edge *e, int a, int b)
{
    const sb_model *m = pb->m;
    const sb_op *src = &m->ops[e->src], *dst = &m->ops[e->dst];
    const sb_tensor *t = &m->tensors[e->tensor];
    int ls[SB_MAX_DIMS], ld[SB_MAX_DIMS];
    sb_operand_layout(src, &src->out[e->src_slot], t->ndims,
                      pb->cfg[e->src].c + (size_t)a * (size_t)src->ndims, ls);
    sb_operand_layout(dst, &dst->in[e->dst_slot], t->ndims,
                      pb->cfg[e->dst].c + (size_t)b * (size_t)dst->ndims, ld);
    return sb_edge_cost(&pb->cp, t, ls, ld);
}

/* Cost of op i's vertex and edges with op i at config k. */
static double local_cost(const sb_problem *pb, const int *adj_start, const int *adj, const int *choice,
                         int i, int k)
{
    double c = pb->cfg[i].cost[k];
    for (int j = adj_start[i]; j < adj_start[i + 1]; j++) {
        const sb_edge *e = &pb->edges[adj[j]];
        int a = e->src == i ? k : choice[e->src];
        int b = e->dst == i ? k : choice[e->dst];
        c += edge_cost(pb, e, a, b);
    }
    return c;
}

/* Edges of each op (CSR). */
static int build_adjacency(const sb_problem *pb, int **start, int **adj, sb_error *err)
{
    int n = pb->m->nops;
    *start = sb_calloc((size_t)n + 1, sizeof **start, err);
    *adj = sb_malloc((size_t)(2 * pb->nedges + 1) * sizeof **adj, err);
    if (!*start || !*adj)
        return -1;
    for (int k = 0; k < pb->nedges; k++) {
        (*start)[pb->edges[k].src + 1]++;
        if (pb->edges[k].dst != pb->edges[k].src)
            (*start)[pb->edges[k].dst + 1]++;
    }
    for (int i = 0; i < n; i++)
        (*start)[i + 1] += (*start)[i];
    int *fill = sb_calloc((size_t)n, sizeof *fill, err);
    if (!fill)
        return -1;
    for (int k = 0; k < pb->nedges; k++) {
        int s = pb->edges[k].src, d = pb->edges[k].dst;
        (*adj)[(*start)[s] + fill[s]++] = k;
        if (d != s)
            (*adj)[(*start)[d] + fill[d]++] = k;
    }
    free(fill);
    return 0;
}

/* The config of op i that splits each dim as neighbour j splits the dim of
 * the same name (nearest valid config). */
static int copy_neighbour(const sb_problem *pb, const int *choice, int i, int j)
{
    const sb_op *a = &pb->m->ops[i], *b = &pb->m->ops[j];
    const int *cb = pb->cfg[j].c + (size_t)choice[j] * (size_t)b->ndims;
    int want[SB_MAX_DIMS];
    for (int d = 0; d < a->ndims; d++) {
        want[d] = 1;
        for (int e = 0; e < b->ndims; e++)
            if (!strcmp(a->dims[d].name, b->dims[e].name))
                want[d] = cb[e];
    }
    return sb_config_nearest(pb, i, want, NULL);
}

/* The cheaper of the expert and the data-parallel strategy. */
static int cheaper_start(const sb_problem *pb, int *cur, sb_error *err)
{
    int n = pb->m->nops;
    int *dp = sb_malloc((size_t)n * sizeof *dp, err);
    if (!dp || sb_strategy_expert(pb, cur, NULL, err) || sb_strategy_data_parallel(pb, dp, err)) {
        free(dp);
        return -1;
    }
    if (sb_strategy_cost(pb, dp) < sb_strategy_cost(pb, cur))
        memcpy(cur, dp, (size_t)n * sizeof *dp);
    free(dp);
    return 0;
}

/* A block move: op i takes config k, then up to BLOCK-1 ops reached from
 * it breadth-first copy the split of each shared dim name from the op that
 * reached them. Writes the moved ops and their old configs; returns the
 * count. */
#define BLOCK 12

static int block_move(const sb_problem *pb, const int *start, const int *adj, int *cur, int i, int k,
                      uint64_t *rng, int *moved, int *old)
{
    int n = 0, head = 0;
    int limit = 2 + (int)(next(rng) % (BLOCK - 1));
    moved[n] = i;
    old[n++] = cur[i];
    cur[i] = k;
    while (head < n && n < limit) {
        int u = moved[head++];
        for (int j = start[u]; j < start[u + 1] && n < limit; j++) {
            const sb_edge *e = &pb->edges[adj[j]];
            int v = e->src == u ? e->dst : e->src;
            int seen = 0;
            for (int q = 0; q < n && !seen; q++)
                seen = moved[q] == v;
            if (seen)
                continue;
            moved[n] = v;
            old[n++] = cur[v];
            cur[v] = copy_neighbour(pb, cur, v, u);
        }
    }
    return n;
}

/* Chains run one after the other, each from the start strategy with its
 * own temperature: T/4, T, 4T, 16T (a budget under 4000: one chain at T). */
#define NCHAINS 4

static int add_point(sb_mcmc_result *r, int *cap, long it, double s, double cost, sb_error *err)
{
    if (r->ntrace == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        sb_mcmc_point *nt = sb_realloc(r->trace, (size_t)*cap * sizeof *nt, err);
        if (!nt)
            return -1;
        r->trace = nt;
    }
    r->trace[r->ntrace++] = (sb_mcmc_point){it, s, cost};
    return 0;
}

int sb_search_mcmc(const sb_problem *pb, const sb_mcmc_opts *o, sb_mcmc_result *out, sb_error *err)
{
    memset(out, 0, sizeof *out);
    if (o->budget <= 0)
        return sb_fail(err, SB_EXIT_INPUT, "--budget: %ld is not a positive iteration count", o->budget);
    if (!(o->temperature > 0))
        return sb_fail(err, SB_EXIT_INPUT, "--temperature: %g is not positive", o->temperature);
    int n = pb->m->nops, rc = -1, cap = 0;
    int *cur = sb_malloc((size_t)n * sizeof *cur, err);
    int *init = sb_malloc((size_t)n * sizeof *init, err);
    int *start = NULL, *adj = NULL;
    out->choice = sb_malloc((size_t)n * sizeof *out->choice, err);
    if (!cur || !init || !out->choice || build_adjacency(pb, &start, &adj, err))
        goto done;
    if (o->start)
        memcpy(cur, o->start, (size_t)n * sizeof *cur);
    else if (cheaper_start(pb, cur, err))
        goto done;
    double t0 = sb_now(), last_print = t0;
    double cost = sb_strategy_cost(pb, cur);
    out->start_cost = cost;
    out->cost = cost;
    memcpy(out->choice, cur, (size_t)n * sizeof *cur);
    memcpy(init, cur, (size_t)n * sizeof *cur);
    if (add_point(out, &cap, 0, 0.0, cost, err))
        goto done;
    int tty = o->progress && isatty(2);
    uint64_t rng = o->seed ^ 0x5851f42d4c957f2dULL;
    int nchains = o->budget >= 4000 ? NCHAINS : 1, chain = 0;
    long per = o->budget / nchains, chain_start = 0;
    double chain_temp = o->temperature / (nchains > 1 ? 4.0 : 1.0);
    long it, last_gain = 0, stall = per / 20 > 1000 ? per / 20 : 1000;
    for (it = 1; it <= o->budget; it++) {
        if (chain < nchains - 1 && it > (chain + 1) * per) {
            /* the next chain: from the start again, 4 times hotter */
            chain++;
            chain_start = it - 1;
            chain_temp *= 4.0;
            memcpy(cur, init, (size_t)n * sizeof *cur);
            cost = out->start_cost;
            last_gain = it;
        }
        if (it - last_gain > stall) {
            /* a long stall: go back to the best strategy seen */
            memcpy(cur, out->choice, (size_t)n * sizeof *cur);
            cost = out->cost;
            last_gain = it;
        }
        if ((it & 255) == 0) {
            double now = sb_now();
            if (o->time_limit > 0 && now - t0 >= o->time_limit) {
                out->stopped_by_time = 1;
                it--;
                break;
            }
            if (tty && now - last_print > 0.5) {
                last_print = now;
                fprintf(stderr, "\rmcmc: %ld/%ld iterations, best %.6e", it, o->budget, out->cost);
            }
        }
        int i = (int)(next(&rng) % (uint64_t)n);
        int nc = pb->cfg[i].n;
        if (nc < 2)
            continue;
        int k;
        uint64_t r = next(&rng);
        if ((r & 3) == 3) {
            /* block move, costed in full */
            int moved[BLOCK], old[BLOCK];
            k = (int)((r >> 2) % (uint64_t)(nc - 1));
            if (k >= cur[i])
                k++;
            int nm = block_move(pb, start, adj, cur, i, k, &rng, moved, old);
            double nc_cost = sb_strategy_cost(pb, cur);
            double delta = nc_cost - cost;
            long len = chain == nchains - 1 ? o->budget - chain_start : per;
            double temp = chain_temp * pow(1e-3, (double)(it - chain_start) / (double)len);
            if (delta <= 0 || uniform(&rng) < exp(-delta / (temp * cost))) {
                cost = nc_cost;
                out->accepted++;
                if (cost < out->cost) {
                    last_gain = it;
                    out->cost = cost;
                    memcpy(out->choice, cur, (size_t)n * sizeof *cur);
                    if (add_point(out, &cap, it, sb_now() - t0, cost, err))
                        goto done;
                }
            } else {
                for (int q = nm - 1; q >= 0; q--)
                    cur[moved[q]] = old[q];
            }
            continue;
        }
        int deg = start[i + 1] - start[i];
        if ((r & 2) && deg > 0) {
            const sb_edge *e = &pb->edges[adj[start[i] + (int)((r >> 1) % (uint64_t)deg)]];
            k = copy_neighbour(pb, cur, i, e->src == i ? e->dst : e->src);
            if (k == cur[i])
                continue;
        } else {
            k = (int)((r >> 1) % (uint64_t)(nc - 1));
            if (k >= cur[i])
                k++;
        }
        double delta = local_cost(pb, start, adj, cur, i, k) - local_cost(pb, start, adj, cur, i, cur[i]);
        double u = uniform(&rng);
        /* geometric cooling from the chain's T to T/1000 over its share */
        long len = chain == nchains - 1 ? o->budget - chain_start : per;
        double temp = chain_temp * pow(1e-3, (double)(it - chain_start) / (double)len);
        if (delta <= 0 || u < exp(-delta / (temp * cost))) {
            cur[i] = k;
            cost += delta;
            out->accepted++;
            if (cost < out->cost * (1 - 1e-12)) {
                /* re-sum exactly to keep rounding drift out of the best */
                cost = sb_strategy_cost(pb, cur);
                if (cost < out->cost) {
                    last_gain = it;
                    out->cost = cost;
                    memcpy(out->choice, cur, (size_t)n * sizeof *cur);
                    if (add_point(out, &cap, it, sb_now() - t0, cost, err))
                        goto done;
                }
            }
        }
    }
    if (it > o->budget)
        it = o->budget;
    if (tty)
        fprintf(stderr, "\r%70s\r", "");
    out->iterations = it;
    out->seconds = sb_now() - t0;
    rc = 0;
done:
    free(cur);
    free(init);
    free(start);
    free(adj);
    if (rc)
        sb_mcmc_result_free(out);
    return rc;
}
