/* tests/unit/test_gpu_run.c: cmocka tests of a model priced as a GPU
 * framework runs it (models/gpu_run.c): which softmaxes are fused
 * attentions (and which are not), the causal and windowed fraction of
 * pairs by hand, the fused kernel's time against the materialized ops',
 * no S x S tensor in memory, activation gradients transient, a router's
 * (token, expert) maps in place of its one-hot, the output layer and a
 * router in bf16 under fp8, and fp8's input conversions by module (a
 * fused norm, a shared cast; undone where a pipeline cut divides one;
 * DeepSeek-V3's MLA as imported). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/cost.h"
#include "shardbench/hf.h"
#include "shardbench/machine.h"
#include "shardbench/megatron.h"
#include "shardbench/pipesearch.h"
#include "../search/pipe_int.h"
#include "shardbench/memory.h"
#include "shardbench/precision.h"
#include "shardbench/search.h"

/* A causal attention of q, k, v [b h s d] (seq 8; with a window of 3 keys
 * and the scores soft-capped when window > 0), and
 * a classifier whose softmax reads an einsum with a weight (not attention). */
static void load(sb_model *m, int window)
{
    char text[2048];
    snprintf(text, sizeof text,
             "model \"att\"\n"
             "param b = 2\nparam h = 4\nparam s = 8\nparam d = 16\n"
             "input q[b=b, h=h, seq=s, d=d]\n"
             "input k[b=b, h=h, mem=s, d=d]\n"
             "input v[b=b, h=h, mem=s, d=d]\n"
             "logits = einsum(\"b h seq d, b h mem d -> b h seq mem\", q, k)\n"
             "%s"
             "w = softmax(%s, axis=mem, causal=seq%s)\n"
             "o = einsum(\"b h seq mem, b h mem d -> b h seq d\", w, v)\n"
             "weight wc[d=d, c=8]\n"
             "z = einsum(\"b h seq d, d c -> b h seq c\", o, wc)\n"
             "p = softmax(z, axis=c)\n",
             window > 0 ? "c = softcap(logits, cap=5)\n" : "", window > 0 ? "c" : "logits",
             window > 0 ? ", window=3" : "");
    sb_error err = {0};
    if (sb_model_parse(text, strlen(text), "att.model", NULL, 0, m, &err))
        fail_msg("%s", err.msg);
}

static int op_named(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nops; i++)
        if (!strcmp(m->ops[i].name, name))
            return i;
    fail_msg("no op %s", name);
    return -1;
}

/* text parsed into *m as a GPU runs it, with the h100-sxm machine's cost
 * parameters under fp8 (*c8) and bf16 (*c16). */
static void gpu_model_fp8(const char *text, sb_model *m, sb_cost_params *c8, sb_cost_params *c16)
{
    sb_error err = {0};
    sb_machine mc;
    sb_cost_params_default(c8);
    sb_cost_params_default(c16);
    if (sb_model_parse(text, strlen(text), "fp8.model", NULL, 0, m, &err) || sb_model_gpu_run(m, 1, &err) ||
        sb_machine_load("h100-sxm", &mc, &err) || sb_machine_cost_params_at(&mc, SB_PREC_FP8, 0, c8, &err) ||
        sb_machine_cost_params_at(&mc, SB_PREC_BF16, 0, c16, &err))
        fail_msg("%s", err.msg);
}

static void test_marks(void **state)
{
    (void)state;
    sb_model m;
    load(&m, 0);
    sb_error err = {0};
    for (int i = 0; i < m.nops; i++)
        assert_int_equal(m.ops[i].attn, 0); /* as loaded: nothing fused */
    assert_int_equal(sb_model_fuse_attention(&m, &err), 1);
    assert_int_equal(m.ops[op_named(&m, "logits")].attn, SB_ATTN_SCORES);
    assert_int_equal(m.ops[op_named(&m, "w")].attn, SB_ATTN_SOFTMAX);
    assert_int_equal(m.ops[op_named(&m, "o")].attn, SB_ATTN_VALUES);
    assert_int_equal(m.ops[op_named(&m, "o")].attn_slot, 0);
    assert_int_equal(m.ops[op_named(&m, "p")].attn, 0); /* a dense's softmax */
    /* causal, 8 x 8: 36 of 64 pairs */
    assert_true(fabs(m.ops[op_named(&m, "w")].attn_frac - 36.0 / 64.0) < 1e-15);
    assert_int_equal(sb_model_fuse_attention(&m, &err), 0); /* marked once */
    sb_model_free(&m);
    load(&m, 3); /* window 3: 1 + 2 + 3 x 6 = 21 of 64; the scores soft-capped (Gemma 2) */
    if (sb_model_fuse_attention(&m, &err) != 1)
        fail_msg("the soft-capped attention is not fused");
    assert_int_equal(m.ops[op_named(&m, "c")].attn, SB_ATTN_SOFTMAX);
    assert_true(fabs(m.ops[op_named(&m, "logits")].attn_frac - 21.0 / 64.0) < 1e-15);
    sb_model_free(&m);
    load(&m, 3);
    m.ops[op_named(&m, "c")].kind = SB_OP_ACT; /* another op there: not an attention */
    assert_int_equal(sb_model_fuse_attention(&m, &err), 0);
    sb_model_free(&m);
    load(&m, 3);
    assert_int_equal(sb_model_fuse_attention(&m, &err), 1);
    assert_true(fabs(m.ops[op_named(&m, "logits")].attn_frac - 21.0 / 64.0) < 1e-15);
    sb_model_free(&m);
}

/* MLA (DeepSeek-V2/V3): the scores the sum of a no-rotary and a rotary
 * einsum, the rotary key shared by the heads; fused as one attention, the
 * sum costing nothing on a GPU and keeping no S x S tensor. */
static void test_mla(void **state)
{
    (void)state;
    const char *text =
        "model \"mla\"\nparam b = 2\nparam h = 4\nparam s = 8\nparam d = 16\nparam r = 8\n"
        "input qn[b=b, h=h, seq=s, d=d]\ninput kn[b=b, h=h, mem=s, d=d]\n"
        "input qr[b=b, h=h, seq=s, r=r]\ninput kr[b=b, mem=s, r=r]\n"
        "input v[b=b, h=h, mem=s, d=d]\n"
        "l1 = einsum(\"b h seq d, b h mem d -> b h seq mem\", qn, kn)\n"
        "l2 = einsum(\"b h seq r, b mem r -> b h seq mem\", qr, kr)\n"
        "logits = add(l1, l2)\n"
        "w = softmax(logits, axis=mem, causal=seq)\n"
        "o = einsum(\"b h seq mem, b h mem d -> b h seq d\", w, v)\n";
    sb_model m;
    sb_error err = {0};
    if (sb_model_parse(text, strlen(text), "mla.model", NULL, 0, &m, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sb_model_fuse_attention(&m, &err), 1);
    assert_int_equal(sb_model_fused_attentions(&m), 1);
    assert_int_equal(m.ops[op_named(&m, "l1")].attn, SB_ATTN_SCORES);
    assert_int_equal(m.ops[op_named(&m, "l2")].attn, SB_ATTN_SCORES);
    assert_int_equal(m.ops[op_named(&m, "logits")].attn, SB_ATTN_SOFTMAX);
    sb_mem x;
    int one[SB_MAX_DIMS];
    for (int i = 0; i < SB_MAX_DIMS; i++)
        one[i] = 1;
    sb_op_memory(&m, &m.ops[op_named(&m, "logits")], one, SB_OPTIM_ADAM, &x);
    assert_true(x.activations == 0.0 && x.scratch == 0.0);
    /* the kernel contracts the whole head dim (d, r) in a tile: no config of
     * the scores splits it (no S x S partial sums); the values einsum may
     * still split its keys (mem) */
    const char *ops[3] = {"l1", "l2", "o"}, *dims[3] = {"d", "r", "mem"};
    for (int t = 0; t < 3; t++) {
        const sb_op *op = &m.ops[op_named(&m, ops[t])];
        int q = 0;
        while (q < op->ndims && strcmp(op->dims[q].name, dims[t]))
            q++;
        assert_true(q < op->ndims);
        sb_configs cf;
        if (sb_enumerate_configs(op, 4, 1, &cf, &err))
            fail_msg("%s", err.msg);
        int split = 0;
        for (int k = 0; k < cf.n; k++)
            split |= cf.c[(size_t)k * (size_t)cf.ndims + (size_t)q] > 1;
        assert_int_equal(split, t == 2);
        free(cf.c);
        free(cf.cost);
    }
    sb_model_free(&m);
}

/* The attention's ops priced on an h100-sxm at p = 1: fused, the scores
 * and values einsums cost the 4 + 3 passes over the kept pairs and the
 * softmax nothing; materialized, more; no S x S tensor in memory. */
static void test_pricing(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_machine mc;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    if (sb_machine_load("h100-sxm", &mc, &err) || sb_machine_cost_params_at(&mc, -1, 0, &cp, &err))
        fail_msg("%s", err.msg);
    assert_true(cp.gpu_sms > 0);
    sb_model a, f;
    load(&a, 0);
    load(&f, 0);
    if (sb_model_gpu_run(&f, 1, &err))
        fail_msg("%s", err.msg);
    int one[SB_MAX_DIMS];
    for (int i = 0; i < SB_MAX_DIMS; i++)
        one[i] = 1;
    int L = op_named(&a, "logits"), W = op_named(&a, "w"), O = op_named(&a, "o");
    double mat = sb_op_cost(&a, &a.ops[L], one, &cp) + sb_op_cost(&a, &a.ops[W], one, &cp) +
                 sb_op_cost(&a, &a.ops[O], one, &cp);
    double fs = sb_op_cost(&f, &f.ops[L], one, &cp), fw = sb_op_cost(&f, &f.ops[W], one, &cp),
           fo = sb_op_cost(&f, &f.ops[O], one, &cp);
    assert_true(fw == 0.0); /* inside the kernel, nothing split */
    assert_true(fs + fw + fo < mat);
    /* passes of (8 x 8·36/64)(16): the scores' one forward and 3 backward, the
     * values' one and 2, at the machine's measured kernel rates (h100-sxm gives
     * them), the GPU op model's seconds at F; the math alone bounds these tiny
     * products here (no HBM term, no launch overhead) */
    assert_true(cp.gpu_attn_fwd.n > 0 && cp.gpu_attn_bwd.n > 0);
    cp.gpu_hbm_gbs *= 1e6, cp.gpu_kernel_us = 0;
    fs = sb_op_cost(&f, &f.ops[L], one, &cp), fo = sb_op_cost(&f, &f.ops[O], one, &cp);
    sb_gpu g = {.peak_tflops = cp.gpu_peak_tflops, .gemm_eff = cp.gpu_gemm_eff,
                .hbm_gbs = cp.gpu_hbm_gbs, .hbm_eff = cp.gpu_hbm_eff, .sms = cp.gpu_sms,
                .tile_m = 128, .tile_n = 256, .kernel_us = cp.gpu_kernel_us,
                .attn_fwd = cp.gpu_attn_fwd, .attn_bwd = cp.gpu_attn_bwd};
    double pf = sb_gpu_attn_s(&g, 8, 8, 8 * 36.0 / 64.0, 16, cp.word_bytes, 0);
    double pb = sb_gpu_attn_s(&g, 8, 8, 8 * 36.0 / 64.0, 16, cp.word_bytes, 1);
    assert_true(pb != pf); /* the backward kernel's own rate */
    assert_true(fabs(fs - (pf + 3.0 * pb) * cp.tflops * 1e12) <= 1e-9 * fs);
    assert_true(fabs(fo - (pf + 2.0 * pb) * cp.tflops * 1e12) <= 1e-9 * fo);
    /* without them (a machine file that gives none): 4 and 3 passes as GEMMs */
    cp.gpu_attn_fwd.n = cp.gpu_attn_bwd.n = 0;
    g.attn_fwd.n = g.attn_bwd.n = 0;
    double pass = sb_gpu_attn_s(&g, 8, 8, 8 * 36.0 / 64.0, 16, cp.word_bytes, 0);
    double fs0 = sb_op_cost(&f, &f.ops[L], one, &cp), fo0 = sb_op_cost(&f, &f.ops[O], one, &cp);
    assert_true(fabs(fs0 - 4.0 * pass * cp.tflops * 1e12) <= 1e-9 * fs0);
    assert_true(fabs(fo0 - 3.0 * pass * cp.tflops * 1e12) <= 1e-9 * fo0);
    /* memory: the softmax keeps a row's statistic, not its 2 x 4 x 8 x 8 output */
    sb_mem ma, mf;
    sb_op_memory(&a, &a.ops[W], one, SB_OPTIM_ADAM, &ma);
    sb_op_memory(&f, &f.ops[W], one, SB_OPTIM_ADAM, &mf);
    assert_true(ma.activations >= 4.0 * 2 * 4 * 8 * 8);
    assert_true(fabs(mf.activations - 4.0 * 2 * 4 * 8) < 1e-9); /* fp32 words of 64 rows */
    assert_true(mf.act_grads == 0.0 && mf.scratch == 0.0);
    /* the scores einsum keeps no output; the values einsum no weights w */
    sb_op_memory(&f, &f.ops[L], one, SB_OPTIM_ADAM, &mf);
    /* q and k are model inputs, counted at their readers: 2 x 2 x 4 x 8 x 16 words */
    assert_true(fabs(mf.activations - 4.0 * 2 * 2 * 4 * 8 * 16) < 1e-9);
    sb_op_memory(&a, &a.ops[L], one, SB_OPTIM_ADAM, &ma); /* materialized: and its output */
    assert_true(fabs(ma.activations - 4.0 * (2 * 2 * 4 * 8 * 16 + 2 * 4 * 8 * 8)) < 1e-9);
    sb_model_free(&a);
    sb_model_free(&f);
}

/* The output layer under fp8 (sb_model_gpu_run marks the einsum a softmax_xent
 * reads feeds_loss, through a softcap too): Megatron-LM runs it as its own
 * linear, in bf16, so it
 * costs under the fp8 recipe what it costs under bf16 (in seconds: F differs);
 * a hidden linear runs in fp8, faster. */
static void test_output_layer_fp8(void **state)
{
    (void)state;
    const char *text = "model \"head\"\n"
                       "input x[t=4096, e=4096]\n"
                       "weight w1[e=4096, f=4096]\n"
                       "h = einsum(\"t e, e f -> t f\", x, w1)\n"
                       "weight wo[f=4096, v=32768]\n"
                       "logits = einsum(\"t f, f v -> t v\", h, wo)\n"
                       "loss = softmax_xent(logits)\n";
    sb_error err = {0};
    sb_model m;
    sb_cost_params c8, c16;
    gpu_model_fp8(text, &m, &c8, &c16);
    int H = op_named(&m, "h"), L = op_named(&m, "logits");
    assert_true(m.ops[L].feeds_loss && !m.ops[H].feeds_loss);
    int one[SB_MAX_DIMS];
    for (int i = 0; i < SB_MAX_DIMS; i++)
        one[i] = 1;
    double l8 = sb_op_cost(&m, &m.ops[L], one, &c8) / c8.tflops,
           l16 = sb_op_cost(&m, &m.ops[L], one, &c16) / c16.tflops;
    double h8 = sb_op_cost(&m, &m.ops[H], one, &c8) / c8.tflops,
           h16 = sb_op_cost(&m, &m.ops[H], one, &c16) / c16.tflops;
    assert_true(fabs(l8 - l16) <= 1e-9 * l16);
    assert_true(h8 < 0.8 * h16);
    sb_model_free(&m);
    /* a softcap between the output layer and the loss (Gemma 2): the einsum marked */
    const char *capped = "model \"capped\"\n"
                         "input x[t=64, e=32]\n"
                         "weight w1[e=32, f=32]\n"
                         "h = einsum(\"t e, e f -> t f\", x, w1)\n"
                         "weight wo[f=32, v=128]\n"
                         "logits = einsum(\"t f, f v -> t v\", h, wo)\n"
                         "c = softcap(logits, cap=30)\n"
                         "loss = softmax_xent(c)\n";
    if (sb_model_parse(capped, strlen(capped), "capped.model", NULL, 0, &m, &err) ||
        sb_model_gpu_run(&m, 1, &err))
        fail_msg("%s", err.msg);
    assert_true(m.ops[op_named(&m, "logits")].feeds_loss && !m.ops[op_named(&m, "h")].feeds_loss &&
                !m.ops[op_named(&m, "c")].feeds_loss);
    sb_model_free(&m);
}

/* fp8's conversion of a linear's input (sb_model_gpu_run marks fp8_in and
 * fp8_out): the linears reading one tensor are one Transformer Engine module
 * whose first casts it (2 bytes read, 1 + 1 written an element), the others
 * nothing; a norm read only by linears writes their fp8 copy (one byte in
 * place of two), the first of them transposes it (1 + 1). A linear of a
 * tensor another op reads too casts it itself. By hand on the h100-sxm
 * machine: the differences of equal GEMMs are the conversions' bytes and
 * kernels, nothing under bf16. */
static void test_fp8_inputs(void **state)
{
    (void)state;
    const char *text = "model \"fp8in\"\n"
                       "input x[t=4096, e=4096]\n"
                       "n = rmsnorm(x, axis=e)\n"
                       "weight wa[e=4096, f=4096]\n"
                       "a = einsum(\"t e, e f -> t f\", n, wa)\n"
                       "weight wb[e=4096, f=4096]\n"
                       "b = einsum(\"t e, e f -> t f\", n, wb)\n"
                       "m = rmsnorm(x, axis=e)\n"
                       "weight wc[e=4096, f=4096]\n"
                       "c = einsum(\"t e, e f -> t f\", m, wc)\n"
                       "r = add(m, x)\n"
                       "s = add(a, b)\n"
                       "u = add(s, c)\n"
                       "v = add(u, r)\n";
    sb_model md;
    sb_cost_params c8, c16;
    gpu_model_fp8(text, &md, &c8, &c16);
    int A = op_named(&md, "a"), B = op_named(&md, "b"), C = op_named(&md, "c");
    int N = op_named(&md, "n"), M = op_named(&md, "m");
    assert_int_equal(md.ops[A].fp8_in, SB_FP8_IN_NORM);
    assert_int_equal(md.ops[B].fp8_in, SB_FP8_IN_SHARED);
    assert_int_equal(md.ops[C].fp8_in, SB_FP8_IN_CAST); /* m is read by an add too */
    assert_true(md.ops[N].fp8_out && !md.ops[M].fp8_out);
    int one[SB_MAX_DIMS];
    for (int i = 0; i < SB_MAX_DIMS; i++)
        one[i] = 1;
    const double elems = 4096.0 * 4096.0, bw = c8.gpu_hbm_gbs * 1e9 * c8.gpu_hbm_eff;
    const double us = c8.gpu_kernel_us * 1e-6;
    double a8 = sb_op_cost(&md, &md.ops[A], one, &c8) / (c8.tflops * 1e12),
           b8 = sb_op_cost(&md, &md.ops[B], one, &c8) / (c8.tflops * 1e12),
           k8 = sb_op_cost(&md, &md.ops[C], one, &c8) / (c8.tflops * 1e12);
    assert_true(fabs((k8 - b8) - (4.0 * elems / bw + 2.0 * us)) < 1e-9 * k8); /* its kernels the first's */
    assert_true(fabs((k8 - a8) - 2.0 * elems / bw) < 1e-9 * k8);
    double n8 = sb_op_cost(&md, &md.ops[N], one, &c8) / (c8.tflops * 1e12),
           m8 = sb_op_cost(&md, &md.ops[M], one, &c8) / (c8.tflops * 1e12);
    assert_true(fabs((m8 - n8) - elems / bw) < 1e-9 * m8); /* 2 bytes written, 1 */
    double a16 = sb_op_cost(&md, &md.ops[A], one, &c16), b16 = sb_op_cost(&md, &md.ops[B], one, &c16),
           k16 = sb_op_cost(&md, &md.ops[C], one, &c16), n16 = sb_op_cost(&md, &md.ops[N], one, &c16),
           m16 = sb_op_cost(&md, &md.ops[M], one, &c16);
    assert_true(a16 == b16 && b16 == k16 && n16 == m16);
    /* memory: the fused norm keeps its output as its fp8 copy, 1 byte an element */
    sb_mem mn, mm;
    for (int prec = SB_PREC_BF16; prec <= SB_PREC_FP8; prec += SB_PREC_FP8 - SB_PREC_BF16) {
        sb_op_memory_prec(&md, &md.ops[N], one, SB_OPTIM_ADAM, 0, 0, prec, &mn);
        sb_op_memory_prec(&md, &md.ops[M], one, SB_OPTIM_ADAM, 0, 0, prec, &mm);
        assert_true(fabs((mm.activations - mn.activations) - (prec == SB_PREC_FP8 ? elems : 0.0)) < 1e-6);
        /* recomputed: kept the same way (the norm writes only the fp8 copy either way) */
        sb_op_memory_prec(&md, &md.ops[N], one, SB_OPTIM_ADAM, 0, 1, prec, &mn);
        sb_op_memory_prec(&md, &md.ops[M], one, SB_OPTIM_ADAM, 0, 1, prec, &mm);
        assert_true(fabs((mm.activations - mn.activations) - (prec == SB_PREC_FP8 ? elems : 0.0)) < 1e-6);
    }
    sb_model_free(&md);
}

/* Which linears the fp8 marks join (sb_model_gpu_run), and a pipeline cut
 * through a module (sb_pipe_stage_model): a run of linears adjacent in op
 * order is one module, the same tensor read again further on (another
 * layer's cross-attention) another; the last norm before the output layer
 * (bf16) is not fused, nor a batch norm, nor one before a conv; a router is
 * a plain linear, bf16 under fp8; a stage that starts inside a module
 * casts its input again, one that ends inside a fused norm's module
 * writes the norm's 16-bit output and its linear casts. */
/* test_fp8_modules' model: a norm n read by the linears a and b, a third
 * linear c of `c_in` further on, and (head) a last norm and an output layer,
 * marked as a GPU framework runs it. */
static void mods_model(sb_model *m, const char *c_in, int head)
{
    char text[1024];
    snprintf(text, sizeof text,
             "model \"mods\"\n"
             "input x[t=64, e=32]\n"
             "weight w1[e=32, f=32]\nweight w2[e=32, f=32]\nweight w3[e=32, f=32]\n"
             "n = rmsnorm(x, axis=e)\n"
             "a = einsum(\"t e, e f -> t f\", n, w1)\n"
             "b = einsum(\"t e, e f -> t f\", n, w2)\n"
             "s = add(a, b)\n"
             "c = einsum(\"t e, e f -> t f\", %s, w3)\n"
             "u = add(s, c)\n%s",
             c_in, head ? "y = rmsnorm(u, axis=f)\n"
                          "weight wo[f=32, v=128]\n"
                          "logits = einsum(\"t f, f v -> t v\", y, wo)\n"
                          "loss = softmax_xent(logits)\n" : "");
    sb_error err = {0};
    if (sb_model_parse(text, strlen(text), "mods.model", NULL, 0, m, &err) || sb_model_gpu_run(m, 1, &err))
        fail_msg("%s", err.msg);
}

/* Stage [i, j) of m as the pipeline search cuts it (its ops and tensors
 * freed with free_stage). */
static void stage(const sb_model *m, int i, int j, sb_model *st)
{
    sb_error err = {0};
    if (sb_pipe_stage_model(m, i, j, st, &err))
        fail_msg("%s", err.msg);
}

static void free_stage(sb_model *st)
{
    free(st->ops), free(st->tensors);
}

static void test_fp8_modules(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_model m;
    mods_model(&m, "x", 1);
    int N = op_named(&m, "n"), A = op_named(&m, "a"), B = op_named(&m, "b"), C = op_named(&m, "c");
    int Y = op_named(&m, "y"), L = op_named(&m, "logits");
    assert_true(m.ops[N].fp8_out && m.ops[A].fp8_in == SB_FP8_IN_NORM && m.ops[B].fp8_in == SB_FP8_IN_SHARED);
    assert_int_equal(m.ops[N].fp8_span, B - N);
    /* x is read by the norm and, further on, by c: c casts it itself */
    assert_int_equal(m.ops[C].fp8_in, SB_FP8_IN_CAST);
    assert_true(!m.ops[Y].fp8_out && !sb_op_fp8_linear(&m, &m.ops[L]) && sb_op_fp8_linear(&m, &m.ops[C]));
    /* a stage starting at b: b casts; a stage ending at a: n unfused, a casts */
    sb_model st;
    stage(&m, B, m.nops, &st);
    assert_int_equal(st.ops[0].fp8_in, SB_FP8_IN_CAST);
    free_stage(&st);
    stage(&m, 0, A + 1, &st);
    assert_true(!st.ops[N].fp8_out && st.ops[A].fp8_in == SB_FP8_IN_CAST);
    free_stage(&st);
    stage(&m, 0, B + 1, &st); /* the module whole: kept */
    assert_true(st.ops[N].fp8_out && st.ops[A].fp8_in == SB_FP8_IN_NORM && st.ops[B].fp8_in == SB_FP8_IN_SHARED);
    free_stage(&st);
    stage(&m, A, m.nops, &st); /* the norm an earlier stage's: a casts */
    assert_true(st.ops[0].fp8_in == SB_FP8_IN_CAST && st.ops[1].fp8_in == SB_FP8_IN_SHARED);
    free_stage(&st);
    assert_true(pipe_cut_divides(&m, 0, A + 1) && pipe_cut_divides(&m, A, m.nops) &&
                !pipe_cut_divides(&m, 0, B + 1) && !pipe_cut_divides(&m, 0, m.nops));
    /* the pipeline search's equal ops: a and b (equal shapes) apart by their marks */
    sb_op x = m.ops[A];
    assert_true(pipe_ops_same(&m, &m.ops[A], &x) && !pipe_ops_same(&m, &m.ops[A], &m.ops[B]));
    x.fp8_span++;
    assert_false(pipe_ops_same(&m, &m.ops[A], &x));
    x = m.ops[A], x.routes = 1;
    assert_false(pipe_ops_same(&m, &m.ops[A], &x));
    x = m.ops[N], x.fp8_out = 0;
    assert_false(pipe_ops_same(&m, &m.ops[N], &x));
    sb_model_free(&m);
    /* a norm read by two runs of linears apart: no fusion, each run casts */
    mods_model(&m, "n", 0);
    assert_true(!m.ops[op_named(&m, "n")].fp8_out && m.ops[op_named(&m, "a")].fp8_in == SB_FP8_IN_CAST &&
                m.ops[op_named(&m, "b")].fp8_in == SB_FP8_IN_SHARED &&
                m.ops[op_named(&m, "c")].fp8_in == SB_FP8_IN_CAST);
    sb_model_free(&m);
    /* one tensor read by two layers' linears apart in op order: two modules */
    const char *xa = "model \"xa\"\n"
                     "input x[t=64, e=32]\ninput mem[t=64, e=32]\n"
                     "weight k1[e=32, f=32]\nweight v1[e=32, f=32]\nweight k2[e=32, f=32]\n"
                     "p = einsum(\"t e, e f -> t f\", mem, k1)\n"
                     "q = einsum(\"t e, e f -> t f\", mem, v1)\n"
                     "r = add(p, q)\n"
                     "s = einsum(\"t e, e f -> t f\", mem, k2)\n"
                     "z = add(r, s)\n";
    if (sb_model_parse(xa, strlen(xa), "xa.model", NULL, 0, &m, &err) || sb_model_gpu_run(&m, 1, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(m.ops[op_named(&m, "q")].fp8_in, SB_FP8_IN_SHARED);
    assert_int_equal(m.ops[op_named(&m, "s")].fp8_in, SB_FP8_IN_CAST);
    sb_model_free(&m);
    /* a conv after a batch norm: neither marked, the conv no fp8 linear */
    const char *cnn = "model \"cnn\"\n"
                      "input x[batch=4, c=8, h=16, w=16]\n"
                      "c1 = conv(x, out=8, kernel=3, pad=1)\n"
                      "n = batchnorm(c1)\n"
                      "y = conv(n, out=8, kernel=3, pad=1)\n";
    if (sb_model_parse(cnn, strlen(cnn), "cnn.model", NULL, 0, &m, &err) || sb_model_gpu_run(&m, 1, &err))
        fail_msg("%s", err.msg);
    int Q = op_named(&m, "y");
    assert_true(!m.ops[op_named(&m, "n")].fp8_out && m.ops[Q].fp8_in == SB_FP8_IN_CAST &&
                !sb_op_fp8_linear(&m, &m.ops[Q]));
    sb_model_free(&m);
    /* a router: marked, priced in bf16 under fp8 (the same seconds); an expert in fp8 */
    const char *moe = "model \"moe\"\n"
                      "input x[batch=8, seq=512, embed=1024]\n"
                      "weight wr[embed=1024, expert=8]\n"
                      "r = einsum(\"batch seq embed, embed expert -> batch seq expert\", x, wr)\n"
                      "combine, dispatch = moe_gate(r, axis=expert, k=2, capacity=1024)\n"
                      "xe = einsum(\"batch seq expert cap, batch seq embed -> expert batch cap embed\", "
                      "dispatch, x)\n"
                      "weight we[expert=8, embed=1024, eff=1024]\n"
                      "g = einsum(\"expert batch cap embed, expert embed eff -> expert batch cap eff\", xe, we)\n";
    sb_cost_params c8, c16;
    gpu_model_fp8(moe, &m, &c8, &c16);
    int R = op_named(&m, "r"), G = op_named(&m, "g");
    assert_true(m.ops[R].routes && !sb_op_fp8_linear(&m, &m.ops[R]) && sb_op_fp8_linear(&m, &m.ops[G]));
    int one[SB_MAX_DIMS];
    for (int i = 0; i < SB_MAX_DIMS; i++)
        one[i] = 1;
    double r8 = sb_op_cost(&m, &m.ops[R], one, &c8) / c8.tflops, r16 = sb_op_cost(&m, &m.ops[R], one, &c16) / c16.tflops;
    assert_true(fabs(r8 - r16) <= 1e-9 * r16);
    sb_model_free(&m);
}

/* A mixture of experts on a GPU (sb_model_gpu_run): the router keeps a
 * (token, expert) map of probabilities and one of choices, not GShard's
 * one-hot over the capacity slots; the dispatch and combine einsums read
 * that map. By hand at p = 1: b 2, seq 8, 4 experts, 6 slots, hidden 16;
 * fp32 words. The CPU runtime's model (not gpu_run) keeps the one-hot. */
static void test_moe_routing(void **state)
{
    (void)state;
    const char *text =
        "model \"moe\"\nparam b = 2\nparam s = 8\nparam e = 4\nparam c = 6\nparam h = 16\n"
        "input x[batch=b, seq=s, embed=h]\n"
        "weight wr[embed=h, expert=e]\n"
        "r = einsum(\"batch seq embed, embed expert -> batch seq expert\", x, wr)\n"
        "combine, dispatch = moe_gate(r, axis=expert, k=2, capacity=c)\n"
        "xe = einsum(\"batch seq expert cap, batch seq embed -> expert batch cap embed\", "
        "dispatch, x)\n"
        "weight we[expert=e, embed=h, eff=h]\n"
        "g = einsum(\"expert batch cap embed, expert embed eff -> expert batch cap eff\", xe, we)\n"
        "y = einsum(\"batch seq expert cap, expert batch cap eff -> batch seq eff\", combine, g)\n";
    sb_model a, f;
    sb_error err = {0};
    if (sb_model_parse(text, strlen(text), "moe.model", NULL, 0, &a, &err) ||
        sb_model_parse(text, strlen(text), "moe.model", NULL, 0, &f, &err) ||
        sb_model_gpu_run(&f, 1, &err))
        fail_msg("%s", err.msg);
    int one[SB_MAX_DIMS];
    for (int i = 0; i < SB_MAX_DIMS; i++)
        one[i] = 1;
    const double l = 2 * 8 * 4, hot = l * 6, tok = 2 * 8 * 16, slots = 4 * 2 * 6 * 16;
    sb_mem ma, mf;
    int G = op_named(&f, "combine"), X = op_named(&f, "xe"), Y = op_named(&f, "y");
    sb_op_memory(&a, &a.ops[G], one, SB_OPTIM_ADAM, &ma);
    sb_op_memory(&f, &f.ops[G], one, SB_OPTIM_ADAM, &mf);
    assert_true(fabs(ma.activations - 4.0 * (l + 2 * hot)) < 1e-9); /* the one-hots */
    assert_true(fabs(mf.activations - 4.0 * 2 * l) < 1e-9);         /* two (token, expert) maps */
    /* scratch: the outputs' gradient sums, the routing (3·s·k + 2·e + 1 per
     * group), and on a GPU the gradients around its backward (in + outs) */
    double route = 2 * (3.0 * 8 * 2 + 2.0 * 4 + 1);
    assert_true(fabs(mf.scratch - 4.0 * (2 * l + route + l + 2 * l)) < 1e-9);
    /* the dispatch einsum: x (a model input) and the map in, the slots out;
     * scratch in + W + 2 outs, and the gradients in + outs */
    sb_op_memory(&f, &f.ops[X], one, SB_OPTIM_ADAM, &mf);
    assert_true(fabs(mf.activations - 4.0 * (slots + tok)) < 1e-9);
    assert_true(fabs(mf.scratch - 4.0 * ((tok + l + 2 * slots) + (tok + l + slots))) < 1e-9);
    sb_op_memory(&a, &a.ops[X], one, SB_OPTIM_ADAM, &ma); /* CPU: the one-hot copied */
    assert_true(fabs(ma.scratch - 4.0 * (tok + hot + 2 * slots)) < 1e-9);
    /* the combine einsum reads the map and the experts' slots */
    sb_op_memory(&f, &f.ops[Y], one, SB_OPTIM_ADAM, &mf);
    assert_true(fabs(mf.scratch - 4.0 * ((l + slots + 2 * tok) + (l + slots + tok))) < 1e-9);
    /* the router's cost on a GPU: its passes over the logits and the maps
     * written (2) and read back (1), (8 + 2k + 3) l element passes */
    sb_cost_params cp;
    sb_machine mc;
    sb_cost_params_default(&cp);
    if (sb_machine_load("h100-sxm", &mc, &err) || sb_machine_cost_params_at(&mc, -1, 0, &cp, &err))
        fail_msg("%s", err.msg);
    assert_true(fabs(sb_op_cost(&f, &f.ops[G], one, &cp) - (8 + 4 + 3) * l * cp.elem_ratio)
                <= 1e-12 * (8 + 4 + 3) * l * cp.elem_ratio);
    sb_model_free(&a);
    sb_model_free(&f);
}

/* DeepSeek-V3's MLA as imported from its config.json (docs/cost-training.md):
 * the q and kv-latent down-projections lie apart in op order, so each casts
 * its own input and the layer's input norm is fused into neither (Megatron-
 * Core's MLASelfAttention); the q and kv-latent norms are each fused into
 * the up-projection they alone feed. */
static void test_fp8_mla_import(void **state)
{
    (void)state;
    sb_model m;
    sb_error err = {0};
    sb_hf_info info;
    sb_setting set;
    if (sb_setting_parse("num_hidden_layers=4", &set, &err)
        || sb_hf_load(SB_SOURCE_DIR "/tests/data/hf/deepseek-v3/config.json", &set, 1, &m, &info,
                      &err)
        || sb_model_gpu_run(&m, 1, &err))
        fail_msg("%s", err.msg);
    const char *cast[] = {"x/a0/qa", "x/a0/kva"}, *fused[] = {"x/a0/qn", "x/a0/ckn"},
               *fed[] = {"x/a0/q", "x/a0/kv"};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(m.ops[op_named(&m, cast[k])].fp8_in, SB_FP8_IN_CAST);
        assert_int_equal(m.ops[op_named(&m, fused[k])].fp8_out, 1);
        assert_int_equal(m.ops[op_named(&m, fed[k])].fp8_in, SB_FP8_IN_NORM);
    }
    assert_int_equal(m.ops[op_named(&m, "x/n1")].fp8_out, 0);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marks),
        cmocka_unit_test(test_pricing),
        cmocka_unit_test(test_mla),
        cmocka_unit_test(test_moe_routing),
        cmocka_unit_test(test_output_layer_fp8),
        cmocka_unit_test(test_fp8_inputs),
        cmocka_unit_test(test_fp8_modules),
        cmocka_unit_test(test_fp8_mla_import),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
