/* onnx/gemm.c: Gemm, MatMul and Einsum: `dense` when the second operand is a
 * rank-2 weight, else `einsum` (batched, broadcast, weight operands declared). */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* Whether value name is one of the graph's outputs. */
static int graph_output(ctx *C, const char *name)
{
    for (size_t i = 0; name && i < C->g->n_output; i++)
        if (C->g->output[i] && C->g->output[i]->name && !strcmp(C->g->output[i]->name, name))
            return 1;
    return 0;
}

static void dense_dim(ctx *C, int64_t units, const mtensor *X, int logits, char *out)
{
    if (C->vocab && units == C->vocab)
        ox_recog_name(C, "vocab", units, out);
    else if (logits)
        ox_recog_name(C, "classes", units, out); /* a classifier's output */
    else if (C->embed && units == C->embed)
        ox_recog_name(C, "embed", units, out);
    else if (C->embed && units == 3 * C->embed)
        ox_recog_name(C, "qkv", units, out); /* packed q, k, v projections */
    else if (C->embed && units < C->embed && C->embed % units == 0)
        ox_recog_name(C, "kv_embed", units, out); /* grouped-query k, v projections */
    else if (C->embed && units > C->embed && X->nd >= 2 && !strcmp(X->dn[X->nd - 1], "embed"))
        ox_recog_name(C, "ff", units, out); /* an MLP's hidden width */
    else
        ox_gen_name(C, units, out);
    for (int k = 2;; k++) {
        int clash = 0;
        for (int i = 0; i < X->nd - 1; i++)
            clash |= strcmp(X->dn[i], out) == 0;
        if (!clash)
            return;
        char base[82];
        snprintf(base, sizeof base, "%.80s", out);
        snprintf(out, SB_NAME_MAX, "%s_%d", base, k);
    }
}

static int emit_dense(ctx *C, const Onnx__NodeProto *n, val *x, sym units, val *y)
{
    if (x->nd < 2 || x->nd > SB_MAX_DIMS - 1)
        return ox_unsupported(C, n, "matrix product of a rank-%d input with a weight (dense needs rank 2 to 7)", x->nd);
    int in = ox_materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    char dn[SB_MAX_DIMS][SB_NAME_MAX];
    sym sz[SB_MAX_DIMS];
    for (int i = 0; i < X->nd; i++) {
        snprintf(dn[i], SB_NAME_MAX, "%s", X->dn[i]);
        sz[i] = X->sz[i];
    }
    /* logits: the graph's output, or read only by the bias Add that is */
    int k = ox_only_consumer(C, y->name), logits = graph_output(C, y->name);
    if (!logits && k >= 0 && op_is(C->g->node[k], "Add") && out0(C->g->node[k]))
        logits = graph_output(C, out0(C->g->node[k]));
    dense_dim(C, ox_sym_val(C, units), X, logits, dn[X->nd - 1]);
    sz[X->nd - 1] = units;
    char us[64];
    ox_sym_str(C, units, us, sizeof us);
    int r = X->nd;
    int t = ox_new_tensor(C, node_label(n), "dense", r, dn, sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "dense", 1, "%s, units=%s, dim=%s", C->t[in].name, us,
                          C->t[t].dn[r - 1]) < 0)
        return -1;
    ox_bind_act(C, y, t);
    return 0;
}

/* Distinct names for distinct labels: a name met again gets _2, _3, ...
 * until no other label of `have` holds it. */
static void distinct_names(char lname_[][SB_NAME_MAX], const int *have, int maxl)
{
    for (int L = 0; L < maxl; L++)
        for (int M = 0; M < L; M++)
            if (have[L] && have[M] && strcmp(lname_[L], lname_[M]) == 0) {
                char base[82];
                snprintf(base, sizeof base, "%.80s", lname_[L]);
                for (int q = 2;; q++) {
                    snprintf(lname_[L], SB_NAME_MAX, "%s_%d", base, q);
                    int clash = 0;
                    for (int z = 0; z < maxl; z++)
                        clash |= z != L && have[z] && strcmp(lname_[z], lname_[L]) == 0;
                    if (!clash)
                        break;
                }
                M = -1;
            }
}

/* y read only by a Transpose: order[] gets its permutation, so that the
 * output is written in that order and the transpose is a view, no op;
 * order is left as it is otherwise. */
static void transpose_order(ctx *C, const val *y, int nout, int *order)
{
    int tr = y && y->name ? ox_only_consumer(C, y->name) : -1;
    if (tr < 0 || !op_is(C->g->node[tr], "Transpose"))
        return;
    int64_t perm[SB_MAX_DIMS];
    int np = ox_attr_ints(C->g->node[tr], "perm", perm, SB_MAX_DIMS);
    uint32_t seen = 0;
    int ok = np == nout;
    for (int i = 0; ok && i < np; i++) {
        ok = perm[i] >= 0 && perm[i] < nout && !(seen & (1u << perm[i]));
        seen |= ok ? 1u << perm[i] : 0;
    }
    for (int i = 0; ok && i < np; i++)
        order[i] = (int)perm[i];
}

/* An einsum over two operands. lab[k][j]: the label of operand k's logical
 * dim j; olab: the output's labels in logical order. */
static int emit_einsum(ctx *C, const Onnx__NodeProto *n, val *op[2], int nlab[2],
                       const int lab[2][SB_MAX_DIMS], int nout, const int *olab, val *y)
{
    enum { MAXL = 26 };
    char lname_[MAXL][SB_NAME_MAX];
    sym lsz[MAXL];
    int have[MAXL] = {0}, inop[2][MAXL];
    memset(inop, 0, sizeof inop);
    val loc[2];
    for (int k = 0; k < 2; k++) {
        if (op[k]->kind == V_ACT) {
            /* dropped size-1 dims have no label: give the operand its own layout */
            int used = 0;
            for (int j = 0; j < op[k]->nd; j++)
                used += op[k]->src[j] >= 0;
            if (used != C->t[op[k]->t].nd) {
                int m = ox_materialize(C, op[k], node_label(n));
                if (m < 0)
                    return -1;
                loc[k] = *op[k];
                loc[k].t = m;
                for (int j = 0; j < loc[k].nd; j++)
                    loc[k].src[j] = (int8_t)j;
                op[k] = &loc[k];
            }
        }
        for (int j = 0; j < nlab[k]; j++) {
            int L = lab[k][j];
            if (L < 0 || L >= MAXL)
                return ox_unsupported(C, n, "too many distinct dims");
            sym sz = op[k]->shape[j];
            int inserted = op[k]->kind == V_ACT && op[k]->src[j] < 0;
            if (inserted)
                continue;
            if (have[L] && !sym_eq(lsz[L], sz))
                return ox_unsupported(C, n, "dims of sizes %lld and %lld meet (broadcasting a real dim is not supported)",
                                   (long long)ox_sym_val(C, lsz[L]), (long long)ox_sym_val(C, sz));
            if (!have[L]) {
                const char *nm = op[k]->kind == V_ACT ? ox_lname(C, op[k], j) : "";
                if (nm[0])
                    snprintf(lname_[L], SB_NAME_MAX, "%s", nm);
                else
                    ox_gen_name(C, ox_sym_val(C, sz), lname_[L]);
                lsz[L] = sz;
                have[L] = 1;
            }
            inop[k][L] = 1;
        }
    }
    distinct_names(lname_, have, MAXL);
    int onlya = 0, onlyb = 0, inout[MAXL] = {0};
    for (int i = 0; i < nout; i++)
        if (olab[i] >= 0 && olab[i] < MAXL && have[olab[i]]) {
            inout[olab[i]] = 1;
            onlya += inop[0][olab[i]] && !inop[1][olab[i]];
            onlyb += inop[1][olab[i]] && !inop[0][olab[i]];
        }
    for (int L = 0; L < MAXL; L++)
        if (have[L] && inop[0][L] != inop[1][L] && !inout[L])
            return ox_unsupported(C, n, "sums over a dim of one operand only (not an einsum the model format has)");
    if (!onlya || !onlyb)
        return ox_unsupported(C, n, "needs an output dim from each operand alone (the model format's einsum is a matrix product)");
    /* operand equations in their tensors' dim order; weights get declared */
    char eq[3][512];
    int opt[2]; /* operand tensors (indices: C->t moves) */
    for (int k = 0; k < 2; k++) {
        eq[k][0] = '\0';
        if (op[k]->kind == V_ACT) {
            mtensor *T = &C->t[op[k]->t];
            for (int i = 0; i < T->nd; i++)
                for (int j = 0; j < op[k]->nd; j++)
                    if (op[k]->src[j] == i)
                        snprintf(eq[k] + strlen(eq[k]), sizeof eq[k] - strlen(eq[k]), "%s%s", i ? " " : "",
                                 lname_[lab[k][j]]);
            opt[k] = op[k]->t;
        } else {
            if (op[k]->wt < 0) {
                char dn[SB_MAX_DIMS][SB_NAME_MAX], decl[1200] = "";
                for (int j = 0; j < op[k]->nd; j++)
                    snprintf(dn[j], SB_NAME_MAX, "%s", lname_[lab[k][j]]);
                int t = ox_new_tensor(C, op[k]->name, "w", op[k]->nd, dn, op[k]->shape, -1);
                if (t < 0)
                    return -1;
                for (int j = 0; j < op[k]->nd; j++) {
                    char s[64];
                    ox_sym_str(C, op[k]->shape[j], s, sizeof s);
                    snprintf(decl + strlen(decl), sizeof decl - strlen(decl), "%s%s=%s", j ? ", " : "", dn[j], s);
                }
                if (ox_add_line(C, "", "", 0, "weight %s[%s]", C->t[t].name, decl) < 0)
                    return -1;
                op[k]->wt = t;
            }
            for (int j = 0; j < op[k]->nd; j++)
                snprintf(eq[k] + strlen(eq[k]), sizeof eq[k] - strlen(eq[k]), "%s%s", j ? " " : "",
                         lname_[lab[k][j]]);
            opt[k] = op[k]->wt;
        }
    }
    char dn[SB_MAX_DIMS][SB_NAME_MAX];
    sym sz[SB_MAX_DIMS];
    int8_t src[SB_MAX_DIMS];
    int nd = 0, order[SB_MAX_DIMS], all = 1;
    for (int i = 0; i < nout; i++) {
        order[i] = i;
        all &= have[olab[i]];
    }
    if (all)
        transpose_order(C, y, nout, order);
    eq[2][0] = '\0';
    for (int i = 0; i < nout; i++)
        src[i] = -1;
    for (int k = 0; k < nout; k++) {
        int i = order[k], L = olab[i];
        if (!have[L])
            continue;
        snprintf(dn[nd], SB_NAME_MAX, "%s", lname_[L]);
        sz[nd] = lsz[L];
        snprintf(eq[2] + strlen(eq[2]), sizeof eq[2] - strlen(eq[2]), "%s%s", nd ? " " : "", lname_[L]);
        src[i] = (int8_t)nd++;
    }
    int t = ox_new_tensor(C, node_label(n), "einsum", nd, dn, sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "einsum", 1, "\"%s, %s -> %s\", %s, %s", eq[0], eq[1], eq[2],
                          C->t[opt[0]].name, C->t[opt[1]].name) < 0)
        return -1;
    ox_bind_view(C, y, t, nout, src);
    return 0;
}

/* MatMul / Gemm of two operands, as dense (weight of rank 2) or einsum. */
static int op_matmul(ctx *C, const Onnx__NodeProto *n, val *a, val *b, int transA, int transB, val *y)
{
    if (a->kind != V_ACT && b->kind != V_ACT)
        return ox_unsupported(C, n, "product of two constants");
    if (a->nd < 1 || b->nd < 1 || a->nd > SB_MAX_DIMS || b->nd > SB_MAX_DIMS)
        return ox_unsupported(C, n, "operands of rank %d and %d", a->nd, b->nd);
    if (transA)
        return ox_unsupported(C, n, "transA=1");
    if (a->kind == V_ACT && is_static(b) && b->nd == 2) {
        sym k = b->shape[transB ? 1 : 0], units = b->shape[transB ? 0 : 1];
        if (!sym_eq(k, a->shape[a->nd - 1]))
            return ox_unsupported(C, n, "inner dims %lld and %lld differ", (long long)ox_sym_val(C, a->shape[a->nd - 1]),
                               (long long)ox_sym_val(C, k));
        return emit_dense(C, n, a, units, y);
    }
    /* labels: batch dims 0..nb-1, m = nb, k = nb + 1, n = nb + 2 */
    int na = a->nd, nb_ = b->nd;
    int ba = na > 2 ? na - 2 : 0, bb = nb_ > 2 ? nb_ - 2 : 0, nbatch = ba > bb ? ba : bb;
    int lab[2][SB_MAX_DIMS], nlab[2] = {na, nb_}, olab[SB_MAX_DIMS], nout = 0;
    int M = nbatch, K = nbatch + 1, N = nbatch + 2;
    for (int i = 0; i < ba; i++)
        lab[0][i] = nbatch - ba + i;
    for (int i = 0; i < bb; i++)
        lab[1][i] = nbatch - bb + i;
    if (na == 1)
        lab[0][0] = K;
    else {
        lab[0][na - 2] = M;
        lab[0][na - 1] = K;
    }
    if (nb_ == 1)
        lab[1][0] = K;
    else {
        lab[1][nb_ - 2] = transB ? N : K;
        lab[1][nb_ - 1] = transB ? K : N;
    }
    for (int i = 0; i < nbatch; i++)
        olab[nout++] = i;
    if (na > 1)
        olab[nout++] = M;
    if (nb_ > 1)
        olab[nout++] = N;
    val *ops[2] = {a, b};
    return emit_einsum(C, n, ops, nlab, (const int(*)[SB_MAX_DIMS])lab, nout, olab, y);
}

static int op_einsum(ctx *C, const Onnx__NodeProto *n, val *a, val *b, val *y)
{
    const Onnx__AttributeProto *ea = ox_attr(n, "equation");
    if (!ea || !ea->has_s || n->n_input != 2)
        return ox_unsupported(C, n, "needs an equation and exactly two inputs");
    char eqs[256];
    snprintf(eqs, sizeof eqs, "%.*s", (int)(ea->s.len < 255 ? ea->s.len : 255), (const char *)ea->s.data);
    int lab[3][SB_MAX_DIMS], nl[3] = {0, 0, 0}, part = 0, explicit_out = 0, count[26] = {0};
    for (const char *p = eqs; *p; p++) {
        char ch = *p;
        if (ch == ' ')
            continue;
        if (ch == ',') {
            if (part != 0)
                return ox_unsupported(C, n, "equation '%s' is not of two operands", eqs);
            part = 1;
        } else if (ch == '-' && p[1] == '>') {
            if (part != 1)
                return ox_unsupported(C, n, "equation '%s' is not of two operands", eqs);
            part = 2;
            explicit_out = 1;
            p++;
        } else if (ch >= 'a' && ch <= 'z') {
            if (nl[part] == SB_MAX_DIMS)
                return ox_unsupported(C, n, "more than %d dims in equation '%s'", SB_MAX_DIMS, eqs);
            for (int i = 0; i < nl[part]; i++)
                if (lab[part][i] == ch - 'a')
                    return ox_unsupported(C, n, "repeated index in one operand of '%s' (diagonals)", eqs);
            lab[part][nl[part]++] = ch - 'a';
            if (part < 2)
                count[ch - 'a']++;
        } else {
            return ox_unsupported(C, n, "equation '%s' (only lower-case indices, no '...')", eqs);
        }
    }
    if (part < 1)
        return ox_unsupported(C, n, "equation '%s' is not of two operands", eqs);
    if (!explicit_out)
        for (int L = 0; L < 26; L++)
            if (count[L] == 1 && nl[2] < SB_MAX_DIMS)
                lab[2][nl[2]++] = L;
    if (nl[0] != a->nd || nl[1] != b->nd)
        return ox_unsupported(C, n, "equation '%s' does not match ranks %d and %d", eqs, a->nd, b->nd);
    if (a->kind != V_ACT && b->kind != V_ACT)
        return ox_unsupported(C, n, "einsum of two constants");
    val *ops[2] = {a, b};
    return emit_einsum(C, n, ops, nl, (const int(*)[SB_MAX_DIMS])lab, nl[2], lab[2], y);
}

/* ---- node handlers ---------------------------------------------------------- */

int ox_node_gemm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    return x1 ? op_matmul(C, n, x, x1, (int)ox_attr_i(n, "transA", 0), (int)ox_attr_i(n, "transB", 0), y)
              : ox_unsupported(C, n, "needs two inputs");
}

int ox_node_matmul(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    return x1 ? op_matmul(C, n, x, x1, 0, 0, y) : ox_unsupported(C, n, "needs two inputs");
}

int ox_node_einsum(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    return x1 ? op_einsum(C, n, x, x1, y) : ox_unsupported(C, n, "needs two inputs");
}

#endif /* SB_HAVE_ONNX */
