/* megatron_stages.c: a priced Megatron configuration stage by stage
 * (shardbench/megatron.h, docs/megatron.md), from the same GPU op model
 * figures as sb_mt_price (mt_int.h): which layers each pipeline rank holds
 * (VPP chunks of equal layers interleaved over the ranks; without
 * interleaving uneven stages get their extra layer from the ends inwards:
 * stage 0, the last, stage 1, ...), each chunk's forward and backward
 * seconds per micro-batch, and each stage's memory per device at its peak
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
    if (c->vpp > 1) { /* virtual stage v holds layers v n + 1 .. (v + 1) n */
        n = (int)(mm->layers / ((long)c->pp * c->vpp));
        first = v * n + 1;
    } else
        sb_mt_stage_layers(mm->layers, c->pp, s, &n, &first);
    /* a chunk's sends: one forward, one backward per micro-batch */
    double send = E.pp_mb / (2.0 * c->vpp);
    double f = n * (L.fwd_s + L.tp_fwd_s + L.cp_fwd_s + 0.5 * L.ep_s) + send;
    double b = n * (L.bwd_s + L.recomp_s + L.tp_bwd_s + (L.cp_s - L.cp_fwd_s) + 0.5 * L.ep_s) + send;
    if (v == 0)
        f += E.emb_f, b += E.emb_b;
    if (v == last_v)
        f += E.head_f + 0.5 * E.head_tp, b += E.head_b + 0.5 * E.head_tp;
    *first_layer = first, *nlayers = n, *fwd_s = f, *bwd_s = b;
}

void sb_mt_stage_mem(const sb_mt_model *mm, const sb_mt_config *c, const sb_mt_layer_cost *L,
                     int s, int layers, sb_mt_stage *o)
{
    sb_prec_bytes pb = sb_precision_bytes(c->precision);
    const double t = c->tp, h = (double)mm->hidden, V = (double)mm->vocab;
    const double T = (double)c->mbs * ((double)mm->seq / c->cp), B = pb.act;
    const long M = mm->global_batch / ((long)c->dp * c->mbs);
    const double q = (double)c->dp * c->cp;
    /* Megatron-Core's gradient buffer is in the reduction's word (fp32 unless
     * --grad-reduce-dtype says otherwise: grad_reduce_in_fp32 off keeps it bf16) */
    const double gw = c->grad_bytes > 0 ? c->grad_bytes : pb.grad_word;
    /* the vocab shard of the embedding (stage 0) and of the output layer (the last) */
    double params = layers * L->params + (s == 0 || s == c->pp - 1 ? V * h / t : 0.0);
    /* activations in flight at the stage's peak, in layers' worth of one micro-batch */
    double units, per_unit = (double)layers / c->vpp;
    if (c->pp == 1)
        units = 1.0;
    else if (c->vpp == 1)
        units = fmin((double)M, (double)(c->pp - s));
    else
        units = fmin((double)M * c->vpp, 2.0 * (c->pp - s - 1) + (c->vpp - 1.0) * c->pp + 1.0);
    o->inflight = units / c->vpp;
    o->mem_weights = params * pb.weight;
    o->mem_grads = params * gw;
    o->mem_optimizer = params * pb.adam / (c->dist_opt ? q : 1.0);
    /* the last stage also keeps the fp32 logits and their gradient of one micro-batch */
    o->mem_activations = units * per_unit * L->act_bytes +
                         (s == c->pp - 1 ? T * V / t * 4.0 * 2.0 : 0.0);
    /* buffers: the TP all-gather of a layer's input and the backward's transient
     * full-width tensors (4 of T x h), and 1 GiB of CUDA context, cuBLAS and NCCL buffers */
    o->mem_buffers = 4.0 * T * h * B + 1073741824.0;
    o->mem_total = o->mem_weights + o->mem_grads + o->mem_optimizer + o->mem_activations +
                   o->mem_buffers;
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
