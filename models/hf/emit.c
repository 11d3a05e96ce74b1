/* emit.c: the model text of an hf_cfg (docs/model-format.md): params named
 * by the config's keys, one block per piece (attention or MLA, MLP, mixture
 * of experts, layer), the embedding, the layers in runs of equal kind and
 * the head. Every piece is written with the language's ops: a bias is an
 * expanded weight added, a q/k norm an rmsnorm over the head dim, partial
 * rotary a split, a rope and a concat, a tied head `tie`. */
#define _GNU_SOURCE
#include "hf_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names the text uses for the sizes. */
typedef struct {
    const char *V, *H, *L, *NH, *KV, *FF, *HD;
} names;

static const char *norm_op(const hf_cfg *c)
{
    return c->norm == HF_NORM_LAYER ? "norm" : "rmsnorm";
}

static void emit_params(FILE *f, const hf_cfg *c, const names *n)
{
    fprintf(f, "param %s = %lld\nparam %s = %lld\nparam %s = %lld\nparam %s = %lld\n", n->V,
            (long long)c->vocab, n->H, (long long)c->hidden, n->L, (long long)c->layers, n->NH,
            (long long)c->heads);
    if (c->k.kv_heads)
        fprintf(f, "param %s = %lld\n", n->KV, (long long)c->kv_heads);
    fprintf(f, "param %s = %lld\n", n->FF, (long long)c->ff);
    if (c->mla)
        ; /* MLA's head dims are its own keys */
    else if (c->head_dim_given)
        fprintf(f, "param head_dim = %lld\n", (long long)c->head_dim);
    else
        fprintf(f, "param head_dim = %s / %s\n", n->H, n->NH);
    if (!c->mla)
        fprintf(f, "param rep = %s / %s\n", n->NH, n->KV);
    if (c->theta && c->rotary_dim < c->head_dim)
        fprintf(f, "param rotary_dim = %lld\n", (long long)c->rotary_dim);
    if (!c->theta)
        fprintf(f, "param n_positions = %lld\n", (long long)c->max_pos);
    if (c->experts) {
        fprintf(f, "param %s = %lld\nparam %s = %lld\n", c->k.experts, (long long)c->experts,
                c->k.topk, (long long)c->topk);
        const char *MF = c->k.moe_ff;
        if (strcmp(MF, n->FF) != 0)
            fprintf(f, "param %s = %lld\n", MF, (long long)c->moe_ff);
        if (c->shared && c->shared_n)
            fprintf(f, "param %s = %lld\nparam shared_ff = %s * %s\n", c->k.shared,
                    (long long)c->shared_n, c->k.shared, MF);
        else if (c->shared)
            fprintf(f, "param %s = %lld\nparam shared_ff = %s\n", c->k.shared,
                    (long long)c->shared_ff, c->k.shared);
    }
    if (c->mla)
        fprintf(f, "param q_lora_rank = %lld\nparam kv_lora_rank = %lld\nparam qk_nope_head_dim = "
                   "%lld\nparam qk_rope_head_dim = %lld\nparam v_head_dim = %lld\n",
                (long long)c->q_lora, (long long)c->kv_lora, (long long)c->qk_nope,
                (long long)c->qk_rope, (long long)c->v_dim);
    /* keys that shape the graph: params so that a strategy file records
     * them (a reload passes its params back as settings) */
    if (c->experts && c->mla)
        fprintf(f, "param first_k_dense_replace = %lld\nparam moe_layer_freq = %lld\n",
                (long long)c->first_dense, (long long)c->layer_freq);
    else if (c->experts && c->layer_freq)
        fprintf(f, "param decoder_sparse_step = %lld\n", (long long)c->layer_freq);
    if (c->window)
        fprintf(f, "param sliding_window = %lld\n", (long long)c->window);
    if (c->attn_cap)
        fprintf(f, "param attn_logit_softcapping = %lld\n", (long long)c->attn_cap);
    if (c->final_cap)
        fprintf(f, "param final_logit_softcapping = %lld\n", (long long)c->final_cap);
    fprintf(f, "param seq = %lld\nparam batch = %lld\n", (long long)c->seq, (long long)c->batch);
    if (c->experts) /* ceil(5 k seq / (4 E)): capacity factor 5/4, as mixtral-8x7b */
        fprintf(f, "param cap_x = 5 * %s * seq + 4 * %s - 1\nparam cap = (cap_x - cap_x %% (4 * "
                   "%s)) / (4 * %s)\n", c->k.topk, c->k.experts, c->k.experts, c->k.experts);
    fprintf(f, "cutoff 1\n\n");
}

/* y = x + bias: weight B[dims] expanded to x's shape `full` and added. */
static void emit_bias(FILE *f, const char *y, const char *x, const char *b, const char *dims,
                      const char *full)
{
    fprintf(f, "  weight %s[%s]\n  %sx = expand(%s, shape=[%s])\n  %s = add(%s, %sx)\n", b, dims, b,
            b, full, y, x, b);
}

/* y = rope(x) over the head dim dk, or over its first rotary_dim. */
static void emit_rope(FILE *f, const hf_cfg *c, const char *y, const char *x)
{
    if (!c->theta) {
        fprintf(f, "  %s = %s\n", y, x);
    } else if (c->rotary_dim < c->head_dim) {
        fprintf(f, "  %sa, %sb = split(%s, sizes=[rotary_dim, head_dim - rotary_dim], axis=dk)\n"
                   "  %sr = rope(%sa, seq=seq, dim=dk, theta=%lld)\n  %s = concat(%sr, %sb, axis=dk)\n",
                x, x, x, x, x, (long long)c->theta, y, x, x);
    } else {
        fprintf(f, "  %s = rope(%s, seq=seq, dim=dk, theta=%lld)\n", y, x, (long long)c->theta);
    }
}

/* Grouped-query attention (heads = kvh x rep) with the optional biases,
 * q/k norms and partial rotary. */
static void emit_attention(FILE *f, const hf_cfg *c, const names *n)
{
    const char *H = n->H, *KV = n->KV;
    char qd[256], kd[256], qf[256], kf[256], of[128], od[64];
    snprintf(qd, sizeof qd, "kvh=%s, rep=rep, dk=head_dim", KV);
    snprintf(kd, sizeof kd, "kvh=%s, dk=head_dim", KV);
    snprintf(qf, sizeof qf, "batch=batch, kvh=%s, rep=rep, seq=seq, dk=head_dim", KV);
    snprintf(kf, sizeof kf, "batch=batch, kvh=%s, seq=seq, dk=head_dim", KV);
    snprintf(of, sizeof of, "batch=batch, seq=seq, embed=%s", H);
    snprintf(od, sizeof od, "embed=%s", H);
    fprintf(f, "# causal grouped-query self-attention of x [batch seq embed]; window > 0: keys\n"
               "# that far before a query masked too\nblock attention(x, window)\n");
    fprintf(f, "  weight wq[kvh=%s, rep=rep, embed=%s, dk=head_dim]\n", KV, H);
    fprintf(f, "  weight wk[kvh=%s, embed=%s, dk=head_dim]\n", KV, H);
    fprintf(f, "  weight wv[kvh=%s, embed=%s, dk=head_dim]\n", KV, H);
    fprintf(f, "  weight wo[kvh=%s, rep=rep, dk=head_dim, embed=%s]\n", KV, H);
    fprintf(f, "  q0 = einsum(\"batch seq embed, kvh rep embed dk -> batch kvh rep seq dk\", x, wq)\n"
               "  k0 = einsum(\"batch seq embed, kvh embed dk -> batch kvh seq dk\", x, wk)\n"
               "  v0 = einsum(\"batch seq embed, kvh embed dk -> batch kvh seq dk\", x, wv)\n");
    if (c->qkv_bias) {
        emit_bias(f, "q1", "q0", "bq", qd, qf);
        emit_bias(f, "k1", "k0", "bk", kd, kf);
        emit_bias(f, "v", "v0", "bv", kd, kf);
    } else {
        fprintf(f, "  q1 = q0\n  k1 = k0\n  v = v0\n");
    }
    if (c->qk_norm)
        fprintf(f, "  q2 = rmsnorm(q1, axis=dk)\n  k2 = rmsnorm(k1, axis=dk)\n");
    else
        fprintf(f, "  q2 = q1\n  k2 = k1\n");
    emit_rope(f, c, "q", "q2");
    emit_rope(f, c, "k", "k2");
    fprintf(f, "  logits = einsum(\"batch kvh rep seq dk, batch kvh mem dk -> batch kvh rep seq mem\", q, k)\n");
    if (c->attn_cap) /* Gemma 2: capped before the mask and the softmax */
        fprintf(f, "  capped = softcap(logits, cap=attn_logit_softcapping)\n"
                   "  w = softmax(capped, axis=mem, causal=seq, window=window)\n");
    else
        fprintf(f, "  w = softmax(logits, axis=mem, causal=seq, window=window)\n");
    fprintf(f, "  s = einsum(\"batch kvh rep seq mem, batch kvh mem dk -> batch kvh rep seq dk\", w, v)\n"
               "  o0 = einsum(\"batch kvh rep seq dk, kvh rep dk embed -> batch seq embed\", s, wo)\n");
    if (c->o_bias)
        emit_bias(f, "o", "o0", "bo", od, of);
    else
        fprintf(f, "  o = o0\n");
    fprintf(f, "  return o\nend\n\n");
}

/* DeepSeek's multi-head latent attention: q through an optional low-rank
 * down projection (rmsnorm between), k and v from one compressed latent
 * (rmsnorm, then up), a rotary key of qk_rope_head_dim shared by the heads,
 * logits = q_nope.k_nope + q_rope.k_rope. */
static void emit_mla(FILE *f, const hf_cfg *c, const names *n)
{
    const char *H = n->H, *NH = n->NH;
    fprintf(f, "# multi-head latent attention of x [batch seq embed] (no window)\n"
               "block attention(x, window)\n");
    if (c->q_lora) {
        fprintf(f, "  weight wqa[embed=%s, qr=q_lora_rank]\n"
                   "  weight wqb[heads=%s, qr=q_lora_rank, dq=qk_nope_head_dim + qk_rope_head_dim]\n"
                   "  qa = einsum(\"batch seq embed, embed qr -> batch seq qr\", x, wqa)\n"
                   "  qn = rmsnorm(qa, axis=qr)\n"
                   "  q = einsum(\"batch seq qr, heads qr dq -> batch heads seq dq\", qn, wqb)\n",
                H, NH);
    } else {
        fprintf(f, "  weight wq[heads=%s, embed=%s, dq=qk_nope_head_dim + qk_rope_head_dim]\n"
                   "  q = einsum(\"batch seq embed, heads embed dq -> batch heads seq dq\", x, wq)\n",
                NH, H);
    }
    fprintf(f, "  qn0, qp0 = split(q, sizes=[qk_nope_head_dim, qk_rope_head_dim], axis=dq)\n"
               "  qp = rope(qp0, seq=seq, dim=dq, theta=%lld)\n"
               "  weight wkva[embed=%s, kc=kv_lora_rank + qk_rope_head_dim]\n"
               "  kva = einsum(\"batch seq embed, embed kc -> batch seq kc\", x, wkva)\n"
               "  ckv, kp0 = split(kva, sizes=[kv_lora_rank, qk_rope_head_dim], axis=kc)\n"
               "  kp = rope(kp0, seq=seq, dim=kc, theta=%lld)\n"
               "  ckn = rmsnorm(ckv, axis=kc)\n"
               "  weight wkvb[heads=%s, kc=kv_lora_rank, dkv=qk_nope_head_dim + v_head_dim]\n"
               "  kv = einsum(\"batch seq kc, heads kc dkv -> batch heads seq dkv\", ckn, wkvb)\n"
               "  kn, v = split(kv, sizes=[qk_nope_head_dim, v_head_dim], axis=dkv)\n"
               "  l1 = einsum(\"batch heads seq dq, batch heads mem dq -> batch heads seq mem\", qn0, kn)\n"
               "  l2 = einsum(\"batch heads seq dq, batch mem dq -> batch heads seq mem\", qp, kp)\n"
               "  logits = add(l1, l2)\n"
               "  w = softmax(logits, axis=mem, causal=seq)\n"
               "  s = einsum(\"batch heads seq mem, batch heads mem dv -> batch heads seq dv\", w, v)\n"
               "  weight wo[heads=%s, dv=v_head_dim, embed=%s]\n"
               "  o = einsum(\"batch heads seq dv, heads dv embed -> batch seq embed\", s, wo)\n"
               "  return o\nend\n\n",
            (long long)c->theta, H, (long long)c->theta, NH, NH, H);
}

/* The dense MLP of width `width` (dim name FD): gated (SwiGLU, GeGLU) or
 * plain GELU, with the optional biases. */
static void emit_mlp(FILE *f, const hf_cfg *c, const names *n)
{
    const char *H = n->H;
    char bd[64], bf[128], od[64], of[128];
    snprintf(bd, sizeof bd, "ff=width");
    snprintf(bf, sizeof bf, "batch=batch, seq=seq, ff=width");
    snprintf(od, sizeof od, "embed=%s", H);
    snprintf(of, sizeof of, "batch=batch, seq=seq, embed=%s", H);
    int gated = c->mlp == HF_MLP_SWIGLU || c->mlp == HF_MLP_GEGLU;
    const char *fn = c->mlp == HF_MLP_SWIGLU ? "silu" : c->mlp == HF_MLP_GELU ? "gelu" : "gelu_tanh";
    fprintf(f, "# %s MLP of x [batch seq embed], inner width `width`\nblock mlp(x, width)\n",
            gated ? "gated" : "two-layer");
    fprintf(f, "  weight wg[embed=%s, ff=width]\n  weight wd[ff=width, embed=%s]\n", H, H);
    fprintf(f, "  g0 = einsum(\"batch seq embed, embed ff -> batch seq ff\", x, wg)\n");
    if (c->mlp_bias)
        emit_bias(f, "g", "g0", "bg", bd, bf);
    else
        fprintf(f, "  g = g0\n");
    fprintf(f, "  a = act(g, fn=%s)\n", fn);
    if (gated) {
        fprintf(f, "  weight wu[embed=%s, ff=width]\n"
                   "  u0 = einsum(\"batch seq embed, embed ff -> batch seq ff\", x, wu)\n", H);
        if (c->mlp_bias)
            emit_bias(f, "u", "u0", "bu", bd, bf);
        else
            fprintf(f, "  u = u0\n");
        fprintf(f, "  h = mul(a, u)\n");
    } else {
        fprintf(f, "  h = a\n");
    }
    fprintf(f, "  o0 = einsum(\"batch seq ff, ff embed -> batch seq embed\", h, wd)\n");
    if (c->mlp_bias)
        emit_bias(f, "o", "o0", "bd", od, of);
    else
        fprintf(f, "  o = o0\n");
    fprintf(f, "  return o\nend\n\n");
}

/* The mixture: router, moe_gate, dispatch, SwiGLU experts, combine, and
 * the shared experts beside (Qwen2-MoE's behind a sigmoid gate). */
static void emit_moe(FILE *f, const hf_cfg *c, const names *n)
{
    const char *H = n->H, *E = c->k.experts, *K = c->k.topk, *MF = c->k.moe_ff;
    fprintf(f, "# the mixture of %s SwiGLU experts, top %s, of x [batch seq embed]\nblock moe(x)\n",
            E, K);
    fprintf(f, "  weight wr[embed=%s, expert=%s]\n"
               "  r = einsum(\"batch seq embed, embed expert -> batch seq expert\", x, wr)\n"
               "  combine, dispatch = moe_gate(r, axis=expert, k=%s, capacity=cap)\n"
               "  xe = einsum(\"batch seq expert cap, batch seq embed -> expert batch cap embed\", dispatch, x)\n"
               "  weight wg[expert=%s, embed=%s, eff=%s]\n"
               "  weight wu[expert=%s, embed=%s, eff=%s]\n"
               "  weight wd[expert=%s, eff=%s, embed=%s]\n"
               "  g = einsum(\"expert batch cap embed, expert embed eff -> expert batch cap eff\", xe, wg)\n"
               "  u = einsum(\"expert batch cap embed, expert embed eff -> expert batch cap eff\", xe, wu)\n"
               "  a = act(g, fn=silu)\n  h = mul(a, u)\n"
               "  o = einsum(\"expert batch cap eff, expert eff embed -> expert batch cap embed\", h, wd)\n"
               "  y0 = einsum(\"batch seq expert cap, expert batch cap embed -> batch seq embed\", combine, o)\n",
            H, E, K, E, H, MF, E, H, MF, E, MF, H);
    if (c->shared == HF_SHARED_NONE) {
        fprintf(f, "  y = y0\n");
    } else if (c->shared == HF_SHARED_PLAIN) {
        fprintf(f, "  sh = mlp(x, width=shared_ff)\n  y = add(y0, sh)\n");
    } else {
        fprintf(f, "  sh = mlp(x, width=shared_ff)\n"
                   "  weight wsg[embed=%s, one=1]\n"
                   "  sg = einsum(\"batch seq embed, embed one -> batch seq one\", x, wsg)\n"
                   "  sa = act(sg, fn=sigmoid)\n"
                   "  sr = reshape(sa, shape=[batch=batch, seq=seq])\n"
                   "  sm = mul(sh, sr)\n  y = add(y0, sm)\n", H);
    }
    fprintf(f, "  return y\nend\n\n");
}

/* A decoder layer around FFN (`mlp(n2, width=FF)` or `moe(n2)`). */
static void emit_layer(FILE *f, const hf_cfg *c, const char *name, const char *ffn)
{
    const char *N = norm_op(c);
    fprintf(f, "block %s(x, window=0)\n  n1 = %s(x, axis=embed)\n  a0 = attention(n1, window=window)\n",
            name, N);
    if (c->sandwich)
        fprintf(f, "  a = %s(a0, axis=embed)\n", N);
    else
        fprintf(f, "  a = a0\n");
    if (c->parallel_residual) {
        fprintf(f, "  n2 = %s(x, axis=embed)\n  m = %s\n  y = add(x, a, m)\n", N, ffn);
    } else {
        fprintf(f, "  r = add(x, a)\n  n2 = %s(r, axis=embed)\n  m0 = %s\n", N, ffn);
        if (c->sandwich)
            fprintf(f, "  m = %s(m0, axis=embed)\n", N);
        else
            fprintf(f, "  m = m0\n");
        fprintf(f, "  y = add(r, m)\n");
    }
    fprintf(f, "  return y\nend\n\n");
}

/* The embedding (and GPT-2's learned positions), the layers in runs of
 * equal kind (the last run's count written from num_hidden_layers), the
 * final norm and the head (tied or not), the loss. */
static void emit_body(FILE *f, const hf_cfg *c, const names *n)
{
    fprintf(f, "input tokens[batch=batch, seq=seq]\n"
               "x0 = embedding(tokens, vocab=%s, size=%s, dim=embed)\n", n->V, n->H);
    if (!c->theta) {
        /* the table holds n_positions rows; a shorter seq reads the first */
        fprintf(f, "weight wpe[seq=n_positions, embed=%s]\n", n->H);
        if (c->seq < c->max_pos)
            fprintf(f, "pe = expand(wpe, shape=[batch=batch, seq=n_positions, embed=%s])\n"
                       "pos, pos_rest = split(pe, sizes=[seq, n_positions - seq], axis=seq)\n", n->H);
        else
            fprintf(f, "pos = expand(wpe, shape=[batch=batch, seq=seq, embed=%s])\n", n->H);
        fprintf(f, "x = add(x0, pos)\n");
    } else {
        fprintf(f, "x = x0\n");
    }
    int64_t done = 0;
    if (c->window_alt && c->window) { /* Gemma 2: sliding, global, sliding, ... */
        fprintf(f, "repeat (%s - %s %% 2) / 2\n  x = layer_dense(x, window=sliding_window)\n"
                   "  x = layer_dense(x)\nend\nrepeat %s %% 2\n"
                   "  x = layer_dense(x, window=sliding_window)\nend\n", n->L, n->L, n->L);
        done = c->layers;
    }
    while (done < c->layers) {
        int64_t run = 1;
        int sp = c->sparse[done];
        while (done + run < c->layers && c->sparse[done + run] == sp)
            run++;
        if (done + run == c->layers && done == 0)
            fprintf(f, "repeat %s\n", n->L);
        else if (done == 0 && !sp && c->mla && run == c->first_dense && c->layer_freq == 1)
            fprintf(f, "repeat first_k_dense_replace\n");
        else if (done + run == c->layers && c->mla && done == c->first_dense && c->layer_freq == 1)
            fprintf(f, "repeat %s - first_k_dense_replace\n", n->L);
        else if (done + run == c->layers)
            fprintf(f, "repeat %s - %lld\n", n->L, (long long)done);
        else
            fprintf(f, "repeat %lld\n", (long long)run);
        fprintf(f, "  x = %s(x%s)\nend\n", sp ? "layer_moe" : "layer_dense",
                c->window ? ", window=sliding_window" : "");
        done += run;
    }
    fprintf(f, "y = %s(x, axis=embed)\nweight wout[embed=%s, vocab=%s]\n", norm_op(c), n->H, n->V);
    if (c->tie)
        fprintf(f, "tie wout = x0\n");
    fprintf(f, "logits = einsum(\"batch seq embed, embed vocab -> batch seq vocab\", y, wout)\n");
    if (c->final_cap) /* Gemma 2: the head's logits capped before the loss */
        fprintf(f, "capped = softcap(logits, cap=final_logit_softcapping)\n"
                   "loss = softmax_xent(capped)\n");
    else
        fprintf(f, "loss = softmax_xent(logits)\n");
}

int hf_emit(const hf_cfg *c, const char *name, char **text, size_t *len, sb_error *err)
{
    names n = {c->k.vocab, c->k.hidden, c->k.layers, c->k.heads,
               c->k.kv_heads ? c->k.kv_heads : c->k.heads, c->k.ff, "head_dim"};
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory writing the model text");
    fprintf(f, "# generated by shardbench from a Hugging Face config.json (docs/models.md)\n"
               "model \"%s\"\n", name);
    emit_params(f, c, &n);
    if (c->mla)
        emit_mla(f, c, &n);
    else
        emit_attention(f, c, &n);
    emit_mlp(f, c, &n);
    char dense[160];
    snprintf(dense, sizeof dense, "mlp(n2, width=%s)", n.FF);
    emit_layer(f, c, "layer_dense", dense);
    if (c->experts) {
        emit_moe(f, c, &n);
        emit_layer(f, c, "layer_moe", "moe(n2)");
    }
    emit_body(f, c, &n);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory writing the model text");
    }
    *text = buf;
    *len = size;
    return 0;
}
