/* megatron_stages.c: a priced Megatron configuration stage by stage
 * (shardbench/megatron.h, docs/megatron.md), from the same GPU op model
 * figures as sb_mt_price (mt_int.h): which layers each pipeline rank holds
 * (sb_mt_stage_count: even, or the first and last stages' counts given and
 * the rest even; VPP equal chunks a rank, interleaved over the ranks), each
 * chunk's forward and backward
 * seconds per micro-batch, and each stage's memory per device at its peak
 * (sb_mt_stage_mem, megatron.c, which the price shares)
 * (1F1B keeps PP - s micro-batches in flight on stage s; interleaved, the
 * warm-up of Megatron-LM's schedule: 2 (PP - s - 1) + (VPP - 1) PP chunks,
 * plus the one in its steady state). sb_mt_price's step is the slowest
 * stage's and its memory the fullest stage's; these agree with it there. */
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "mt_int.h"

#include <math.h>
#include <string.h>

void sb_mt_chunk_of(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, int s, int k,
                    int *first_layer, int *nlayers, double *fwd_s, double *bwd_s)
{
    sb_mt_layer_cost L;
    sb_mt_ends E;
    sb_mt_layer(mm, c, g, &L);
    sb_mt_ends_of(mm, c, g, &E);
    int n = 0, first = 1, v = k * c->pp + s, last_v = c->pp * c->vpp - 1;
    sb_mt_chunk_layers(mm, c, s, k, &n, &first);
    /* a chunk's sends: one forward, one backward per micro-batch */
    double send = E.pp_mb / (2.0 * c->vpp);
    double f = n * (L.fwd_s + L.tp_fwd_s + L.cp_fwd_s + L.ep_fwd_s) + send;
    double b = n * (L.bwd_s + L.recomp_s + L.tp_bwd_s + (L.cp_s - L.cp_fwd_s) + (L.ep_s - L.ep_fwd_s)) + send;
    if (v == 0)
        f += E.emb_f, b += E.emb_b;
    if (v == last_v)
        f += E.head_f + 0.5 * E.head_tp, b += E.head_b + 0.5 * E.head_tp;
    *first_layer = first, *nlayers = n, *fwd_s = f, *bwd_s = b;
}

void sb_mt_stage_of(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, int s,
                    sb_mt_stage *o)
{
    memset(o, 0, sizeof *o);
    sb_mt_layer_cost L;
    sb_mt_layer(mm, c, g, &L);
    o->stage = s;
    for (int k = 0; k < c->vpp; k++) {
        int first, n;
        double f, b;
        sb_mt_chunk_of(mm, c, g, s, k, &first, &n, &f, &b);
        if (k == 0)
            o->first_layer = first;
        o->layers += n;
        o->fwd_s += f, o->bwd_s += b;
    }
    sb_mt_stage_mem(mm, c, &L, s, o->layers, o);
}
