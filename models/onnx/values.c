/* onnx/values.c: the importer's bookkeeping: symbolic sizes, the growing text,
 * values by ONNX name (constants, weights, activations, views, aliases),
 * names of tensors and dims, the model tensors and lines of text it emits
 * (materializing views where a consumer needs the layout), node attributes
 * and constants, pointwise fusion into a producer's pw, refusals. */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

int ox_sym_mul(sym a, sym b, sym *out)
{
    sym r = a;
    if (__builtin_mul_overflow(a.c, b.c, &r.c))
        return -1;
    for (int i = 0; i < NSYM; i++) {
        int e = a.e[i] + b.e[i];
        if (e > 16 || e < -16)
            return -1;
        r.e[i] = (int8_t)e;
    }
    *out = r;
    return 0;
}

/* Exact division; -1 when the quotient is not a monomial with integer c. */
int ox_sym_div(sym a, sym b, sym *out)
{
    if (b.c == 0 || a.c % b.c || (a.c == INT64_MIN && b.c == -1))
        return -1;
    sym r = a;
    r.c = a.c / b.c;
    for (int i = 0; i < NSYM; i++) {
        r.e[i] = (int8_t)(a.e[i] - b.e[i]);
        if (r.e[i] < 0)
            return -1;
    }
    *out = r;
    return 0;
}

void ox_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->n + (size_t)k + 1)
            nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
}

int ox_oom(ctx *C)
{
    C->oom = 1;
    return sb_fail(C->err, SB_EXIT_INTERNAL, "%s: out of memory while importing", C->path);
}

static void *grow(ctx *C, void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *np = realloc(p, (size_t)nc * elem);
    if (!np) {
        ox_oom(C);
        return NULL;
    }
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *cap = nc;
    return np;
}

void ox_sym_str(ctx *C, sym a, char *buf, size_t n)
{
    size_t u = 0;
    int any = 0;
    if (a.c != 1 || sym_is_const(a)) {
        u += (size_t)snprintf(buf, n, "%lld", (long long)a.c);
        any = 1;
    }
    for (int i = 0; i < C->nsym && u < n; i++)
        for (int k = 0; k < a.e[i] && u < n; k++) {
            u += (size_t)snprintf(buf + u, n - u, "%s%s", any ? "*" : "", C->symname[i]);
            any = 1;
        }
}

int64_t ox_sym_val(ctx *C, sym a)
{
    int64_t v = a.c;
    for (int i = 0; i < C->nsym; i++)
        for (int k = 0; k < a.e[i]; k++)
            if (__builtin_mul_overflow(v, C->symdef[i], &v))
                return INT64_MAX;
    return v;
}

/* The size as the export saw it: with a static batch made the `batch`
 * param (ctx.batch_static), the param at the export's value, not --set's. */
int64_t ox_sym_export_val(ctx *C, sym a)
{
    int64_t v = a.c;
    for (int i = 0; i < C->nsym; i++) {
        int64_t d = C->batch_static && !strcmp(C->symname[i], "batch") ? C->batch_static : C->symdef[i];
        for (int k = 0; k < a.e[i]; k++)
            if (__builtin_mul_overflow(v, d, &v))
                return INT64_MAX;
    }
    return v;
}

static int name_taken(ctx *C, const char *s)
{
    for (int i = 0; i < C->nnames; i++)
        if (strcmp(C->names[i], s) == 0)
            return 1;
    return 0;
}

int ox_name_take(ctx *C, const char *s)
{
    char **nn = grow(C, C->names, &C->capnames, C->nnames + 1, sizeof *nn);
    if (!nn)
        return -1;
    C->names = nn;
    if (!(C->names[C->nnames] = strdup(s)))
        return ox_oom(C);
    C->nnames++;
    return 0;
}

/* An identifier from an ONNX name: [A-Za-z0-9_], starting with a letter,
 * unique among tensor names, params and statement keywords. */
int ox_make_ident(ctx *C, const char *src, const char *fallback, char *out)
{
    char base[64];
    size_t n = 0;
    for (const char *p = src ? src : ""; *p && n < 48; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!ok)
            ch = '_';
        if (ch == '_' && (n == 0 || base[n - 1] == '_'))
            continue;
        base[n++] = ch;
    }
    while (n && base[n - 1] == '_')
        n--;
    base[n] = '\0';
    if (n == 0 || (base[0] >= '0' && base[0] <= '9')) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%.12s%s%.48s", fallback, n ? "_" : "", base);
        snprintf(base, sizeof base, "%s", tmp);
    }
    char cand[SB_NAME_MAX];
    snprintf(cand, sizeof cand, "%s", base);
    for (int k = 2; name_taken(C, cand); k++)
        snprintf(cand, sizeof cand, "%s_%d", base, k);
    snprintf(out, SB_NAME_MAX, "%s", cand);
    return ox_name_take(C, cand);
}

/* A dim name after --rename; recorded for the summary. */
void ox_dim_name(ctx *C, const char *proposed, int how, int64_t size, char *out)
{
    const char *nm = proposed;
    for (int i = 0; C->opts && i < C->opts->nrenames; i++)
        if (strcmp(C->opts->renames[i].from, proposed) == 0) {
            nm = C->opts->renames[i].to;
            how = SB_ONNX_DIM_RENAMED;
        }
    snprintf(out, SB_NAME_MAX, "%s", nm);
    for (int i = 0; i < C->ndims; i++)
        if (strcmp(C->dims[i].name, proposed) == 0)
            return;
    if (C->ndims < 64) {
        snprintf(C->dims[C->ndims].name, SB_NAME_MAX, "%s", proposed);
        C->dims[C->ndims].size = size;
        C->dims[C->ndims++].how = how;
    }
}

/* A stable generated name: one per distinct size (d0, d1, ...). */
void ox_gen_name(ctx *C, int64_t size, char *out)
{
    for (int i = 0; i < C->ndims; i++)
        if (C->dims[i].how != SB_ONNX_DIM_RECOGNISED && C->dims[i].size == size
            && C->dims[i].name[0] == 'd' && C->dims[i].name[1] >= '0' && C->dims[i].name[1] <= '9') {
            ox_dim_name(C, C->dims[i].name, SB_ONNX_DIM_GENERATED, size, out);
            return;
        }
    char nm[32];
    snprintf(nm, sizeof nm, "d%d", C->gen++);
    ox_dim_name(C, nm, SB_ONNX_DIM_GENERATED, size, out);
}

void ox_recog_name(ctx *C, const char *nm, int64_t size, char *out)
{
    ox_dim_name(C, nm, SB_ONNX_DIM_RECOGNISED, size, out);
}

/* Makes the names of one tensor distinct (suffix _2, _3, ...). */
void ox_uniq_dims(int nd, char dn[][SB_NAME_MAX])
{
    for (int i = 1; i < nd; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(dn[i], dn[j]) == 0) {
                char base[82];
                snprintf(base, sizeof base, "%.80s", dn[i]);
                for (int k = 2;; k++) {
                    snprintf(dn[i], SB_NAME_MAX, "%s_%d", base, k);
                    int clash = 0;
                    for (int q = 0; q < nd; q++)
                        clash |= q != i && strcmp(dn[q], dn[i]) == 0;
                    if (!clash)
                        break;
                }
                j = -1;
            }
}

int ox_unsupported(ctx *C, const Onnx__NodeProto *n, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (C->nunsup < MAX_UNSUP)
        ox_printf(&C->unsup, "\n  %.80s (%.40s, opset %lld): %s", node_label(n),
                  n->op_type ? n->op_type : "?", (long long)C->opset, why);
    C->nunsup++;
    return 1;
}

static uint64_t hstr(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

val *ox_vfind(ctx *C, const char *name)
{
    if (!name || !name[0] || !C->hcap)
        return NULL;
    for (size_t i = hstr(name) & (C->hcap - 1);; i = (i + 1) & (C->hcap - 1)) {
        if (C->hash[i] < 0)
            return NULL;
        if (strcmp(C->v[C->hash[i]].name, name) == 0)
            return &C->v[C->hash[i]];
    }
}

/* The value of a name, created (V_NONE) if new. */
val *ox_vget(ctx *C, const char *name)
{
    /* a fused chain may end in a node whose output has no name: no value
     * to bind, and (every named value made in the prepass) no new entry
     * after it, which would move the values callers hold */
    if (!name || !name[0]) {
        sb_fail(C->err, SB_EXIT_INPUT, "%s: a node's output has no name where its value is needed", C->path);
        return NULL;
    }
    val *x = ox_vfind(C, name);
    if (x)
        return x;
    if ((size_t)(C->nv + 1) * 2 > C->hcap) {
        size_t nc = C->hcap ? C->hcap * 2 : 1024;
        int *nh = malloc(nc * sizeof *nh);
        if (!nh) {
            ox_oom(C);
            return NULL;
        }
        for (size_t i = 0; i < nc; i++)
            nh[i] = -1;
        for (int k = 0; k < C->nv; k++) {
            size_t i = hstr(C->v[k].name) & (nc - 1);
            while (nh[i] >= 0)
                i = (i + 1) & (nc - 1);
            nh[i] = k;
        }
        free(C->hash);
        C->hash = nh;
        C->hcap = nc;
    }
    val *nv = grow(C, C->v, &C->capv, C->nv + 1, sizeof *nv);
    if (!nv)
        return NULL;
    C->v = nv;
    val *x2 = &C->v[C->nv];
    memset(x2, 0, sizeof *x2);
    x2->name = name;
    x2->t = x2->mat = x2->wt = x2->prod = -1;
    size_t i = hstr(name) & (C->hcap - 1);
    while (C->hash[i] >= 0)
        i = (i + 1) & (C->hcap - 1);
    C->hash[i] = C->nv++;
    return x2;
}

int64_t ox_shape_numel(ctx *C, int nd, const sym *s)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        int64_t d = ox_sym_val(C, s[i]);
        if (d <= 0 || __builtin_mul_overflow(n, d, &n))
            return -1;
    }
    return n;
}

int ox_new_tensor(ctx *C, const char *onnx_name, const char *fallback, int nd,
                      char dn_[][SB_NAME_MAX], const sym *sz_, int lineno)
{
    /* dn_ and sz_ may point into C->t, which grow() moves: copy them first */
    char dn[SB_MAX_DIMS][SB_NAME_MAX];
    sym sz[SB_MAX_DIMS];
    if (nd < 0 || nd > SB_MAX_DIMS)
        return sb_fail(C->err, SB_EXIT_INTERNAL, "internal: tensor of rank %d", nd);
    memcpy(dn, dn_, (size_t)nd * sizeof dn[0]);
    memcpy(sz, sz_, (size_t)nd * sizeof sz[0]);
    mtensor *nt = grow(C, C->t, &C->capt, C->nt + 1, sizeof *nt);
    if (!nt)
        return -1;
    C->t = nt;
    mtensor *t = &C->t[C->nt];
    memset(t, 0, sizeof *t);
    if (ox_make_ident(C, onnx_name, fallback, t->name))
        return -1;
    t->nd = nd;
    for (int i = 0; i < nd; i++) {
        snprintf(t->dn[i], SB_NAME_MAX, "%.*s", SB_NAME_MAX - 1, dn[i]);
        t->sz[i] = sz[i];
    }
    ox_uniq_dims(nd, t->dn);
    t->line = lineno;
    return C->nt++;
}

int ox_add_line(ctx *C, const char *lhs, const char *op, int can_pw, const char *fmt, ...)
{
    line *nl = grow(C, C->l, &C->capl, C->nl + 1, sizeof *nl);
    if (!nl)
        return -1;
    C->l = nl;
    line *L = &C->l[C->nl];
    memset(L, 0, sizeof *L);
    snprintf(L->lhs, sizeof L->lhs, "%s", lhs);
    snprintf(L->op, sizeof L->op, "%s", op);
    L->can_pw = can_pw;
    va_list ap;
    va_start(ap, fmt);
    int k = vasprintf(&L->args, fmt, ap);
    va_end(ap);
    if (k < 0) {
        L->args = NULL;
        return ox_oom(C);
    }
    return C->nl++;
}

/* Binds value x to tensor t with the identity view. */
void ox_bind_act(ctx *C, val *x, int t)
{
    x->kind = V_ACT;
    x->t = t;
    x->mat = -1;
    x->nd = C->t[t].nd;
    for (int i = 0; i < x->nd; i++) {
        x->src[i] = (int8_t)i;
        x->shape[i] = C->t[t].sz[i];
    }
    C->t[t].refs += x->uses;
}

/* Binds x to a view of tensor t: logical dim j = t's dim src[j] (-1: size 1). */
void ox_bind_view(ctx *C, val *x, int t, int nd, const int8_t *src)
{
    x->kind = V_ACT;
    x->t = t;
    x->mat = -1;
    x->nd = nd;
    for (int j = 0; j < nd; j++) {
        x->src[j] = src[j];
        x->shape[j] = src[j] >= 0 ? C->t[t].sz[src[j]] : S(1);
    }
    C->t[t].refs += x->uses;
}

static int view_is_identity(ctx *C, const val *x)
{
    if (x->nd != C->t[x->t].nd)
        return 0;
    for (int j = 0; j < x->nd; j++)
        if (x->src[j] != j)
            return 0;
    return 1;
}

/* The dim name of logical dim j of an activation ("" for an inserted one). */
const char *ox_lname(ctx *C, const val *x, int j)
{
    return x->src[j] >= 0 ? C->t[x->t].dn[x->src[j]] : "";
}

/* A tensor holding x in its logical layout: x's own, or a transpose and/or
 * reshape of it (emitted once, cached). */
int ox_materialize(ctx *C, val *x, const char *base)
{
    if (x->mat >= 0)
        return x->mat;
    if (view_is_identity(C, x))
        return x->mat = x->t;
    mtensor *T = &C->t[x->t];
    int cur = x->t;
    /* transpose when the real dims are out of order */
    int perm[SB_MAX_DIMS], np = 0, inorder = 1, last = -1;
    for (int j = 0; j < x->nd; j++)
        if (x->src[j] >= 0) {
            perm[np++] = x->src[j];
            inorder &= x->src[j] > last;
            last = x->src[j];
        }
    int nreal = np;
    for (int i = 0; i < T->nd; i++) {
        int used = 0;
        for (int j = 0; j < x->nd; j++)
            used |= x->src[j] == i;
        if (!used) {
            perm[np++] = i;
            inorder &= i > last;
            last = i;
        }
    }
    char nm[SB_NAME_MAX + 16];
    if (!inorder) {
        char dn[SB_MAX_DIMS][SB_NAME_MAX];
        sym sz[SB_MAX_DIMS];
        char ps[64] = "";
        for (int i = 0; i < np; i++) {
            snprintf(dn[i], SB_NAME_MAX, "%s", T->dn[perm[i]]);
            sz[i] = T->sz[perm[i]];
            snprintf(ps + strlen(ps), sizeof ps - strlen(ps), "%s%d", i ? ", " : "", perm[i]);
        }
        snprintf(nm, sizeof nm, "%s_t", base);
        int nt = ox_new_tensor(C, nm, "t", np, dn, sz, C->nl);
        if (nt < 0 || ox_add_line(C, C->t[nt].name, "transpose", 0, "%s, perm=[%s]", C->t[cur].name, ps) < 0)
            return -1;
        cur = nt;
        T = &C->t[x->t];
    }
    if (nreal != x->nd || np != nreal) {
        /* size-1 dims inserted or dropped: a reshape to the logical shape */
        char dn[SB_MAX_DIMS][SB_NAME_MAX];
        sym sz[SB_MAX_DIMS];
        char shape[1024] = "";
        for (int j = 0; j < x->nd; j++) {
            if (x->src[j] >= 0)
                snprintf(dn[j], SB_NAME_MAX, "%s", T->dn[x->src[j]]);
            else
                snprintf(dn[j], SB_NAME_MAX, "one");
            sz[j] = x->shape[j];
        }
        ox_uniq_dims(x->nd, dn);
        for (int j = 0; j < x->nd; j++) {
            char s[128];
            ox_sym_str(C, sz[j], s, sizeof s);
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%s=%s", j ? ", " : "", dn[j], s);
        }
        snprintf(nm, sizeof nm, "%s_r", base);
        int nt = ox_new_tensor(C, nm, "r", x->nd, dn, sz, C->nl);
        if (nt < 0 || ox_add_line(C, C->t[nt].name, "reshape", 0, "%s, shape=[%s]", C->t[cur].name, shape) < 0)
            return -1;
        cur = nt;
    }
    return x->mat = cur;
}

const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] && n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

int64_t ox_attr_i(const Onnx__NodeProto *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = ox_attr(n, name);
    return a && a->has_i ? a->i : def;
}

/* ints attribute into out (at most max); returns the count or -1 if absent. */
int ox_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = ox_attr(n, name);
    if (!a)
        return -1;
    int k = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
    for (int i = 0; i < k; i++)
        out[i] = a->ints[i];
    return (int)a->n_ints;
}

val *ox_in_val(ctx *C, const Onnx__NodeProto *n, size_t i)
{
    const char *nm = in_name(n, i);
    return nm ? ox_vfind(C, nm) : NULL;
}

val *ox_out_val(ctx *C, const Onnx__NodeProto *n, size_t i)
{
    if (i >= n->n_output || !n->output[i] || !n->output[i][0])
        return NULL;
    return ox_vget(C, n->output[i]);
}

static int tensor_shape(ctx *C, const Onnx__TensorProto *tp, int *nd, sym *shape)
{
    if (tp->n_dims > SB_MAX_DIMS)
        return -1;
    *nd = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0 || tp->dims[i] > ((int64_t)1 << 40))
            return -1;
        shape[i] = S(tp->dims[i]);
    }
    (void)C;
    return 0;
}

/* Which causal mask the (.., n, n) float or bool data of x is, if any
 * (leading dims of size 1). */
static int classify_mask(const val *x)
{
    if (x->nd < 2 || !x->fdata)
        return MASK_NONE;
    for (int i = 0; i < x->nd - 2; i++)
        if (x->shape[i].c != 1)
            return MASK_NONE;
    int64_t r = x->shape[x->nd - 2].c, c = x->shape[x->nd - 1].c;
    if (r != c || r < 2 || r > MAX_FCONST || r * c != x->nf)
        return MASK_NONE;
    int keep = 1, add = 1;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) {
            float v = x->fdata[i * c + j];
            keep &= j <= i ? v == 1.0f : v == 0.0f;
            add &= j <= i ? v == 0.0f : v < -1e30f;
        }
    return keep ? MASK_KEEP : add ? MASK_ADD : MASK_NONE;
}

/* The float (or bool, as 0/1) elements of a tensor, for pattern checks;
 * none when the data is not in the file (a graph-only weight). */
static int read_floats(ctx *C, val *x, const Onnx__TensorProto *tp, int dt, int64_t n)
{
    int isbool = dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    float *f = malloc((size_t)n * sizeof *f);
    if (!f)
        return ox_oom(C);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        if (!isbool && (size_t)n == tp->n_float_data)
            f[i] = tp->float_data[i];
        else if (isbool && (size_t)n == tp->n_int32_data)
            f[i] = tp->int32_data[i] != 0;
        else if (tp->has_raw_data && tp->raw_data.len == (size_t)n * (isbool ? 1 : 4)) {
            if (isbool)
                f[i] = tp->raw_data.data[i] != 0;
            else
                memcpy(&f[i], tp->raw_data.data + i * 4, 4);
        } else
            ok = 0;
    }
    if (!ok) {
        free(f);
        return 0;
    }
    free(x->fdata);
    x->fdata = f;
    x->nf = (int)n;
    x->mask = classify_mask(x);
    return 0;
}

/* x becomes a static float tensor of the given shape and data (n may be 0:
 * shape only). */
int ox_set_fconst(ctx *C, val *x, int nd, const sym *shape, int n, const float *data)
{
    float *f = NULL;
    if (n > 0) {
        if (!(f = malloc((size_t)n * sizeof *f)))
            return ox_oom(C);
        memcpy(f, data, (size_t)n * sizeof *f);
    }
    free(x->fdata);
    x->kind = V_STATIC;
    x->fdata = f;
    x->nf = n;
    x->nd = nd;
    for (int i = 0; i < nd; i++)
        x->shape[i] = shape[i];
    x->mask = classify_mask(x);
    if (n == 1)
        x->has_f = 1, x->f = f[0];
    return 0;
}

int ox_have(ctx *C, const char *probe)
{
    for (int i = 0; i < C->nprobes; i++)
        if (C->probes[i].probe == probe)
            return C->probes[i].ok;
    char text[512];
    snprintf(text, sizeof text, "model probe\ninput x[a=4, b=4]\n%s\n", probe);
    sb_model m;
    sb_error err = {0};
    int ok = sb_model_parse(text, strlen(text), "probe", NULL, 0, &m, &err) == 0;
    if (ok)
        sb_model_free(&m);
    if (C->nprobes < 16) {
        C->probes[C->nprobes].probe = probe;
        C->probes[C->nprobes++].ok = ok;
    }
    return ok;
}

/* Fills x from a TensorProto (initializer or Constant's value): small integer
 * tensors become foldable constants, the rest static tensors (shape only). */
int ox_set_from_tensor(ctx *C, val *x, const Onnx__TensorProto *tp, int weight)
{
    sym shape[SB_MAX_DIMS];
    int nd;
    if (tensor_shape(C, tp, &nd, shape))
        return -1;
    x->nd = nd;
    memcpy(x->shape, shape, sizeof shape);
    x->weight = weight;
    x->kind = V_STATIC;
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i].c;
    int dt = tp->has_data_type ? tp->data_type : 0;
    int isint = dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    if (isint && n <= MAX_CONST) {
        sym *d = calloc((size_t)(n ? n : 1), sizeof *d);
        if (!d)
            return ox_oom(C);
        int ok = 1;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = 0;
            if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && (size_t)i < tp->n_int64_data)
                v = tp->int64_data[i];
            else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 && (size_t)i < tp->n_int32_data)
                v = tp->int32_data[i];
            else if (tp->has_raw_data && tp->raw_data.len >= (size_t)(i + 1) * (dt == 7 ? 8 : 4)) {
                const uint8_t *p = tp->raw_data.data + i * (dt == 7 ? 8 : 4);
                uint64_t u = 0;
                for (int b = (dt == 7 ? 7 : 3); b >= 0; b--)
                    u = (u << 8) | p[b];
                v = dt == 7 ? (int64_t)u : (int64_t)(int32_t)(uint32_t)u;
            } else
                ok = 0;
            d[i] = S(v);
        }
        if (ok) {
            free(x->data);
            x->data = d;
            x->ndata = (int)n;
            x->kind = V_CONST;
            x->weight = 0;
        } else {
            free(d);
        }
    }
    if ((dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) && n > 0
        && n <= MAX_FCONST && x->kind == V_STATIC && read_floats(C, x, tp, dt, n))
        return -1;
    if (n == 1 && (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == 11 /* double */)) {
        if (tp->n_float_data)
            x->f = tp->float_data[0], x->has_f = 1;
        else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && tp->has_raw_data && tp->raw_data.len >= 4) {
            float f;
            memcpy(&f, tp->raw_data.data, 4);
            x->f = f;
            x->has_f = 1;
        }
    }
    return 0;
}

int ox_set_const(ctx *C, val *x, int nd, const sym *shape, int n, const sym *data)
{
    sym *d = calloc((size_t)(n ? n : 1), sizeof *d);
    if (!d)
        return ox_oom(C);
    if (n)
        memcpy(d, data, (size_t)n * sizeof *d);
    free(x->data);
    x->kind = V_CONST;
    x->data = d;
    x->ndata = n;
    x->nd = nd;
    for (int i = 0; i < nd; i++)
        x->shape[i] = shape[i];
    return 0;
}

/* y takes the value of x (Identity, Dropout, a no-op): the same view of an
 * activation, a copy of a constant, or what else x holds. */
int ox_alias(ctx *C, val *x, val *y)
{
    if (x->kind == V_ACT) {
        ox_bind_view(C, y, x->t, x->nd, x->src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    if (x->kind == V_CONST)
        return ox_set_const(C, y, x->nd, x->shape, x->ndata, x->data);
    if (x->kind == V_STATIC && x->fdata && ox_set_fconst(C, y, x->nd, x->shape, x->nf, x->fdata))
        return -1;
    y->kind = x->kind;
    y->nd = x->nd;
    memcpy(y->shape, x->shape, sizeof y->shape);
    y->has_f = x->has_f;
    y->f = x->f;
    y->weight = x->weight;
    return 0;
}

/* Fuses one pointwise op into the producer of x, or emits elementwise. */
int ox_emit_pw(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int count, int own_reads)
{
    mtensor *T = &C->t[x->t];
    if (C->info && strcmp(n->op_type, "Relu") != 0) /* a Relu is what the runtime applies */
        C->info->napprox++;
    if (T->refs == 0 && T->nread == own_reads && !T->out && T->line >= 0 && C->l[T->line].can_pw) {
        C->l[T->line].pw += count;
        T->nread = 0; /* the reads by this pw are now inside the producer */
        if (C->info)
            C->info->nfused++;
        y->kind = V_ACT;
        y->t = x->t;
        y->nd = x->nd;
        memcpy(y->src, x->src, sizeof x->src);
        memcpy(y->shape, x->shape, sizeof x->shape);
        y->mat = x->mat;
        T->refs += y->uses;
        return 0;
    }
    int in = ox_materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *I = &C->t[in];
    int t = ox_new_tensor(C, node_label(n), "pw", I->nd, I->dn, I->sz, C->nl);
    if (t < 0)
        return -1;
    if (ox_add_line(C, C->t[t].name, "elementwise", 1, "%s", C->t[in].name) < 0)
        return -1;
    C->l[C->nl - 1].pw = count;
    ox_bind_act(C, y, t);
    return 0;
}

void ox_consume(ctx *C, val *x)
{
    if (x && x->kind == V_ACT) {
        C->t[x->t].refs--;
        C->t[x->t].nread++;
    }
}

/* 1 when b broadcasts to a's logical shape (numpy rules). */
int ox_broadcasts_to(const val *b, const val *a)
{
    if (b->nd > a->nd)
        return 0;
    for (int i = 0; i < b->nd; i++) {
        sym bs = b->shape[b->nd - 1 - i], as = a->shape[a->nd - 1 - i];
        if (!(bs.c == 1 && sym_is_const(bs)) && !sym_eq(bs, as))
            return 0;
    }
    return 1;
}

int ox_same_shape(const val *a, const val *b)
{
    if (a->nd != b->nd)
        return 0;
    for (int i = 0; i < a->nd; i++)
        if (!sym_eq(a->shape[i], b->shape[i]))
            return 0;
    return 1;
}

/* Whether the named value is (or will be, as a Constant's output) static:
 * also a constant table cut to the sequence of a dynamic-axis export
 * (`self.cos[:s]`), static once its bounds fold. */
static int static_name_d(ctx *C, const char *name, int depth)
{
    val *x = name ? ox_vfind(C, name) : NULL;
    if (!x)
        return 0;
    if (is_static(x))
        return 1;
    if (x->prod < 0 || x->prod >= (int)C->g->n_node)
        return 0;
    const Onnx__NodeProto *p = C->g->node[x->prod];
    if (op_is(p, "Constant"))
        return 1;
    return depth < 8
           && (op_is(p, "Slice") || op_is(p, "Unsqueeze") || op_is(p, "Squeeze") || op_is(p, "Cast")
               || op_is(p, "Identity"))
           && static_name_d(C, in_name(p, 0), depth + 1);
}

int ox_static_name(ctx *C, const char *name)
{
    return static_name_d(C, name, 0);
}

/* A node refused only for a model op this build lacks: y still gets a
 * value of the right shape (a placeholder tensor no line writes) so that
 * the walk goes on and lists every other blocking node. The import fails
 * (the refusal is recorded); returns 0, or -1 on a fatal error. */
int ox_refuse_shaped(ctx *C, const Onnx__NodeProto *n, val *y, int nd, const sym *shape, const char *why)
{
    ox_unsupported(C, n, "%s", why);
    char dn[SB_MAX_DIMS][SB_NAME_MAX];
    for (int i = 0; i < nd; i++)
        snprintf(dn[i], SB_NAME_MAX, "p%d", i);
    int t = ox_new_tensor(C, node_label(n), "placeholder", nd, dn, shape, -1);
    if (t < 0)
        return -1;
    ox_bind_act(C, y, t);
    return 0;
}

/* The float scalar a static value holds, also when it is the output of a
 * Constant node the walk has not reached yet. 0, or -1 when unknown. */
int ox_scalar_of(ctx *C, const char *name, double *f)
{
    val *x = name ? ox_vfind(C, name) : NULL;
    if (!x)
        return -1;
    if (is_static(x) && x->has_f) {
        *f = x->f;
        return 0;
    }
    const Onnx__AttributeProto *a;
    if (x->prod < 0 || !op_is(C->g->node[x->prod], "Constant") || !(a = ox_attr(C->g->node[x->prod], "value")) || !a->t)
        return -1;
    val v;
    memset(&v, 0, sizeof v);
    int rc = ox_set_from_tensor(C, &v, a->t, 0) || !v.has_f ? -1 : 0;
    *f = v.f;
    free(v.data);
    free(v.fdata);
    return rc;
}

/* The single consumer of a value (node index), or -1. */
int ox_only_consumer(ctx *C, const char *name)
{
    val *x = name ? ox_vfind(C, name) : NULL;
    if (!x || x->uses != 1)
        return -1;
    int vi = (int)(x - C->v);
    return C->ncons[vi] == 1 ? C->cons[vi][0] : -1;
}

void ox_absorb(ctx *C, int ni)
{
    const Onnx__NodeProto *n = C->g->node[ni];
    C->skip[ni] = 1;
    for (size_t i = 0; i < n->n_input; i++)
        ox_consume(C, ox_in_val(C, n, i));
}

/* Node k has inputs (a, b) in either order, b static. */
int ox_binop_with_static(ctx *C, const Onnx__NodeProto *k, const char *a)
{
    if (k->n_input != 2 || !a)
        return 0;
    const char *i0 = in_name(k, 0), *i1 = in_name(k, 1);
    if (!i0 || !i1)
        return 0;
    return (strcmp(i0, a) == 0 && ox_static_name(C, i1)) || (strcmp(i1, a) == 0 && ox_static_name(C, i0));
}

#endif /* SB_HAVE_ONNX */
