/* terms.c: the terms of the reference cost and memory models that every op
 * kind shares (cost/kinds.h): words as FLOP, latencies, the groups of
 * ranks a collective spans on a machine's nodes and one pricing function
 * per collective kind (sb_coll_*, docs/machines.md), GEMMs, per-device
 * extents, operand layouts and the operand part of an op's memory. It calls nothing else in search/: the kinds'
 * entries (cost/ops/) call it, and cost.c and memory.c call the kinds
 * through their table, so the files depend one way. */
#include "shardbench/megatron.h"
#include "kinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* FLOP per word moved: peak (GFLOP/s) over bandwidth (GWords/s). */
static double flops_per_word(const sb_cost_params *cp, double gbs)
{
    return (cp->tflops * 1000.0) / (gbs / cp->word_bytes);
}

double sb_words_to_flops(const sb_cost_params *cp, double words)
{
    return flops_per_word(cp, cp->gbs) * words;
}

/* FLOP that `steps` message latencies cost (0 in the reference model). */
static double latency_flops(const sb_cost_params *cp, double lat_us, double steps)
{
    return lat_us > 0 ? steps * lat_us * cp->tflops * 1e6 : 0.0;
}

/* ---- groups of ranks on nodes ------------------------------------------------- */

static sb_coll_group group_one_node(double q)
{
    sb_coll_group g = {q, q, 1.0};
    return g;
}

int sb_node_order_possible(const sb_cost_params *cp)
{
    return cp->node_devices > 0 && cp->devices > cp->node_devices
           && cp->devices % cp->node_devices == 0;
}

/* cyclic placement in effect */
static int cyclic(const sb_cost_params *cp)
{
    return cp->node_order == 1 && sb_node_order_possible(cp);
}

long sb_node_of(const sb_cost_params *cp, long r)
{
    if (cp->node_devices <= 0)
        return 0;
    if (cyclic(cp))
        return r % (cp->devices / cp->node_devices);
    return r / cp->node_devices;
}

sb_coll_group sb_coll_group_first(const sb_cost_params *cp, double q)
{
    if (cyclic(cp)) { /* ranks 0..q-1 one a node in turn over the N nodes */
        double N = cp->devices / cp->node_devices;
        sb_coll_group g = {q, ceil(q / N), q < N ? q : N};
        return g;
    }
    double n = cp->node_devices;
    if (n <= 0 || q <= n)
        return group_one_node(q);
    sb_coll_group g = {q, n, ceil(q / n)};
    return g;
}

/* Rank 0's group counted rank by rank: the nodes it meets and the most of
 * its ranks on one of them (grids whose splits do not line up with the node
 * size). */
static sb_coll_group group_counted(const sb_cost_params *cp, const int *c, int nd, uint32_t dims,
                                   long n, long total)
{
    long q = 1, nnodes = (total + n - 1) / n;
    if (cyclic(cp))
        nnodes = cp->devices / n;
    int idx[SB_MAX_DIMS] = {0};
    long stride[SB_MAX_DIMS];
    for (int d = nd - 1, s = 1; d >= 0; s *= c[d], d--)
        stride[d] = s;
    for (int d = 0; d < nd; d++)
        if (dims & (1u << d))
            q *= c[d];
    int *count = calloc((size_t)nnodes, sizeof *count);
    if (!count) /* no memory for the count: the flat placement */
        return (sb_coll_group){(double)q, (double)(q < n ? q : n), ceil((double)q / n)};
    double most = 0, met = 0;
    for (long k = 0; k < q; k++) {
        long r = 0;
        for (int d = 0; d < nd; d++)
            r += idx[d] * stride[d];
        int *cnt = &count[sb_node_of(cp, r)];
        if (!*cnt)
            met++;
        if (++*cnt > most)
            most = *cnt;
        for (int d = nd - 1; d >= 0; d--) { /* next index over the group's dims */
            if (!(dims & (1u << d)))
                continue;
            if (++idx[d] < c[d])
                break;
            idx[d] = 0;
        }
    }
    free(count);
    sb_coll_group g = {(double)q, most, met};
    return g;
}

/* The group's ranks split by a modulus m: each dim d of `dims` (stride s, the
 * product of the splits after it, and split c[d]) has its c[d] ranks less
 * than m apart when s c[d] divides m (a factor of *low), multiples of m
 * apart when m divides s (a factor of *high), and else, when s divides m
 * and m / s divides c[d], m / s of the first kind times c[d] s / m of the
 * second. The dims after d add less than s, so the factors multiply. 0, or
 * -1 when a dim lines up neither way (powers of two always do). */
static int split_by(const int *c, int nd, uint32_t dims, long m, double *low, double *high)
{
    *low = *high = 1.0;
    long s = 1;
    for (int d = nd - 1; d >= 0; s *= c[d], d--) {
        if (!(dims & (1u << d)) || c[d] == 1)
            continue;
        if (m % (s * c[d]) == 0) {
            *low *= c[d];
        } else if (s % m == 0) {
            *high *= c[d];
        } else if (m % s == 0 && c[d] % (m / s) == 0) {
            *low *= (double)(m / s);
            *high *= (double)(c[d] / (m / s));
        } else {
            return -1;
        }
    }
    return 0;
}

/* The last groups found (sb_coll_group_of), per thread: an op's cost is
 * priced up to three ways in a row (sb_op_cost_split) over the same groups. */
typedef struct {
    int key[SB_MAX_DIMS + 5], used;
    sb_coll_group g;
} group_memo;
static _Thread_local group_memo group_last[8];
static _Thread_local int group_next;

static sb_coll_group coll_group_of(const sb_cost_params *cp, const int *c, int nd, uint32_t dims);

sb_coll_group sb_coll_group_of(const sb_cost_params *cp, const int *c, int nd, uint32_t dims)
{
    int key[SB_MAX_DIMS + 5] = {0};
    key[0] = nd, key[1] = (int)dims, key[2] = cp->node_devices, key[3] = cp->devices;
    key[4] = cp->node_order;
    memcpy(key + 5, c, (size_t)nd * sizeof *c);
    for (int i = 0; i < 8; i++)
        if (group_last[i].used && !memcmp(group_last[i].key, key, sizeof key))
            return group_last[i].g;
    group_memo *x = &group_last[group_next];
    group_next = (group_next + 1) & 7;
    memcpy(x->key, key, sizeof key);
    x->used = 1;
    x->g = coll_group_of(cp, c, nd, dims);
    return x->g;
}

static sb_coll_group coll_group_of(const sb_cost_params *cp, const int *c, int nd, uint32_t dims)
{
    double q = 1.0;
    long total = 1;
    for (int d = 0; d < nd; d++) {
        total *= c[d];
        if (dims & (1u << d))
            q *= c[d];
    }
    long n = cp->node_devices;
    if (!cyclic(cp) && (n <= 0 || total <= n)) /* every rank of the grid on node 0 */
        return group_one_node(q);
    /* block (node r / n): ranks less than n apart share a node, multiples of
     * n apart do not; cyclic (node r mod N): the other way round, modulo N */
    double low, high;
    long m = cyclic(cp) ? cp->devices / n : n;
    if (split_by(c, nd, dims, m, &low, &high))
        return group_counted(cp, c, nd, dims, n, total);
    sb_coll_group g = cyclic(cp) ? (sb_coll_group){q, high, low} : (sb_coll_group){q, low, high};
    return g;
}

const char *sb_coll_group_word(sb_coll_group g)
{
    if (g.nodes <= 1)
        return "intra";
    return g.per_node <= 1 ? "inter" : "both";
}

/* ---- collectives ---------------------------------------------------------------- */

/* A ring of `steps` steps moving `chunk` words each over one link: the
 * intra-node one, or the inter-node one when x. */
static double ring(const sb_cost_params *cp, int x, double chunk, double steps)
{
    double c = flops_per_word(cp, x ? cp->gbs_inter : cp->gbs) * (chunk * steps);
    return steps > 0 ? c + latency_flops(cp, x ? cp->latency_inter_us : cp->latency_us, steps) : c;
}

/* The three collectives differ in the ring's passes: 2 for an all-reduce
 * (a reduce-scatter then an all-gather), 1 for either half. Inside a node:
 * passes (q-1) steps of words/q. Across nodes: the flat ring over the
 * inter-node link, or inside each node (k ranks, words/k chunks), across
 * the nodes on the node's 1/k of the data (m nodes), and inside again for
 * an all-reduce (a reduce-scatter or all-gather has one intra phase). */
static double ring_collective(const sb_cost_params *cp, double words, sb_coll_group g,
                              double passes)
{
    double q = g.q;
    if (g.nodes <= 1)
        return ring(cp, 0, words / q, passes * (q - 1.0));
    double flat = ring(cp, 1, words / q, passes * (q - 1.0));
    double k = g.per_node, m = g.nodes;
    double intra = ring(cp, 0, words / k, k - 1.0);
    double hier = (passes > 1 ? 2.0 : 1.0) * intra + ring(cp, 1, words / k / m, passes * (m - 1.0));
    return hier < flat ? hier : flat;
}

/* A collective of `kind` (the order of sb_pcoll_kind) over q ranks
 * under cp->coll_mode: 1 with *out its FLOP-equivalents when the mode
 * prices it (measured alpha + beta * bytes where the profile has that
 * group size; 0 when free), 0 for the analytic terms. The words are
 * those the analytic term is given: the buffer every rank holds (p2p: the
 * words sent), as the profile timed them (measure/profile_run.c). */
static int coll_priced(const sb_cost_params *cp, int kind, double words, double q, double *out)
{
    if (cp->coll_mode == SB_COLL_FREE) {
        *out = 0.0;
        return 1;
    }
    int iq = (int)q;
    if (cp->coll_mode != SB_COLL_MEASURED || kind < 0 || kind >= SB_COLL_KINDS || iq < 2
        || iq > SB_COLL_MAXQ || (double)iq != q
        || !(cp->coll_alpha_s[kind][iq] > 0 || cp->coll_beta_s[kind][iq] > 0))
        return 0;
    /* the profile timed fp32 buffers: 4 bytes a word */
    *out = words > 0 ? (cp->coll_alpha_s[kind][iq] + words * 4.0 * cp->coll_beta_s[kind][iq])
                           * cp->tflops * 1e12
                     : 0.0;
    return 1;
}

double sb_coll_allreduce(const sb_cost_params *cp, double words, sb_coll_group g)
{
    double c;
    return coll_priced(cp, 0, words, g.q, &c) ? c : ring_collective(cp, words, g, 2.0);
}

double sb_coll_reduce_scatter(const sb_cost_params *cp, double words, sb_coll_group g)
{
    double c;
    return coll_priced(cp, 1, words, g.q, &c) ? c : ring_collective(cp, words, g, 1.0);
}

double sb_coll_allgather(const sb_cost_params *cp, double words, sb_coll_group g)
{
    double c;
    return coll_priced(cp, 2, words, g.q, &c) ? c : ring_collective(cp, words, g, 1.0);
}

double sb_coll_p2p(const sb_cost_params *cp, double words, int inter)
{
    double pc;
    if (coll_priced(cp, 4, words, 2.0, &pc))
        return pc;
    int x = inter && cp->node_devices > 0;
    double c = flops_per_word(cp, x ? cp->gbs_inter : cp->gbs) * words;
    return words > 0 ? c + latency_flops(cp, x ? cp->latency_inter_us : cp->latency_us, 1.0) : c;
}

/* The received words come evenly from the group's other ranks: (k-1)/(q-1)
 * of them over the intra-node link and (q-k)/(q-1) over the inter-node
 * link at once (the two links are separate), then one latency of the
 * slower link. */
double sb_coll_alltoall(const sb_cost_params *cp, double words, sb_coll_group g)
{
    double pc;
    if (coll_priced(cp, 3, words, g.q, &pc))
        return pc;
    if (g.nodes <= 1 || g.q <= 1)
        return sb_coll_p2p(cp, words, 0);
    double k = g.per_node < g.q ? g.per_node : g.q;
    double wi = words * (k - 1.0) / (g.q - 1.0), wx = words * (g.q - k) / (g.q - 1.0);
    double ti = flops_per_word(cp, cp->gbs) * wi, tx = flops_per_word(cp, cp->gbs_inter) * wx;
    double c = ti > tx ? ti : tx;
    return words > 0 ? c + latency_flops(cp, cp->latency_inter_us, 1.0) : c;
}

double sb_coll_relayout(const sb_cost_params *cp, double words, double q, double local)
{
    if (cp->profiled) /* the predictive model's fit (profile.h); the per-edge constant is in
                         the step's fixed part, the same for every strategy */
        return ((words > 0 ? cp->relay_msg_s + words * cp->relay_word_s : 0.0)
                + local * cp->relay_local_s)
               * cp->tflops * 1e12;
    return sb_coll_alltoall(cp, words, sb_coll_group_first(cp, q));
}

double sb_allreduce_cost(const sb_cost_params *cp, double words, double q)
{
    return sb_coll_allreduce(cp, words, sb_coll_group_first(cp, q));
}

double sb_exchange_cost(const sb_cost_params *cp, double words)
{
    return sb_coll_p2p(cp, words, cp->node_devices > 0 && cp->devices > cp->node_devices);
}

sb_coll_group sb_op_group(const sb_cost_params *cp, const sb_op *op, const int *c, uint32_t dims)
{
    return sb_coll_group_of(cp, c, op->ndims, dims);
}

double sb_op_exchange(const sb_cost_params *cp, const sb_op *op, const int *c, uint32_t dims,
                      double words)
{
    return sb_coll_p2p(cp, words, sb_op_group(cp, op, c, dims).nodes > 1);
}

/* ---- memory-bound ops ---------------------------------------------------------- */

double sb_elem_cost(const sb_cost_params *cp, double elems, double units, double fwd_words,
                    double bwd_words)
{
    if (!(cp->gpu_sms > 0)) /* the reference: units per element at elem_ratio */
        return units * elems * cp->elem_ratio;
    /* the GPU op model: a forward and a backward kernel, each its bytes over
     * the HBM bandwidth it reaches plus a kernel's overhead, as FLOP at F */
    double bytes = elems * (fwd_words + bwd_words) * cp->word_bytes;
    double s = bytes / (cp->gpu_hbm_gbs * 1e9 * cp->gpu_hbm_eff) + 2.0 * cp->gpu_kernel_us * 1e-6;
    return s * cp->tflops * 1e12;
}

/* ---- GEMMs and extents ------------------------------------------------------ */

/* The forward, input-gradient and weight-gradient GEMMs of `batch` elements
 * (one batched kernel each) by the GPU op model (cost/gpu_op.c): tile and
 * wave quantization over the SMs, the large-GEMM fraction, bound by HBM. */
/* The last GEMMs priced (sb_gemm_gpu_seconds), per thread: an op's cost is
 * priced up to three ways in a row (sb_op_cost_split, the time breakdown)
 * with the same GEMMs. */
typedef struct {
    double key[11], s; /* s 0: an empty slot */
} gemm_memo;
static _Thread_local gemm_memo gemm_last[4];
static _Thread_local int gemm_next;

/* The GPU op model's figures of cp (cost/gpu_op.c's sb_gpu). */
static void gpu_of(const sb_cost_params *cp, sb_gpu *g)
{
    memset(g, 0, sizeof *g);
    g->peak_tflops = cp->gpu_peak_tflops, g->gemm_eff = cp->gpu_gemm_eff;
    g->hbm_gbs = cp->gpu_hbm_gbs, g->hbm_eff = cp->gpu_hbm_eff, g->sms = cp->gpu_sms;
    g->tile_m = 128.0, g->tile_n = 256.0, g->kernel_us = cp->gpu_kernel_us;
    g->attn_peak_tflops = cp->gpu_attn_peak_tflops, g->attn_gemm_eff = cp->gpu_attn_gemm_eff;
    g->attn_fwd = cp->gpu_attn_fwd, g->attn_bwd = cp->gpu_attn_bwd;
}

double sb_attn_gpu_seconds(const sb_cost_params *cp, double batch, double m, double n, double k,
                           int bwd)
{
    sb_gpu g;
    gpu_of(cp, &g);
    return sb_gpu_attn_s(&g, batch, m, n, k, cp->word_bytes, bwd);
}

double sb_gemm_gpu_seconds(const sb_cost_params *cp, double batch, double m, double n, double k)
{
    double key[11] = {batch, m, n, k, cp->gpu_peak_tflops, cp->gpu_gemm_eff, cp->gpu_hbm_gbs,
                      cp->gpu_hbm_eff, cp->gpu_sms, cp->gpu_kernel_us, cp->word_bytes};
    for (int i = 0; i < 4; i++)
        if (gemm_last[i].s > 0 && !memcmp(gemm_last[i].key, key, sizeof key))
            return gemm_last[i].s;
    sb_gpu g;
    gpu_of(cp, &g);
    double B = cp->word_bytes;
    double s = sb_gpu_gemm_s(&g, batch, m, n, k, B) + sb_gpu_gemm_s(&g, batch, m, k, n, B) +
               sb_gpu_gemm_s(&g, batch, k, n, m, B);
    gemm_memo *x = &gemm_last[gemm_next];
    gemm_next = (gemm_next + 1) & 3;
    memcpy(x->key, key, sizeof key);
    x->s = s;
    return s;
}

/* The three all-reduces of one batch element's GEMM (sb_gemm_cost). */
static double gemm_comm(const sb_cost_params *cp, double m, double n, double k,
                        const sb_coll_group *g)
{
    double comm = sb_coll_allreduce(cp, m * n, g[2]);
    comm += sb_coll_allreduce(cp, m * k, g[1]);
    /* the weight gradient's words, in the gradient reduction's word */
    double gw = cp->grad_word_bytes > 0 ? n * k * (cp->grad_word_bytes / cp->word_bytes) : n * k;
    comm += sb_coll_allreduce(cp, gw, g[0]);
    return comm;
}

double sb_gemm_cost(const sb_cost_params *cp, double batch, double m, double n, double k,
                    const sb_coll_group *g, int pw, double mac_ratio)
{
    double comp = m * n * k * 3.0 * mac_ratio;
    if (cp->gpu_sms > 0 && mac_ratio == 1.0) /* the GPU op model: seconds at F */
        comp = sb_gemm_gpu_seconds(cp, batch, m, n, k) / batch * cp->tflops * 1e12;
    if (pw > 0)
        comp += (3.0 * pw) * (m * n) * cp->elem_ratio;
    return batch * (comp + gemm_comm(cp, m, n, k, g));
}

double sb_gemm_comm_cost(const sb_cost_params *cp, double batch, double m, double n, double k,
                         const sb_coll_group *g)
{
    return batch * gemm_comm(cp, m, n, k, g);
}

double sb_per_dev(const sb_op *op, const int *c, int d) { return (double)op->dims[d].size / c[d]; }

double sb_per_device_elems(const sb_op *op, const int *c)
{
    double e = 1.0;
    for (int i = 0; i < op->ndims; i++)
        e *= (double)op->dims[i].size / c[i];
    return e;
}

double sb_area_needed(const double *src, const double *tgt, int n, double qs, double qt)
{
    double area = 1.0, inter = 1.0;
    for (int i = 0; i < n; i++)
        area *= tgt[i];
    if (qt > qs)
        inter = 0.0;
    else
        for (int i = 0; i < n; i++)
            inter *= fmin(tgt[i], src[i]);
    double w = area - inter;
    return w > 0 ? w : 0.0;
}

/* ---- operands ---------------------------------------------------------------- */

void sb_operand_layout(const sb_op *op, const sb_operand *o, int tensor_ndims, const int *c,
                       int *layout)
{
    for (int j = 0; j < tensor_ndims; j++) {
        int mp = o->map[j];
        if (mp >= 0) {
            layout[j] = c[mp];
        } else if (mp == SB_MAP_ALL) {
            int q = 1;
            for (int i = 0; i < op->ndims; i++)
                q *= c[i];
            layout[j] = q;
        } else {
            layout[j] = 1;
        }
    }
}

double sb_operand_elems(const sb_model *m, const sb_op *op, const sb_operand *o, const int *c)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    int lay[SB_MAX_DIMS];
    sb_operand_layout(op, o, t->ndims, c, lay);
    double e = 1.0;
    for (int j = 0; j < t->ndims; j++)
        e *= (double)t->dims[j].size / lay[j];
    return e;
}

void sb_mem_operands(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    memset(e, 0, sizeof *e);
    for (int w = 0; w < op->nweights; w++) {
        const sb_weight *wt = &op->weights[w];
        double n = 1.0;
        for (int j = 0; j < wt->ndims; j++)
            n *= wt->map[j] >= 0 ? sb_per_dev(op, c, wt->map[j]) : (double)wt->size[j];
        e->weights += n;
    }
    for (int k = 0; k < op->nin; k++) {
        double n = sb_operand_elems(m, op, &op->in[k], c);
        if (m->tensors[op->in[k].tensor].kind == SB_TENSOR_WEIGHT) {
            e->weights += n;
            if (sb_tensor_tied(m, op->in[k].tensor))
                e->tied += n;
            if (n > e->wmax)
                e->wmax = n;
        } else {
            e->in += n;
        }
    }
    for (int k = 0; k < op->nout; k++)
        e->outs += sb_operand_elems(m, op, &op->out[k], c);
}


/* ---- ZeRO: weights and their replicas --------------------------------------------- */

/* The product of c over the dims of op not in `mapped` (a bit per dim). */
static double replicas(const sb_op *op, const int *c, uint32_t mapped)
{
    double q = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (!(mapped & (1u << i)))
            q *= c[i];
    return q;
}

/* Whether tensor t is a tied weight (`tie`): its reader's working copy of
 * the embedding's table (runtime/executor/tied.c), no weight of its own. */
int sb_tensor_tied(const sb_model *m, int t)
{
    for (int i = 0; i < m->ntied && i < 4; i++)
        if (m->tied[i] == t)
            return 1;
    return 0;
}

/* sb_weight_replicas, with the dims each weight's replicas differ in
 * (dims[w], a bit per dim; may be NULL). A tied copy's entry is there
 * too (its gradient is all-reduced over its replicas); it is never
 * ZeRO-sliced (sb_weight_replica_tied tells it). */
static int weight_replicas(const sb_model *m, const sb_op *op, const int *c, double *elems,
                           double *q, uint32_t *dims, int max)
{
    int n = 0;
    int bn = op->kind == SB_OP_NORM && op->batchnorm; /* no gradient sum (runtime) */
    uint32_t all = op->ndims >= 32 ? ~0u : (1u << op->ndims) - 1u;
    for (int w = 0; w < op->nweights && n < max; w++, n++) {
        const sb_weight *wt = &op->weights[w];
        uint32_t mapped = 0;
        elems[n] = 1.0;
        for (int j = 0; j < wt->ndims; j++) {
            elems[n] *= wt->map[j] >= 0 ? sb_per_dev(op, c, wt->map[j]) : (double)wt->size[j];
            if (wt->map[j] >= 0)
                mapped |= 1u << wt->map[j];
        }
        q[n] = bn ? 1.0 : replicas(op, c, mapped);
        if (dims)
            dims[n] = bn ? 0u : all & ~mapped;
    }
    for (int k = 0; k < op->nin && n < max; k++) {
        const sb_operand *o = &op->in[k];
        const sb_tensor *t = &m->tensors[o->tensor];
        if (t->kind != SB_TENSOR_WEIGHT)
            continue;
        uint32_t mapped = 0;
        for (int j = 0; j < t->ndims; j++)
            mapped |= o->map[j] >= 0 ? 1u << o->map[j] : o->map[j] == SB_MAP_ALL ? ~0u : 0u;
        elems[n] = sb_operand_elems(m, op, o, c);
        q[n] = bn ? 1.0 : replicas(op, c, mapped);
        if (dims)
            dims[n] = bn ? 0u : all & ~mapped;
        n++;
    }
    return n;
}

int sb_weight_replicas(const sb_model *m, const sb_op *op, const int *c, double *elems,
                       double *q, int max)
{
    return weight_replicas(m, op, c, elems, q, NULL, max);
}

/* Entry w of sb_weight_replicas (in its order: the op's own weights, then
 * its weight operands) is a tied copy. */
int sb_weight_replica_tied(const sb_model *m, const sb_op *op, int w)
{
    if (w < op->nweights)
        return 0;
    for (int k = 0, n = op->nweights; k < op->nin; k++) {
        if (m->tensors[op->in[k].tensor].kind != SB_TENSOR_WEIGHT)
            continue;
        if (n++ == w)
            return sb_tensor_tied(m, op->in[k].tensor);
    }
    return 0;
}

/* A tied copy's two relayouts a step (tied.c): its shard pulled from the
 * table's layout and its gradient pushed back, each a point-to-point
 * exchange of the copy's shard whatever the table's layout (the owner's
 * config is another op's: equal layouts, priced the same, move nothing
 * between ranks). Left out with the weight-gradient reductions
 * (wgrad_free): it is a once-per-step cost as they are. */
double sb_tied_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    if (cp->wgrad_free)
        return 0.0;
    double cost = 0.0;
    for (int k = 0; k < op->nin; k++)
        if (sb_tensor_tied(m, op->in[k].tensor))
            cost += 2.0 * sb_exchange_cost(cp, sb_operand_elems(m, op, &op->in[k], c));
    return cost;
}

double sb_zero_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    if (cp->zero < 3 || cp->wgrad_free)
        return 0.0;
    double e[SB_MAX_OP_WEIGHTS + SB_MAX_IO], q[SB_MAX_OP_WEIGHTS + SB_MAX_IO];
    uint32_t dims[SB_MAX_OP_WEIGHTS + SB_MAX_IO];
    int n = weight_replicas(m, op, c, e, q, dims, SB_MAX_OP_WEIGHTS + SB_MAX_IO);
    double cost = 0.0;
    for (int w = 0; w < n; w++) /* a tied copy is whole: nothing gathered */
        if (!sb_weight_replica_tied(m, op, w))
            cost += sb_coll_allgather(cp, e[w], sb_coll_group_of(cp, c, op->ndims, dims[w]));
    return cost;
}
