/* onnx/lstm.c: LSTM (forward, hidden size = input width) as one `lstm` op. */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

static int op_lstm(ctx *C, const Onnx__NodeProto *n, val *x, val *w, val *y)
{
    const Onnx__AttributeProto *dir = ox_attr(n, "direction");
    if (dir && dir->has_s && !(dir->s.len == 7 && memcmp(dir->s.data, "forward", 7) == 0))
        return ox_unsupported(C, n, "direction %.*s (only forward)", (int)(dir->s.len < 40 ? dir->s.len : 40),
                           (const char *)dir->s.data);
    if (x->nd != 3 || !is_static(w) || w->nd != 3)
        return ox_unsupported(C, n, "input of rank %d or a weight that is not a static 3-D tensor", x->nd);
    int64_t H = ox_attr_i(n, "hidden_size", w->shape[1].c / 4);
    int layout = (int)ox_attr_i(n, "layout", 0);
    if (!sym_eq(x->shape[2], S(H)))
        return ox_unsupported(C, n, "hidden size %lld differs from the input width %lld (the model format's lstm keeps the width)",
                           (long long)H, (long long)ox_sym_val(C, x->shape[2]));
    if (ox_attr(n, "activations") || ox_attr(n, "clip") || ox_attr_i(n, "input_forget", 0))
        return ox_unsupported(C, n, "custom activations, clip or input_forget");
    val v = *x; /* the input as (batch, seq, units) */
    if (!layout) {
        v.src[0] = x->src[1];
        v.src[1] = x->src[0];
        v.shape[0] = x->shape[1];
        v.shape[1] = x->shape[0];
    }
    v.mat = -1;
    int in = ox_materialize(C, &v, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    int t = ox_new_tensor(C, node_label(n), "lstm", 3, X->dn, X->sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "lstm", 0, "%s", C->t[in].name) < 0)
        return -1;
    if (y) {
        int8_t src0[4] = {1, -1, 0, 2}, src1[4] = {0, 1, -1, 2};
        ox_bind_view(C, y, t, 4, layout ? src1 : src0);
    }
    for (size_t k = 1; k < 3; k++) {
        val *o = ox_out_val(C, n, k);
        if (o) {
            o->kind = V_UNAVAIL;
            o->why = "the LSTM's last hidden or cell state (the model format's lstm has one output)";
        }
    }
    return 0;
}

/* ---- node handlers ---------------------------------------------------------- */

int ox_node_lstm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    return op_lstm(C, n, x, x1 ? x1 : x, y);
}

#endif /* SB_HAVE_ONNX */
