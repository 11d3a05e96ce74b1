/* onnx_import.c: ONNX graph -> model-file text (include/shardbench/onnx.h).
 *
 * Decodes the protobuf with the protobuf-c bindings generated from
 * onnx.proto (cmake/onnx.cmake), infers every shape statically (a symbolic
 * dim is a monomial over the model's params, so `--set batch=N` still holds
 * in the written text), and maps each ONNX node onto the ops of
 * models/README.md. Transposes, squeezes and size-1 reshapes are kept as
 * views of the producer's tensor until a consumer needs the real layout.
 * Pointwise nodes fuse into their producer's pw. What the model format
 * cannot express is collected and reported in one error. The text is then
 * parsed by sb_model_parse (models/parse.c): this file never builds the IR.
 * Not the file reading or the sb_model_load hook (onnx_load.c). */
#define _GNU_SOURCE
#include "shardbench/onnx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SB_HAVE_ONNX

int sb_onnx_to_text(const void *data, size_t size, const char *path, const sb_onnx_opts *opts,
                    char **text, size_t *len, sb_onnx_info *info, sb_error *err)
{
    (void)data;
    (void)size;
    (void)opts;
    (void)info;
    *text = NULL;
    *len = 0;
    return sb_fail(err, SB_EXIT_INPUT,
                   "%s: cannot import ONNX: shardbench was built without ONNX support "
                   "(needs protobuf-c-compiler, libprotobuf-c-dev and libonnx-dev at build time)",
                   path);
}

#else /* SB_HAVE_ONNX */

#include <math.h>

#include SB_ONNX_PB_HEADER

#define NSYM 8            /* symbolic dims (params) per model */
#define MAX_CONST 4096    /* elements of an integer constant we fold */
#define MAX_NODES 200000
#define MAX_UNSUP 64

/* ---- symbolic sizes: c * prod(param_i ^ e_i) ----------------------------- */

typedef struct {
    int64_t c;
    int8_t e[NSYM];
} sym;

static sym S(int64_t c)
{
    sym s;
    memset(&s, 0, sizeof s);
    s.c = c;
    return s;
}

static int sym_is_const(sym a)
{
    for (int i = 0; i < NSYM; i++)
        if (a.e[i])
            return 0;
    return 1;
}

static int sym_eq(sym a, sym b)
{
    return a.c == b.c && memcmp(a.e, b.e, sizeof a.e) == 0;
}

static int sym_mul(sym a, sym b, sym *out)
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
static int sym_div(sym a, sym b, sym *out)
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

/* ---- growing text ----------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
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

/* ---- the importer's state -------------------------------------------------- */

enum { V_NONE = 0, V_CONST, V_STATIC, V_ACT, V_POISON, V_UNAVAIL };

typedef struct {
    const char *name;  /* ONNX value name (points into the decoded proto) */
    int kind;
    int nd;
    sym shape[SB_MAX_DIMS];  /* logical (ONNX) shape */
    int ndata;               /* V_CONST: integer elements */
    sym *data;
    int has_f;               /* a float scalar constant (pattern checks) */
    double f;
    int weight;              /* V_STATIC: a trained parameter */
    int wt;                  /* V_STATIC: declared `weight` tensor, or -1 */
    int t;                   /* V_ACT: model tensor */
    int8_t src[SB_MAX_DIMS]; /* V_ACT: logical dim j = tensor dim src[j], -1 = size-1 dim */
    int mat;                 /* V_ACT: materialized tensor, or -1 */
    int uses;                /* consumers (a graph output counts as one) */
    const char *why;         /* V_UNAVAIL: why */
    int prod;                /* producing node, or -1 */
    int64_t xpad[2];         /* V_ACT: a Pad's spatial padding, for its Conv/Pool reader */
} val;

typedef struct {
    char name[SB_NAME_MAX];
    int nd;
    char dn[SB_MAX_DIMS][SB_NAME_MAX];
    sym sz[SB_MAX_DIMS];
    int line;   /* producing line, or -1 (input, weight) */
    int refs;   /* pending reads by ONNX consumers */
    int nread;  /* reads so far (a pw fuses only into a tensor read once) */
    int out;    /* a graph output reads it */
} mtensor;

typedef struct {
    char lhs[SB_NAME_MAX * 17];
    char op[16];             /* "" : args is a whole statement */
    char *args;
    int pw, can_pw;
    int sm_axis;             /* softmax: its axis */
    int in;                  /* softmax: its input tensor */
} line;

typedef struct {
    char name[SB_NAME_MAX];
    int64_t size;
    int how;
} dimrec;

typedef struct {
    const char *path;
    const sb_onnx_opts *opts;
    Onnx__ModelProto *mp;
    Onnx__GraphProto *g;
    int64_t opset;
    sb_error *err;

    val *v;
    int nv, capv;
    int *hash;
    size_t hcap;

    mtensor *t;
    int nt, capt;
    line *l;
    int nl, capl;
    sbuf decl;         /* input declarations */

    char **names;      /* taken identifiers (tensor names, params, keywords) */
    int nnames, capnames;

    int nsym;
    char symname[NSYM][SB_NAME_MAX];
    int64_t symdef[NSYM];

    dimrec dims[64];
    int ndims;
    int64_t embed, vocab; /* recognised sizes (0: none yet) */
    int gen;

    int *skip;          /* node absorbed into a pattern */
    int **cons;         /* consumers (node index) of each value */
    int *ncons;

    struct {
        const char *v;
        int axis, parts, first;
    } splits[64];       /* split ops made for even Slices, reused */
    int nsplits;

    sbuf unsup;
    int nunsup;
    sb_onnx_info *info;
    int oom;
} ctx;

static int oom(ctx *C)
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
        oom(C);
        return NULL;
    }
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *cap = nc;
    return np;
}

/* ---- symbolic values as text ---------------------------------------------- */

static void sym_str(ctx *C, sym a, char *buf, size_t n)
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

static int64_t sym_val(ctx *C, sym a)
{
    int64_t v = a.c;
    for (int i = 0; i < C->nsym; i++)
        for (int k = 0; k < a.e[i]; k++)
            if (__builtin_mul_overflow(v, C->symdef[i], &v))
                return INT64_MAX;
    return v;
}

/* ---- names -------------------------------------------------------------------- */

static int name_taken(ctx *C, const char *s)
{
    for (int i = 0; i < C->nnames; i++)
        if (strcmp(C->names[i], s) == 0)
            return 1;
    return 0;
}

static int name_take(ctx *C, const char *s)
{
    char **nn = grow(C, C->names, &C->capnames, C->nnames + 1, sizeof *nn);
    if (!nn)
        return -1;
    C->names = nn;
    if (!(C->names[C->nnames] = strdup(s)))
        return oom(C);
    C->nnames++;
    return 0;
}

/* An identifier from an ONNX name: [A-Za-z0-9_], starting with a letter,
 * unique among tensor names, params and statement keywords. */
static int make_ident(ctx *C, const char *src, const char *fallback, char *out)
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
    return name_take(C, cand);
}

/* A dim name after --rename; recorded for the summary. */
static void dim_name(ctx *C, const char *proposed, int how, int64_t size, char *out)
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
static void gen_name(ctx *C, int64_t size, char *out)
{
    for (int i = 0; i < C->ndims; i++)
        if (C->dims[i].how != SB_ONNX_DIM_RECOGNISED && C->dims[i].size == size
            && C->dims[i].name[0] == 'd' && C->dims[i].name[1] >= '0' && C->dims[i].name[1] <= '9') {
            dim_name(C, C->dims[i].name, SB_ONNX_DIM_GENERATED, size, out);
            return;
        }
    char nm[32];
    snprintf(nm, sizeof nm, "d%d", C->gen++);
    dim_name(C, nm, SB_ONNX_DIM_GENERATED, size, out);
}

static void recog_name(ctx *C, const char *nm, int64_t size, char *out)
{
    dim_name(C, nm, SB_ONNX_DIM_RECOGNISED, size, out);
}

/* Makes the names of one tensor distinct (suffix _2, _3, ...). */
static void uniq_dims(int nd, char dn[][SB_NAME_MAX])
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

/* ---- unsupported nodes ------------------------------------------------------- */

static const char *node_label(const Onnx__NodeProto *n)
{
    return n->name && n->name[0] ? n->name : (n->n_output && n->output[0] ? n->output[0] : "?");
}

static int unsupported(ctx *C, const Onnx__NodeProto *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int unsupported(ctx *C, const Onnx__NodeProto *n, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (C->nunsup < MAX_UNSUP)
        sb_printf(&C->unsup, "\n  %.80s (%.40s, opset %lld): %s", node_label(n),
                  n->op_type ? n->op_type : "?", (long long)C->opset, why);
    C->nunsup++;
    return 1;
}

/* ---- values -------------------------------------------------------------------- */

static uint64_t hstr(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static val *vfind(ctx *C, const char *name)
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
static val *vget(ctx *C, const char *name)
{
    val *x = vfind(C, name);
    if (x)
        return x;
    if ((size_t)(C->nv + 1) * 2 > C->hcap) {
        size_t nc = C->hcap ? C->hcap * 2 : 1024;
        int *nh = malloc(nc * sizeof *nh);
        if (!nh) {
            oom(C);
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

static int64_t shape_numel(ctx *C, int nd, const sym *s)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        int64_t d = sym_val(C, s[i]);
        if (d <= 0 || __builtin_mul_overflow(n, d, &n))
            return -1;
    }
    return n;
}

/* ---- model tensors and lines ---------------------------------------------- */

static int new_tensor(ctx *C, const char *onnx_name, const char *fallback, int nd,
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
    if (make_ident(C, onnx_name, fallback, t->name))
        return -1;
    t->nd = nd;
    for (int i = 0; i < nd; i++) {
        snprintf(t->dn[i], SB_NAME_MAX, "%.*s", SB_NAME_MAX - 1, dn[i]);
        t->sz[i] = sz[i];
    }
    uniq_dims(nd, t->dn);
    t->line = lineno;
    return C->nt++;
}

/* Adds a line `lhs = op(args)`; the args are printf'd. Returns its index. */
static int add_line(ctx *C, const char *lhs, const char *op, int can_pw, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int add_line(ctx *C, const char *lhs, const char *op, int can_pw, const char *fmt, ...)
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
        return oom(C);
    }
    return C->nl++;
}

/* Binds value x to tensor t with the identity view. */
static void bind_act(ctx *C, val *x, int t)
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
static void bind_view(ctx *C, val *x, int t, int nd, const int8_t *src)
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
static const char *lname(ctx *C, const val *x, int j)
{
    return x->src[j] >= 0 ? C->t[x->t].dn[x->src[j]] : "";
}

/* A tensor holding x in its logical layout: x's own, or a transpose and/or
 * reshape of it (emitted once, cached). */
static int materialize(ctx *C, val *x, const char *base)
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
        int nt = new_tensor(C, nm, "t", np, dn, sz, C->nl);
        if (nt < 0 || add_line(C, C->t[nt].name, "transpose", 0, "%s, perm=[%s]", C->t[cur].name, ps) < 0)
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
        uniq_dims(x->nd, dn);
        for (int j = 0; j < x->nd; j++) {
            char s[128];
            sym_str(C, sz[j], s, sizeof s);
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%s=%s", j ? ", " : "", dn[j], s);
        }
        snprintf(nm, sizeof nm, "%s_r", base);
        int nt = new_tensor(C, nm, "r", x->nd, dn, sz, C->nl);
        if (nt < 0 || add_line(C, C->t[nt].name, "reshape", 0, "%s, shape=[%s]", C->t[cur].name, shape) < 0)
            return -1;
        cur = nt;
    }
    return x->mat = cur;
}

/* ---- attributes and constants --------------------------------------------- */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] && n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

static int64_t attr_i(const Onnx__NodeProto *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_i ? a->i : def;
}

/* ints attribute into out (at most max); returns the count or -1 if absent. */
static int attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a)
        return -1;
    int k = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
    for (int i = 0; i < k; i++)
        out[i] = a->ints[i];
    return (int)a->n_ints;
}

static const char *in_name(const Onnx__NodeProto *n, size_t i)
{
    return i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

static val *in_val(ctx *C, const Onnx__NodeProto *n, size_t i)
{
    const char *nm = in_name(n, i);
    return nm ? vfind(C, nm) : NULL;
}

static val *out_val(ctx *C, const Onnx__NodeProto *n, size_t i)
{
    if (i >= n->n_output || !n->output[i] || !n->output[i][0])
        return NULL;
    return vget(C, n->output[i]);
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

/* Fills x from a TensorProto (initializer or Constant's value): small integer
 * tensors become foldable constants, the rest static tensors (shape only). */
static int set_from_tensor(ctx *C, val *x, const Onnx__TensorProto *tp, int weight)
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
            return oom(C);
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

static int set_const(ctx *C, val *x, int nd, const sym *shape, int n, const sym *data)
{
    sym *d = calloc((size_t)(n ? n : 1), sizeof *d);
    if (!d)
        return oom(C);
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

/* A static (non-activation) input of a node: constant, weight, or the output
 * of a Constant node or a folded subgraph. */
static int is_static(const val *x)
{
    return x && (x->kind == V_CONST || x->kind == V_STATIC);
}

/* ---- op emission helpers ------------------------------------------------------- */

/* Fuses one pointwise op into the producer of x, or emits elementwise. */
static int emit_pw(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int count, int own_reads)
{
    mtensor *T = &C->t[x->t];
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
    int in = materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *I = &C->t[in];
    int t = new_tensor(C, node_label(n), "pw", I->nd, I->dn, I->sz, C->nl);
    if (t < 0)
        return -1;
    if (add_line(C, C->t[t].name, "elementwise", 1, "%s", C->t[in].name) < 0)
        return -1;
    C->l[C->nl - 1].pw = count;
    bind_act(C, y, t);
    return 0;
}

static void consume(ctx *C, val *x)
{
    if (x && x->kind == V_ACT) {
        C->t[x->t].refs--;
        C->t[x->t].nread++;
    }
}

/* ---- broadcast ------------------------------------------------------------------ */

/* 1 when b broadcasts to a's logical shape (numpy rules). */
static int broadcasts_to(const val *b, const val *a)
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

static int same_shape(const val *a, const val *b)
{
    if (a->nd != b->nd)
        return 0;
    for (int i = 0; i < a->nd; i++)
        if (!sym_eq(a->shape[i], b->shape[i]))
            return 0;
    return 1;
}

/* ---- node helpers ------------------------------------------------------------ */

static int op_is(const Onnx__NodeProto *n, const char *op)
{
    return n->op_type && strcmp(n->op_type, op) == 0;
}

/* Whether the named value is (or will be, as a Constant's output) static. */
static int static_name(ctx *C, const char *name)
{
    val *x = name ? vfind(C, name) : NULL;
    if (!x)
        return 0;
    if (is_static(x))
        return 1;
    return x->prod >= 0 && op_is(C->g->node[x->prod], "Constant");
}

/* The single consumer of a value (node index), or -1. */
static int only_consumer(ctx *C, const char *name)
{
    val *x = name ? vfind(C, name) : NULL;
    if (!x || x->uses != 1)
        return -1;
    int vi = (int)(x - C->v);
    return C->ncons[vi] == 1 ? C->cons[vi][0] : -1;
}

static void absorb(ctx *C, int ni)
{
    const Onnx__NodeProto *n = C->g->node[ni];
    C->skip[ni] = 1;
    for (size_t i = 0; i < n->n_input; i++)
        consume(C, in_val(C, n, i));
}

static const char *out0(const Onnx__NodeProto *n)
{
    return n->n_output && n->output[0] && n->output[0][0] ? n->output[0] : NULL;
}

/* Node k has inputs (a, b) in either order, b static. */
static int binop_with_static(ctx *C, const Onnx__NodeProto *k, const char *a)
{
    if (k->n_input != 2 || !a)
        return 0;
    const char *i0 = in_name(k, 0), *i1 = in_name(k, 1);
    if (!i0 || !i1)
        return 0;
    return (strcmp(i0, a) == 0 && static_name(C, i1)) || (strcmp(i1, a) == 0 && static_name(C, i0));
}

/* Axes of a ReduceMean (attribute, or input 1 from opset 18). */
static int reduce_axes(ctx *C, const Onnx__NodeProto *n, int64_t *axes, int max)
{
    int k = attr_ints(n, "axes", axes, max);
    if (k < 0) {
        val *a = in_val(C, n, 1);
        if (!a)
            return -1;
        if (a->kind != V_CONST || a->ndata > max)
            return -2;
        for (int i = 0; i < a->ndata; i++) {
            if (!sym_is_const(a->data[i]))
                return -2;
            axes[i] = a->data[i].c;
        }
        k = a->ndata;
    }
    return k > max ? -2 : k;
}

static int norm_axis(int64_t a, int nd)
{
    if (a < 0)
        a += nd;
    return a >= 0 && a < nd ? (int)a : -1;
}

/* norm over logical axis j of x, keeping x's view; y is bound. */
static int emit_norm(ctx *C, const Onnx__NodeProto *n, val *x, int j, val *y)
{
    if (x->src[j] < 0)
        return unsupported(C, n, "normalization over a size-1 dim");
    mtensor *T = &C->t[x->t];
    int t = new_tensor(C, node_label(n), "norm", T->nd, T->dn, T->sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "norm", 0, "%s, axis=%d", C->t[x->t].name, x->src[j]) < 0)
        return -1;
    bind_view(C, y, t, x->nd, x->src);
    return 0;
}

/* The decomposed layer norm: ReduceMean -> Sub -> Pow -> ReduceMean -> Add
 * -> Sqrt -> Div [-> Mul(w) -> Add(b)]. 1 when matched and emitted. */
static int match_layernorm(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *r1 = C->g->node[ni];
    val *x = in_val(C, r1, 0);
    if (!x || x->kind != V_ACT || !out0(r1))
        return 0;
    int64_t axes[8];
    if (reduce_axes(C, r1, axes, 8) != 1 || norm_axis(axes[0], x->nd) != x->nd - 1)
        return 0;
    int isub = only_consumer(C, out0(r1));
    if (isub < 0)
        return 0;
    const Onnx__NodeProto *sub = C->g->node[isub];
    if (!op_is(sub, "Sub") || sub->n_input != 2 || !in_name(sub, 0) || !in_name(sub, 1)
        || strcmp(in_name(sub, 0), x->name) || strcmp(in_name(sub, 1), out0(r1)) || !out0(sub))
        return 0;
    val *d = vfind(C, out0(sub));
    if (!d)
        return 0;
    int di = (int)(d - C->v);
    if (d->uses != 2 || C->ncons[di] != 2)
        return 0;
    int ipow = C->cons[di][0], idiv = C->cons[di][1];
    if (op_is(C->g->node[idiv], "Pow")) {
        int tmp = ipow;
        ipow = idiv;
        idiv = tmp;
    }
    const Onnx__NodeProto *pw = C->g->node[ipow], *dv = C->g->node[idiv];
    if (!op_is(pw, "Pow") || !op_is(dv, "Div") || !in_name(pw, 0) || strcmp(in_name(pw, 0), d->name)
        || !static_name(C, in_name(pw, 1)) || !in_name(dv, 0) || strcmp(in_name(dv, 0), d->name))
        return 0;
    int ir2 = only_consumer(C, out0(pw));
    if (ir2 < 0 || !op_is(C->g->node[ir2], "ReduceMean"))
        return 0;
    int iadd = only_consumer(C, out0(C->g->node[ir2]));
    if (iadd < 0 || !op_is(C->g->node[iadd], "Add")
        || !binop_with_static(C, C->g->node[iadd], out0(C->g->node[ir2])))
        return 0;
    int isq = only_consumer(C, out0(C->g->node[iadd]));
    if (isq < 0 || !op_is(C->g->node[isq], "Sqrt"))
        return 0;
    if (only_consumer(C, out0(C->g->node[isq])) != idiv || !in_name(dv, 1)
        || strcmp(in_name(dv, 1), out0(C->g->node[isq])) || !out0(dv))
        return 0;
    int chain[9] = {isub, ipow, ir2, iadd, isq, idiv}, nc = 6;
    const char *last = out0(dv);
    int k = only_consumer(C, last);
    if (k >= 0 && op_is(C->g->node[k], "Mul") && binop_with_static(C, C->g->node[k], last) && out0(C->g->node[k])) {
        chain[nc++] = k;
        last = out0(C->g->node[k]);
        k = only_consumer(C, last);
    }
    if (k >= 0 && op_is(C->g->node[k], "Add") && binop_with_static(C, C->g->node[k], last) && out0(C->g->node[k])) {
        chain[nc++] = k;
        last = out0(C->g->node[k]);
    }
    for (int i = 0; i < nc; i++)
        absorb(C, chain[i]);
    val *y = vget(C, last);
    if (!y)
        return *rc = -1, 1;
    *rc = emit_norm(C, r1, x, x->nd - 1, y);
    if (C->info)
        C->info->nfused += nc;
    return 1;
}

/* Gelu as x * (erf(x / sqrt2) + 1) [* 0.5]: one pointwise op on x. */
static int match_gelu(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *dv = C->g->node[ni];
    val *x = in_val(C, dv, 0);
    if (!x || x->kind != V_ACT || !binop_with_static(C, dv, x->name) || !out0(dv))
        return 0;
    if (!static_name(C, in_name(dv, 1)))
        return 0;
    int ierf = only_consumer(C, out0(dv));
    if (ierf < 0 || !op_is(C->g->node[ierf], "Erf") || !out0(C->g->node[ierf]))
        return 0;
    int iadd = only_consumer(C, out0(C->g->node[ierf]));
    if (iadd < 0 || !op_is(C->g->node[iadd], "Add")
        || !binop_with_static(C, C->g->node[iadd], out0(C->g->node[ierf])) || !out0(C->g->node[iadd]))
        return 0;
    int imul = only_consumer(C, out0(C->g->node[iadd]));
    if (imul < 0)
        return 0;
    const Onnx__NodeProto *m = C->g->node[imul];
    if (!op_is(m, "Mul") || m->n_input != 2 || !in_name(m, 0) || !in_name(m, 1) || !out0(m))
        return 0;
    const char *a = in_name(m, 0), *b = in_name(m, 1), *s = out0(C->g->node[iadd]);
    if (!((strcmp(a, x->name) == 0 && strcmp(b, s) == 0) || (strcmp(b, x->name) == 0 && strcmp(a, s) == 0)))
        return 0;
    int chain[4] = {ierf, iadd, imul}, nc = 3;
    const char *last = out0(m);
    int k = only_consumer(C, last);
    if (k >= 0 && op_is(C->g->node[k], "Mul") && binop_with_static(C, C->g->node[k], last) && out0(C->g->node[k])) {
        chain[nc++] = k;
        last = out0(C->g->node[k]);
    }
    for (int i = 0; i < nc; i++)
        absorb(C, chain[i]);
    val *y = vget(C, last);
    if (!y)
        return *rc = -1, 1;
    *rc = emit_pw(C, dv, x, y, 1, 2);
    if (C->info)
        C->info->nfused += nc;
    return 1;
}

/* ---- constant folding -------------------------------------------------------- */

static int fold_binary(ctx *C, const Onnx__NodeProto *n, val *a, val *b, val *y)
{
    if (a->kind != V_CONST || b->kind != V_CONST) {
        /* float or large constants: only the shape is kept */
        const val *big = a->nd >= b->nd ? a : b;
        y->kind = V_STATIC;
        y->nd = big->nd;
        memcpy(y->shape, big->shape, sizeof y->shape);
        return 0;
    }
    int nn = a->ndata > b->ndata ? a->ndata : b->ndata;
    if ((a->ndata != nn && a->ndata != 1) || (b->ndata != nn && b->ndata != 1))
        return unsupported(C, n, "shape arithmetic on constants of %d and %d elements", a->ndata, b->ndata);
    sym out[MAX_CONST];
    for (int i = 0; i < nn; i++) {
        sym p = a->data[a->ndata == 1 ? 0 : i], q = b->data[b->ndata == 1 ? 0 : i], r;
        int bad = 0;
        if (op_is(n, "Mul"))
            bad = sym_mul(p, q, &r);
        else if (op_is(n, "Div")) {
            if (sym_is_const(p) && sym_is_const(q) && q.c != 0 && !(p.c == INT64_MIN && q.c == -1)) {
                r = S(p.c / q.c); /* integer division, as ONNX on int64 */
                if ((p.c % q.c != 0) && ((p.c < 0) != (q.c < 0)))
                    r.c -= 0; /* C truncates like ONNX's int division */
            } else
                bad = sym_div(p, q, &r);
        } else if (op_is(n, "Add") || op_is(n, "Sub")) {
            if (memcmp(p.e, q.e, sizeof p.e) != 0 && !(p.c == 0 || q.c == 0))
                bad = -1;
            else {
                r = p.c == 0 ? q : p;
                int64_t c;
                if (op_is(n, "Add") ? __builtin_add_overflow(p.c, q.c, &c) : __builtin_sub_overflow(p.c, q.c, &c))
                    bad = -1;
                else
                    r.c = c;
                if (p.c == 0 && op_is(n, "Sub"))
                    bad = -1;
            }
        } else
            bad = -1;
        if (bad)
            return unsupported(C, n, "shape arithmetic that does not fold to a monomial of the params");
        out[i] = r;
    }
    const val *big = a->ndata >= b->ndata ? a : b;
    return set_const(C, y, big->nd, big->shape, nn, out);
}

/* ---- ops --------------------------------------------------------------------- */

static int alias(ctx *C, val *x, val *y);

static int pads_sym(ctx *C, const Onnx__NodeProto *n, const sym *in, const int64_t *k,
                    const int64_t *s, int64_t *p)
{
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    const char *mode = ap && ap->has_s ? (const char *)ap->s.data : NULL;
    size_t ml = ap && ap->has_s ? ap->s.len : 0;
    int64_t pads[4] = {0, 0, 0, 0};
    if (mode && ml && !(ml == 6 && memcmp(mode, "NOTSET", 6) == 0)) {
        if (ml == 5 && memcmp(mode, "VALID", 5) == 0) {
            p[0] = p[1] = 0;
            return 0;
        }
        for (int i = 0; i < 2; i++) {
            int64_t h = sym_val(C, in[i]);
            int64_t o = (h + s[i] - 1) / s[i];
            int64_t tot = (o - 1) * s[i] + k[i] - h;
            if (tot < 0)
                tot = 0;
            if (tot % 2)
                return unsupported(C, n, "auto_pad %.*s needs asymmetric padding (the model format pads both sides equally)",
                                   (int)ml, mode);
            p[i] = tot / 2;
        }
        return 0;
    }
    int np = attr_ints(n, "pads", pads, 4);
    if (np >= 0 && np != 4)
        return unsupported(C, n, "pads with %d entries (expected 4)", np);
    if (pads[0] != pads[2] || pads[1] != pads[3])
        return unsupported(C, n, "asymmetric pads [%lld, %lld, %lld, %lld] (the model format pads both sides equally)",
                           (long long)pads[0], (long long)pads[1], (long long)pads[2], (long long)pads[3]);
    for (int i = 0; i < 2; i++) {
        if (pads[i] < 0 || pads[i] > (1 << 20))
            return unsupported(C, n, "pad %lld out of range", (long long)pads[i]);
        p[i] = pads[i];
    }
    return 0;
}

static int spatial_ok(ctx *C, const Onnx__NodeProto *n, const val *x, const char *what)
{
    if (x->nd != 4)
        return unsupported(C, n, "%s of a rank-%d tensor (only 2-D, NCHW)", what, x->nd);
    if (!sym_is_const(x->shape[2]) || !sym_is_const(x->shape[3]))
        return unsupported(C, n, "%s over a symbolic image size (export with a fixed height and width)", what);
    return 0;
}

static int window(ctx *C, const Onnx__NodeProto *n, const val *x, const int64_t *k, int64_t *s, int64_t *p,
                  int64_t *ho, int64_t *wo, int ceil_mode)
{
    int64_t d[2] = {1, 1};
    s[0] = s[1] = 1;
    int ns = attr_ints(n, "strides", s, 2), nd = attr_ints(n, "dilations", d, 2);
    if ((ns >= 0 && ns != 2) || (nd >= 0 && nd != 2))
        return unsupported(C, n, "strides or dilations not of 2 entries");
    if (d[0] != 1 || d[1] != 1)
        return unsupported(C, n, "dilations [%lld, %lld] (the model format has no dilated windows)",
                           (long long)d[0], (long long)d[1]);
    for (int i = 0; i < 2; i++)
        if (s[i] < 1 || s[i] > (1 << 20) || k[i] < 1 || k[i] > (1 << 20))
            return unsupported(C, n, "kernel or stride out of range");
    int r = pads_sym(C, n, &x->shape[2], k, s, p);
    if (r)
        return r;
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        p[i] += x->xpad[i];
        int64_t h = x->shape[2 + i].c + 2 * p[i] - k[i];
        if (h < 0)
            return unsupported(C, n, "window %lld larger than the padded input %lld", (long long)k[i],
                               (long long)(x->shape[2 + i].c + 2 * p[i]));
        if (ceil_mode && h % s[i]) {
            /* the partial last window: one more row of padding gives the
             * same output size when the stride allows it */
            if ((h + 2) / s[i] != h / s[i] + 1 || p[i] + 1 >= k[i])
                return unsupported(C, n, "ceil_mode=1 with an uneven window (the model format rounds down)");
            p[i]++;
            h += 2;
        }
        o[i] = h / s[i] + 1;
    }
    *ho = o[0];
    *wo = o[1];
    return 0;
}

static int op_conv(ctx *C, const Onnx__NodeProto *n, val *x, val *w, val *y)
{
    int r = spatial_ok(C, n, x, "Conv");
    if (r)
        return r;
    if (!is_static(w) || w->nd != 4)
        return unsupported(C, n, "the weight is not a static 4-D tensor");
    int64_t group = attr_i(n, "group", 1);
    if (group != 1)
        return unsupported(C, n, "group=%lld (%s convolution: the model format has no grouped conv)",
                           (long long)group, group == sym_val(C, x->shape[1]) ? "depthwise" : "grouped");
    int64_t k[2] = {w->shape[2].c, w->shape[3].c}, s[2], p[2], ho, wo;
    attr_ints(n, "kernel_shape", k, 2);
    if ((r = window(C, n, x, k, s, p, &ho, &wo, 0)))
        return r;
    if (!sym_eq(w->shape[1], x->shape[1]))
        return unsupported(C, n, "weight has %lld input channels, the input %lld", (long long)w->shape[1].c,
                           (long long)sym_val(C, x->shape[1]));
    int in = materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    char dn[4][SB_NAME_MAX];
    sym sz[4] = {X->sz[0], w->shape[0], S(ho), S(wo)};
    snprintf(dn[0], SB_NAME_MAX, "%s", X->dn[0]);
    recog_name(C, "channels", w->shape[0].c, dn[1]);
    snprintf(dn[2], SB_NAME_MAX, "%s", X->dn[2]);
    snprintf(dn[3], SB_NAME_MAX, "%s", X->dn[3]);
    if (!strcmp(dn[1], dn[0]) || !strcmp(dn[1], dn[2]) || !strcmp(dn[1], dn[3]))
        return unsupported(C, n, "output channel name '%s' clashes with the input's dims", dn[1]);
    char outs[64];
    sym_str(C, w->shape[0], outs, sizeof outs);
    int t = new_tensor(C, node_label(n), "conv", 4, dn, sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "conv", 1, "%s, out=%s, kernel=[%lld, %lld], stride=[%lld, %lld], pad=[%lld, %lld], dim=%s",
                          C->t[in].name, outs, (long long)k[0], (long long)k[1], (long long)s[0],
                          (long long)s[1], (long long)p[0], (long long)p[1], dn[1]) < 0)
        return -1;
    bind_act(C, y, t);
    return 0;
}

static int op_pool(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int avg)
{
    int r = spatial_ok(C, n, x, n->op_type);
    if (r)
        return r;
    int64_t k[2] = {1, 1}, s[2], p[2], ho, wo;
    if (attr_ints(n, "kernel_shape", k, 2) != 2)
        return unsupported(C, n, "kernel_shape missing or not 2-D");
    if ((r = window(C, n, x, k, s, p, &ho, &wo, (int)attr_i(n, "ceil_mode", 0))))
        return r;
    int in = materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    sym sz[4] = {X->sz[0], X->sz[1], S(ho), S(wo)};
    int t = new_tensor(C, node_label(n), "pool", 4, X->dn, sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "pool", 0, "%s, kernel=[%lld, %lld], stride=[%lld, %lld], pad=[%lld, %lld], type=%s",
                          C->t[in].name, (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                          (long long)p[0], (long long)p[1], avg ? "avg" : "max") < 0)
        return -1;
    bind_act(C, y, t);
    return 0;
}

/* reduce_mean over a mask of logical dims of x; keepdims keeps them as size 1. */
static int emit_reduce(ctx *C, const Onnx__NodeProto *n, val *x, uint32_t lmask, int keep, val *y)
{
    mtensor *T = &C->t[x->t];
    uint32_t tmask = 0;
    for (int i = 0; i < T->nd; i++) {
        int j = -1;
        for (int q = 0; q < x->nd; q++)
            if (x->src[q] == i)
                j = q;
        if (j < 0 || (lmask & (1u << j)))
            tmask |= 1u << i; /* reduced, or a dropped size-1 dim */
    }
    char dn[SB_MAX_DIMS][SB_NAME_MAX], axes[64] = "";
    sym sz[SB_MAX_DIMS];
    int newi[SB_MAX_DIMS], nd = 0;
    for (int i = 0; i < T->nd; i++) {
        if (tmask & (1u << i)) {
            newi[i] = -1;
            snprintf(axes + strlen(axes), sizeof axes - strlen(axes), "%s%d", axes[0] ? ", " : "", i);
        } else {
            newi[i] = nd;
            snprintf(dn[nd], SB_NAME_MAX, "%s", T->dn[i]);
            sz[nd++] = T->sz[i];
        }
    }
    if (nd == 0) {
        snprintf(dn[0], SB_NAME_MAX, "scalar");
        sz[0] = S(1);
        nd = 1;
    }
    int t = new_tensor(C, node_label(n), "mean", nd, dn, sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "reduce_mean", 0, "%s, axes=[%s]", C->t[x->t].name, axes) < 0)
        return -1;
    int8_t src[SB_MAX_DIMS];
    int ny = 0;
    for (int j = 0; j < x->nd; j++) {
        if (lmask & (1u << j)) {
            if (keep)
                src[ny++] = -1;
        } else {
            src[ny++] = (int8_t)(x->src[j] >= 0 ? newi[x->src[j]] : -1);
        }
    }
    bind_view(C, y, t, ny, src);
    return 0;
}

static void dense_dim(ctx *C, int64_t units, const mtensor *X, char *out)
{
    if (C->vocab && units == C->vocab)
        recog_name(C, "vocab", units, out);
    else if (C->embed && units == C->embed)
        recog_name(C, "embed", units, out);
    else
        gen_name(C, units, out);
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
        return unsupported(C, n, "matrix product of a rank-%d input with a weight (dense needs rank 2 to 7)", x->nd);
    int in = materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    char dn[SB_MAX_DIMS][SB_NAME_MAX];
    sym sz[SB_MAX_DIMS];
    for (int i = 0; i < X->nd; i++) {
        snprintf(dn[i], SB_NAME_MAX, "%s", X->dn[i]);
        sz[i] = X->sz[i];
    }
    dense_dim(C, sym_val(C, units), X, dn[X->nd - 1]);
    sz[X->nd - 1] = units;
    char us[64];
    sym_str(C, units, us, sizeof us);
    int r = X->nd;
    int t = new_tensor(C, node_label(n), "dense", r, dn, sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "dense", 1, "%s, units=%s, dim=%s", C->t[in].name, us,
                          C->t[t].dn[r - 1]) < 0)
        return -1;
    bind_act(C, y, t);
    return 0;
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
                int m = materialize(C, op[k], node_label(n));
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
                return unsupported(C, n, "too many distinct dims");
            sym sz = op[k]->shape[j];
            int inserted = op[k]->kind == V_ACT && op[k]->src[j] < 0;
            if (inserted)
                continue;
            if (have[L] && !sym_eq(lsz[L], sz))
                return unsupported(C, n, "dims of sizes %lld and %lld meet (broadcasting a real dim is not supported)",
                                   (long long)sym_val(C, lsz[L]), (long long)sym_val(C, sz));
            if (!have[L]) {
                const char *nm = op[k]->kind == V_ACT ? lname(C, op[k], j) : "";
                if (nm[0])
                    snprintf(lname_[L], SB_NAME_MAX, "%s", nm);
                else
                    gen_name(C, sym_val(C, sz), lname_[L]);
                lsz[L] = sz;
                have[L] = 1;
            }
            inop[k][L] = 1;
        }
    }
    /* distinct names for distinct labels */
    for (int L = 0; L < MAXL; L++)
        for (int M = 0; M < L; M++)
            if (have[L] && have[M] && strcmp(lname_[L], lname_[M]) == 0) {
                char base[82];
                snprintf(base, sizeof base, "%.80s", lname_[L]);
                for (int q = 2;; q++) {
                    snprintf(lname_[L], SB_NAME_MAX, "%s_%d", base, q);
                    int clash = 0;
                    for (int z = 0; z < MAXL; z++)
                        clash |= z != L && have[z] && strcmp(lname_[z], lname_[L]) == 0;
                    if (!clash)
                        break;
                }
                M = -1;
            }
    int onlya = 0, onlyb = 0, inout[MAXL] = {0};
    for (int i = 0; i < nout; i++)
        if (olab[i] >= 0 && olab[i] < MAXL && have[olab[i]]) {
            inout[olab[i]] = 1;
            onlya += inop[0][olab[i]] && !inop[1][olab[i]];
            onlyb += inop[1][olab[i]] && !inop[0][olab[i]];
        }
    for (int L = 0; L < MAXL; L++)
        if (have[L] && inop[0][L] != inop[1][L] && !inout[L])
            return unsupported(C, n, "sums over a dim of one operand only (not an einsum the model format has)");
    if (!onlya || !onlyb)
        return unsupported(C, n, "needs an output dim from each operand alone (the model format's einsum is a matrix product)");
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
                int t = new_tensor(C, op[k]->name, "w", op[k]->nd, dn, op[k]->shape, -1);
                if (t < 0)
                    return -1;
                for (int j = 0; j < op[k]->nd; j++) {
                    char s[64];
                    sym_str(C, op[k]->shape[j], s, sizeof s);
                    snprintf(decl + strlen(decl), sizeof decl - strlen(decl), "%s%s=%s", j ? ", " : "", dn[j], s);
                }
                if (add_line(C, "", "", 0, "weight %s[%s]", C->t[t].name, decl) < 0)
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
    /* read only by a Transpose: write the output in that order, so the
     * transpose is a view and needs no op */
    int tr = y && y->name ? only_consumer(C, y->name) : -1;
    if (tr >= 0 && all && op_is(C->g->node[tr], "Transpose")) {
        int64_t perm[SB_MAX_DIMS];
        int np = attr_ints(C->g->node[tr], "perm", perm, SB_MAX_DIMS);
        uint32_t seen = 0;
        int ok = np == nout;
        for (int i = 0; ok && i < np; i++) {
            ok = perm[i] >= 0 && perm[i] < nout && !(seen & (1u << perm[i]));
            seen |= ok ? 1u << perm[i] : 0;
        }
        for (int i = 0; ok && i < np; i++)
            order[i] = (int)perm[i];
    }
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
    int t = new_tensor(C, node_label(n), "einsum", nd, dn, sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "einsum", 1, "\"%s, %s -> %s\", %s, %s", eq[0], eq[1], eq[2],
                          C->t[opt[0]].name, C->t[opt[1]].name) < 0)
        return -1;
    bind_view(C, y, t, nout, src);
    return 0;
}

/* MatMul / Gemm of two operands, as dense (weight of rank 2) or einsum. */
static int op_matmul(ctx *C, const Onnx__NodeProto *n, val *a, val *b, int transA, int transB, val *y)
{
    if (a->kind != V_ACT && b->kind != V_ACT)
        return unsupported(C, n, "product of two constants");
    if (a->nd < 1 || b->nd < 1 || a->nd > SB_MAX_DIMS || b->nd > SB_MAX_DIMS)
        return unsupported(C, n, "operands of rank %d and %d", a->nd, b->nd);
    if (transA)
        return unsupported(C, n, "transA=1");
    if (a->kind == V_ACT && is_static(b) && b->nd == 2) {
        sym k = b->shape[transB ? 1 : 0], units = b->shape[transB ? 0 : 1];
        if (!sym_eq(k, a->shape[a->nd - 1]))
            return unsupported(C, n, "inner dims %lld and %lld differ", (long long)sym_val(C, a->shape[a->nd - 1]),
                               (long long)sym_val(C, k));
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
    const Onnx__AttributeProto *ea = attr(n, "equation");
    if (!ea || !ea->has_s || n->n_input != 2)
        return unsupported(C, n, "needs an equation and exactly two inputs");
    char eqs[256];
    snprintf(eqs, sizeof eqs, "%.*s", (int)(ea->s.len < 255 ? ea->s.len : 255), (const char *)ea->s.data);
    int lab[3][SB_MAX_DIMS], nl[3] = {0, 0, 0}, part = 0, explicit_out = 0, count[26] = {0};
    for (const char *p = eqs; *p; p++) {
        char ch = *p;
        if (ch == ' ')
            continue;
        if (ch == ',') {
            if (part != 0)
                return unsupported(C, n, "equation '%s' is not of two operands", eqs);
            part = 1;
        } else if (ch == '-' && p[1] == '>') {
            if (part != 1)
                return unsupported(C, n, "equation '%s' is not of two operands", eqs);
            part = 2;
            explicit_out = 1;
            p++;
        } else if (ch >= 'a' && ch <= 'z') {
            if (nl[part] == SB_MAX_DIMS)
                return unsupported(C, n, "more than %d dims in equation '%s'", SB_MAX_DIMS, eqs);
            for (int i = 0; i < nl[part]; i++)
                if (lab[part][i] == ch - 'a')
                    return unsupported(C, n, "repeated index in one operand of '%s' (diagonals)", eqs);
            lab[part][nl[part]++] = ch - 'a';
            if (part < 2)
                count[ch - 'a']++;
        } else {
            return unsupported(C, n, "equation '%s' (only lower-case indices, no '...')", eqs);
        }
    }
    if (part < 1)
        return unsupported(C, n, "equation '%s' is not of two operands", eqs);
    if (!explicit_out)
        for (int L = 0; L < 26; L++)
            if (count[L] == 1 && nl[2] < SB_MAX_DIMS)
                lab[2][nl[2]++] = L;
    if (nl[0] != a->nd || nl[1] != b->nd)
        return unsupported(C, n, "equation '%s' does not match ranks %d and %d", eqs, a->nd, b->nd);
    if (a->kind != V_ACT && b->kind != V_ACT)
        return unsupported(C, n, "einsum of two constants");
    val *ops[2] = {a, b};
    return emit_einsum(C, n, ops, nl, (const int(*)[SB_MAX_DIMS])lab, nl[2], lab[2], y);
}

/* ---- reshapes and views ---------------------------------------------------- */

static int is_one(sym s)
{
    return s.c == 1 && sym_is_const(s);
}

/* Names of a reshape's output dims: dims kept at either end keep their
 * names; an `embed` split in two gives `heads` and a generated name; a merge
 * back to the embedding width is `embed`; the rest are generated. */
static void reshape_names(ctx *C, const mtensor *X, int nd, const sym *sz, char dn[][SB_NAME_MAX])
{
    int pre = 0, suf = 0;
    while (pre < nd && pre < X->nd && sym_eq(sz[pre], X->sz[pre]))
        pre++;
    while (suf < nd - pre && suf < X->nd - pre && sym_eq(sz[nd - 1 - suf], X->sz[X->nd - 1 - suf]))
        suf++;
    for (int i = 0; i < pre; i++)
        snprintf(dn[i], SB_NAME_MAX, "%s", X->dn[i]);
    for (int i = 0; i < suf; i++)
        snprintf(dn[nd - 1 - i], SB_NAME_MAX, "%s", X->dn[X->nd - 1 - i]);
    int omid = nd - pre - suf, imid = X->nd - pre - suf;
    for (int i = pre; i < nd - suf; i++) {
        int64_t v = sym_val(C, sz[i]);
        if (omid == 1 && C->embed && v == C->embed)
            recog_name(C, "embed", v, dn[i]);
        else if (omid == 2 && imid == 1 && i == pre && v > 1 && sym_val(C, sz[i + 1]) > 1
                 && C->embed && sym_val(C, X->sz[pre]) == C->embed)
            recog_name(C, "heads", v, dn[i]);
        else if (is_one(sz[i]))
            snprintf(dn[i], SB_NAME_MAX, "one");
        else
            gen_name(C, v, dn[i]);
    }
    uniq_dims(nd, dn);
}

/* y = x reshaped to the logical shape sz: a view when only size-1 dims come
 * or go, else a reshape op. */
static int emit_reshape(ctx *C, const Onnx__NodeProto *n, val *x, int nd, const sym *sz, val *y)
{
    if (nd < 1 || nd > SB_MAX_DIMS)
        return unsupported(C, n, "reshape to rank %d", nd);
    int64_t a = shape_numel(C, x->nd, x->shape), b = shape_numel(C, nd, sz);
    if (a < 0 || a != b)
        return unsupported(C, n, "reshape of %lld elements to %lld", (long long)a, (long long)b);
    /* the non-1 dims in order: equal -> a view */
    int xi[SB_MAX_DIMS], nx = 0, yi[SB_MAX_DIMS], ny = 0;
    for (int j = 0; j < x->nd; j++)
        if (!is_one(x->shape[j]))
            xi[nx++] = j;
    for (int j = 0; j < nd; j++)
        if (!is_one(sz[j]))
            yi[ny++] = j;
    int same = nx == ny;
    for (int i = 0; same && i < nx; i++)
        same = sym_eq(x->shape[xi[i]], sz[yi[i]]);
    if (same) {
        int8_t src[SB_MAX_DIMS];
        for (int j = 0; j < nd; j++)
            src[j] = -1;
        for (int i = 0; i < ny; i++)
            src[yi[i]] = x->src[xi[i]];
        bind_view(C, y, x->t, nd, src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    int in = materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    char dn[SB_MAX_DIMS][SB_NAME_MAX], shape[1024] = "";
    reshape_names(C, &C->t[in], nd, sz, dn);
    for (int j = 0; j < nd; j++) {
        char s[128];
        sym_str(C, sz[j], s, sizeof s);
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%s=%s", j ? ", " : "", dn[j], s);
    }
    int t = new_tensor(C, node_label(n), "reshape", nd, dn, sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "reshape", 0, "%s, shape=[%s]", C->t[in].name, shape) < 0)
        return -1;
    bind_act(C, y, t);
    return 0;
}

/* The target shape of a Reshape (0 copies, -1 is inferred). */
static int reshape_target(ctx *C, const Onnx__NodeProto *n, val *x, val *s, int *nd, sym *sz)
{
    if (!s || s->kind != V_CONST || s->nd != 1)
        return unsupported(C, n, "the shape is not a constant (or a shape subgraph that folds)");
    if (s->ndata < 1 || s->ndata > SB_MAX_DIMS)
        return unsupported(C, n, "reshape to rank %d", s->ndata);
    int infer = -1;
    sym known = S(1);
    int allowzero = (int)attr_i(n, "allowzero", 0);
    for (int i = 0; i < s->ndata; i++) {
        sym d = s->data[i];
        if (sym_is_const(d) && d.c == 0 && !allowzero) {
            if (i >= x->nd)
                return unsupported(C, n, "shape copies dim %d of a rank-%d input", i, x->nd);
            d = x->shape[i];
        } else if (sym_is_const(d) && d.c == -1) {
            if (infer >= 0)
                return unsupported(C, n, "two -1 in the shape");
            infer = i;
            continue;
        } else if (d.c <= 0) {
            return unsupported(C, n, "shape entry %lld", (long long)d.c);
        }
        sz[i] = d;
        if (sym_mul(known, d, &known))
            return unsupported(C, n, "shape too large");
    }
    if (infer >= 0) {
        sym total = S(1);
        for (int j = 0; j < x->nd; j++)
            if (sym_mul(total, x->shape[j], &total))
                return unsupported(C, n, "shape too large");
        if (sym_div(total, known, &sz[infer]))
            return unsupported(C, n, "cannot infer the -1 of the shape as a product of params");
    }
    *nd = s->ndata;
    return 0;
}

static int op_flatten(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t ax = attr_i(n, "axis", 1);
    if (ax < 0)
        ax += x->nd;
    if (ax < 0 || ax > x->nd)
        return unsupported(C, n, "axis %lld out of range", (long long)ax);
    sym sz[2] = {S(1), S(1)};
    for (int j = 0; j < x->nd; j++)
        if (sym_mul(sz[j >= ax], x->shape[j], &sz[j >= ax]))
            return unsupported(C, n, "size too large");
    return emit_reshape(C, n, x, 2, sz, y);
}

static int get_axes(ctx *C, const Onnx__NodeProto *n, int64_t *axes, int *na)
{
    int k = attr_ints(n, "axes", axes, SB_MAX_DIMS);
    if (k >= 0) {
        *na = k;
        return k > SB_MAX_DIMS ? -1 : 0;
    }
    val *a = in_val(C, n, 1);
    if (!a) {
        *na = -1;
        return 0;
    }
    if (a->kind != V_CONST || a->ndata > SB_MAX_DIMS)
        return -1;
    for (int i = 0; i < a->ndata; i++)
        axes[i] = a->data[i].c;
    *na = a->ndata;
    return 0;
}

/* Squeeze / Unsqueeze on an activation (a view) or a constant (its shape). */
static int op_squeeze(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int unsq)
{
    int64_t axes[SB_MAX_DIMS];
    int na;
    if (get_axes(C, n, axes, &na))
        return unsupported(C, n, "axes are not a small constant");
    int ond = unsq ? x->nd + (na < 0 ? 0 : na) : x->nd;
    uint32_t mask = 0;
    if (na < 0) {
        if (unsq)
            return unsupported(C, n, "Unsqueeze without axes");
        for (int j = 0; j < x->nd; j++)
            if (is_one(x->shape[j]))
                mask |= 1u << j;
    }
    for (int i = 0; i < na; i++) {
        int a = norm_axis(axes[i], ond);
        if (a < 0 || a >= SB_MAX_DIMS)
            return unsupported(C, n, "axis %lld out of range", (long long)axes[i]);
        if (!unsq && !is_one(x->shape[a]))
            return unsupported(C, n, "squeezes dim %d of size %lld", a, (long long)sym_val(C, x->shape[a]));
        mask |= 1u << a;
    }
    if (unsq && ond > SB_MAX_DIMS)
        return unsupported(C, n, "more than %d dims", SB_MAX_DIMS);
    sym shape[SB_MAX_DIMS];
    int8_t src[SB_MAX_DIMS];
    int k = 0, q = 0;
    if (unsq) {
        for (int j = 0; j < ond; j++) {
            if (mask & (1u << j)) {
                shape[k] = S(1);
                src[k++] = -1;
            } else {
                shape[k] = x->shape[q];
                src[k++] = x->kind == V_ACT ? x->src[q] : 0;
                q++;
            }
        }
    } else {
        for (int j = 0; j < x->nd; j++)
            if (!(mask & (1u << j))) {
                shape[k] = x->shape[j];
                src[k++] = x->kind == V_ACT ? x->src[j] : 0;
            }
    }
    if (x->kind == V_ACT) {
        bind_view(C, y, x->t, k, src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    if (x->kind == V_CONST)
        return set_const(C, y, k, shape, x->ndata, x->data);
    y->kind = V_STATIC;
    y->nd = k;
    memcpy(y->shape, shape, sizeof shape);
    return 0;
}

static int op_transpose(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t perm[SB_MAX_DIMS];
    int np = attr_ints(n, "perm", perm, SB_MAX_DIMS);
    if (np < 0) {
        np = x->nd;
        for (int j = 0; j < np; j++)
            perm[j] = np - 1 - j;
    }
    if (np != x->nd)
        return unsupported(C, n, "perm of %d entries for rank %d", np, x->nd);
    uint32_t seen = 0;
    for (int j = 0; j < np; j++) {
        if (perm[j] < 0 || perm[j] >= np || (seen & (1u << perm[j])))
            return unsupported(C, n, "perm is not a permutation");
        seen |= 1u << perm[j];
    }
    sym shape[SB_MAX_DIMS];
    int8_t src[SB_MAX_DIMS];
    for (int j = 0; j < np; j++) {
        shape[j] = x->shape[perm[j]];
        src[j] = x->kind == V_ACT ? x->src[perm[j]] : 0;
    }
    if (x->kind == V_ACT) {
        bind_view(C, y, x->t, np, src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    y->kind = V_STATIC;
    y->nd = np;
    memcpy(y->shape, shape, sizeof shape);
    return 0;
}

/* ---- multi-input ops ---------------------------------------------------------- */

static int op_concat(ctx *C, const Onnx__NodeProto *n, val *y)
{
    int64_t ax = attr_i(n, "axis", 0);
    int nin = (int)n->n_input, nconst = 0, nact = 0;
    if (nin < 1)
        return unsupported(C, n, "no inputs");
    if (nin > 1024)
        return unsupported(C, n, "more than 1024 inputs");
    for (int i = 0; i < nin; i++) {
        val *x = in_val(C, n, (size_t)i);
        if (!x)
            return unsupported(C, n, "empty input name");
        nconst += x->kind == V_CONST;
        nact += x->kind == V_ACT;
    }
    if (nconst == nin) {
        sym out[MAX_CONST];
        int k = 0;
        for (int i = 0; i < nin; i++) {
            val *x = in_val(C, n, (size_t)i);
            if (x->nd != 1 || k + x->ndata > MAX_CONST)
                return unsupported(C, n, "folds only 1-D constants");
            memcpy(out + k, x->data, (size_t)x->ndata * sizeof *out);
            k += x->ndata;
        }
        sym shape = S(k);
        return set_const(C, y, 1, &shape, k, out);
    }
    if (nact != nin)
        return unsupported(C, n, "concatenates activations with constants");
    val *x0 = in_val(C, n, 0);
    if (nin == 1)
        return alias(C, x0, y);
    int a = norm_axis(ax, x0->nd);
    if (a < 0)
        return unsupported(C, n, "axis %lld out of range", (long long)ax);
    for (int i = 1; i < nin; i++) {
        val *x = in_val(C, n, (size_t)i);
        if (x->nd != x0->nd)
            return unsupported(C, n, "inputs of different ranks");
        for (int j = 0; j < x0->nd; j++)
            if (j != a && !sym_eq(x->shape[j], x0->shape[j]))
                return unsupported(C, n, "inputs differ outside the axis");
        if (memcmp(x->shape[a].e, x0->shape[a].e, sizeof x0->shape[a].e) != 0)
            return unsupported(C, n, "sizes along the axis do not add up as params");
    }
    /* at most 16 inputs per concat: more are chained, 15 at a time */
    int acc = -1;
    for (int i = 0; i < nin;) {
        char args[SB_MAX_IO * (SB_NAME_MAX + 2)] = "";
        int first = acc, k = 0;
        sym total = S(0);
        if (acc >= 0) {
            snprintf(args, sizeof args, "%s", C->t[acc].name);
            total = C->t[acc].sz[a];
            k = 1;
        } else {
            total = x0->shape[a];
            total.c = 0;
        }
        for (; i < nin && k < SB_MAX_IO; i++, k++) {
            val *x = in_val(C, n, (size_t)i);
            int t = materialize(C, x, node_label(n));
            if (t < 0)
                return -1;
            if (first < 0)
                first = t;
            total.c += x->shape[a].c;
            snprintf(args + strlen(args), sizeof args - strlen(args), "%s%s", k ? ", " : "", C->t[t].name);
        }
        sym sz[SB_MAX_DIMS];
        memcpy(sz, C->t[first].sz, sizeof sz);
        sz[a] = total;
        int t = new_tensor(C, node_label(n), "concat", C->t[first].nd, C->t[first].dn, sz, C->nl);
        if (t < 0 || add_line(C, C->t[t].name, "concat", 0, "%s, axis=%d", args, a) < 0)
            return -1;
        acc = t;
    }
    bind_act(C, y, acc);
    return 0;
}

/* An even split of logical axis a of x into `parts`; the outputs' tensors
 * are first..first+parts-1 (cached per value and axis). */
static int even_split(ctx *C, const Onnx__NodeProto *n, val *x, int a, int parts, int *first)
{
    for (int i = 0; i < C->nsplits; i++)
        if (C->splits[i].v == x->name && C->splits[i].axis == a && C->splits[i].parts == parts) {
            *first = C->splits[i].first;
            return 0;
        }
    if (parts < 2 || parts > SB_MAX_IO)
        return unsupported(C, n, "split into %d parts (1 < parts <= %d)", parts, SB_MAX_IO);
    if (x->src[a] < 0)
        return unsupported(C, n, "split of a size-1 dim");
    mtensor *T = &C->t[x->t];
    int ta = x->src[a];
    sym part;
    if (sym_div(T->sz[ta], S(parts), &part))
        return unsupported(C, n, "dim of size %lld does not split into %d", (long long)sym_val(C, T->sz[ta]), parts);
    char lhs[SB_NAME_MAX * 17] = "";
    int f = -1;
    for (int k = 0; k < parts; k++) {
        sym sz[SB_MAX_DIMS];
        T = &C->t[x->t];
        memcpy(sz, T->sz, sizeof sz);
        sz[ta] = part;
        char nm[SB_NAME_MAX + 16];
        snprintf(nm, sizeof nm, "%s_%d", node_label(n), k);
        int t = new_tensor(C, nm, "part", T->nd, T->dn, sz, C->nl);
        if (t < 0)
            return -1;
        if (f < 0)
            f = t;
        snprintf(lhs + strlen(lhs), sizeof lhs - strlen(lhs), "%s%s", k ? ", " : "", C->t[t].name);
    }
    if (add_line(C, lhs, "split", 0, "%s, n=%d, axis=%d", C->t[x->t].name, parts, ta) < 0)
        return -1;
    if (C->nsplits < 64) {
        C->splits[C->nsplits].v = x->name;
        C->splits[C->nsplits].axis = a;
        C->splits[C->nsplits].parts = parts;
        C->splits[C->nsplits++].first = f;
    }
    *first = f;
    return 0;
}

static int op_split(ctx *C, const Onnx__NodeProto *n, val *x)
{
    int64_t ax = attr_i(n, "axis", 0);
    int a = norm_axis(ax, x->nd);
    if (a < 0)
        return unsupported(C, n, "axis %lld out of range", (long long)ax);
    int parts = (int)n->n_output;
    int64_t sizes[SB_MAX_IO + 1];
    int ns = attr_ints(n, "split", sizes, SB_MAX_IO + 1);
    if (ns < 0) {
        val *s = in_val(C, n, 1);
        if (s) {
            if (s->kind != V_CONST || s->ndata > SB_MAX_IO + 1)
                return unsupported(C, n, "split sizes are not a constant");
            ns = s->ndata;
            for (int i = 0; i < ns; i++)
                sizes[i] = sym_val(C, s->data[i]);
        }
    }
    if (ns >= 0) {
        if (ns != parts)
            return unsupported(C, n, "%d split sizes for %d outputs", ns, parts);
        for (int i = 1; i < ns; i++)
            if (sizes[i] != sizes[0])
                return unsupported(C, n, "uneven split sizes (the model format splits evenly)");
    }
    int first;
    int r = even_split(C, n, x, a, parts, &first);
    if (r)
        return r;
    for (int k = 0; k < parts; k++) {
        val *y = out_val(C, n, (size_t)k);
        if (y)
            bind_view(C, y, first + k, x->nd, x->src);
    }
    return 0;
}

static int slice_params(ctx *C, const Onnx__NodeProto *n, int64_t *st, int64_t *en, int64_t *ax, int64_t *sp, int *k)
{
    if (C->opset < 10) {
        int a = attr_ints(n, "starts", st, SB_MAX_DIMS), b = attr_ints(n, "ends", en, SB_MAX_DIMS);
        int c = attr_ints(n, "axes", ax, SB_MAX_DIMS);
        if (a < 0 || a != b || a > SB_MAX_DIMS)
            return -1;
        if (c < 0)
            for (int i = 0; i < a; i++)
                ax[i] = i;
        for (int i = 0; i < a; i++)
            sp[i] = 1;
        *k = a;
        return 0;
    }
    val *v[4] = {in_val(C, n, 1), in_val(C, n, 2), in_val(C, n, 3), in_val(C, n, 4)};
    int64_t *dst[4] = {st, en, ax, sp};
    if (!v[0] || !v[1] || v[0]->kind != V_CONST || v[1]->kind != V_CONST || v[0]->ndata != v[1]->ndata
        || v[0]->ndata > SB_MAX_DIMS)
        return -1;
    *k = v[0]->ndata;
    for (int q = 0; q < 4; q++) {
        if (!v[q]) {
            for (int i = 0; i < *k; i++)
                dst[q][i] = q == 2 ? i : 1;
            continue;
        }
        if (v[q]->kind != V_CONST || v[q]->ndata != *k)
            return -1;
        for (int i = 0; i < *k; i++) {
            if (!sym_is_const(v[q]->data[i]))
                return -1;
            dst[q][i] = v[q]->data[i].c;
        }
    }
    return 0;
}

static void clamp_range(int64_t d, int64_t *s, int64_t *e)
{
    if (*s < 0)
        *s += d;
    if (*e < 0)
        *e += d;
    if (*s < 0)
        *s = 0;
    if (*s > d)
        *s = d;
    if (*e < 0)
        *e = 0;
    if (*e > d)
        *e = d;
}

static int op_slice(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t st[SB_MAX_DIMS], en[SB_MAX_DIMS], ax[SB_MAX_DIMS], sp[SB_MAX_DIMS];
    int k;
    if (slice_params(C, n, st, en, ax, sp, &k))
        return unsupported(C, n, "starts/ends/axes/steps are not constants");
    if (x->kind == V_CONST) {
        if (x->nd != 1 || k != 1 || sp[0] != 1 || norm_axis(ax[0], 1) != 0)
            return unsupported(C, n, "folds only 1-D constants with step 1");
        int64_t s = st[0], e = en[0];
        clamp_range(x->ndata, &s, &e);
        int cnt = e > s ? (int)(e - s) : 0;
        sym shape = S(cnt);
        return set_const(C, y, 1, &shape, cnt, x->data + s);
    }
    if (x->kind != V_ACT)
        return unsupported(C, n, "slice of a static tensor");
    int axis = -1, parts = 0, idx = 0;
    for (int i = 0; i < k; i++) {
        int a = norm_axis(ax[i], x->nd);
        if (a < 0)
            return unsupported(C, n, "axis %lld out of range", (long long)ax[i]);
        if (!sym_is_const(x->shape[a]))
            return unsupported(C, n, "slice of a symbolic dim");
        int64_t d = x->shape[a].c, s = st[i], e = en[i];
        clamp_range(d, &s, &e);
        if (s == 0 && e == d && sp[i] == 1)
            continue;
        if (sp[i] != 1 || axis >= 0)
            return unsupported(C, n, "not an even split of one axis (steps, or several axes)");
        int64_t len = e - s;
        if (len <= 0 || d % len || s % len)
            return unsupported(C, n, "slice [%lld, %lld) of a dim of %lld is not an even split", (long long)s,
                               (long long)e, (long long)d);
        axis = a;
        parts = (int)(d / len);
        idx = (int)(s / len);
    }
    if (axis < 0) {
        bind_view(C, y, x->t, x->nd, x->src);
        return 0;
    }
    int first, r = even_split(C, n, x, axis, parts, &first);
    if (r)
        return r;
    bind_view(C, y, first + idx, x->nd, x->src);
    return 0;
}

static int op_gather(ctx *C, const Onnx__NodeProto *n, val *d, val *ix, val *y)
{
    int64_t ax = attr_i(n, "axis", 0);
    if (d->kind == V_CONST && ix->kind == V_CONST) {
        if (d->nd != 1 || norm_axis(ax, 1) != 0)
            return unsupported(C, n, "folds only gathers from 1-D constants");
        sym out[MAX_CONST];
        for (int i = 0; i < ix->ndata; i++) {
            int64_t k = ix->data[i].c;
            if (!sym_is_const(ix->data[i]) || k < -d->ndata || k >= d->ndata)
                return unsupported(C, n, "index %lld out of range", (long long)k);
            out[i] = d->data[k < 0 ? k + d->ndata : k];
        }
        return set_const(C, y, ix->nd, ix->shape, ix->ndata, out);
    }
    if (is_static(d) && ix->kind == V_ACT) {
        if (d->nd != 2 || norm_axis(ax, 2) != 0)
            return unsupported(C, n, "gather from a rank-%d table or along axis %lld (only embedding lookups)",
                               d->nd, (long long)ax);
        if (ix->nd < 1 || ix->nd > SB_MAX_DIMS - 2)
            return unsupported(C, n, "indices of rank %d", ix->nd);
        int in = materialize(C, ix, node_label(n));
        if (in < 0)
            return -1;
        mtensor *X = &C->t[in];
        char dn[SB_MAX_DIMS][SB_NAME_MAX], vn[SB_NAME_MAX];
        sym sz[SB_MAX_DIMS];
        int64_t V = sym_val(C, d->shape[0]), E = sym_val(C, d->shape[1]);
        if (!C->embed)
            C->embed = E;
        if (!C->vocab)
            C->vocab = V;
        for (int i = 0; i < X->nd; i++) {
            snprintf(dn[i], SB_NAME_MAX, "%s", X->dn[i]);
            sz[i] = X->sz[i];
        }
        recog_name(C, E == C->embed ? "embed" : "embed_2", E, dn[X->nd]);
        recog_name(C, V == C->vocab ? "vocab" : "vocab_2", V, vn);
        sz[X->nd] = d->shape[1];
        char vs[64], es[64];
        sym_str(C, d->shape[0], vs, sizeof vs);
        sym_str(C, d->shape[1], es, sizeof es);
        int r = X->nd;
        int t = new_tensor(C, node_label(n), "embedding", r + 1, dn, sz, C->nl);
        if (t < 0 || add_line(C, C->t[t].name, "embedding", 0, "%s, vocab=%s, size=%s, dim=%s, vocab_dim=%s",
                              C->t[in].name, vs, es, C->t[t].dn[r], vn) < 0)
            return -1;
        bind_act(C, y, t);
        return 0;
    }
    return unsupported(C, n, "gather from an activation (only embedding lookups in a weight, or shape arithmetic)");
}

static int op_lstm(ctx *C, const Onnx__NodeProto *n, val *x, val *w, val *y)
{
    const Onnx__AttributeProto *dir = attr(n, "direction");
    if (dir && dir->has_s && !(dir->s.len == 7 && memcmp(dir->s.data, "forward", 7) == 0))
        return unsupported(C, n, "direction %.*s (only forward)", (int)(dir->s.len < 40 ? dir->s.len : 40),
                           (const char *)dir->s.data);
    if (x->nd != 3 || !is_static(w) || w->nd != 3)
        return unsupported(C, n, "input of rank %d or a weight that is not a static 3-D tensor", x->nd);
    int64_t H = attr_i(n, "hidden_size", w->shape[1].c / 4);
    int layout = (int)attr_i(n, "layout", 0);
    if (!sym_eq(x->shape[2], S(H)))
        return unsupported(C, n, "hidden size %lld differs from the input width %lld (the model format's lstm keeps the width)",
                           (long long)H, (long long)sym_val(C, x->shape[2]));
    if (attr(n, "activations") || attr(n, "clip") || attr_i(n, "input_forget", 0))
        return unsupported(C, n, "custom activations, clip or input_forget");
    val v = *x; /* the input as (batch, seq, units) */
    if (!layout) {
        v.src[0] = x->src[1];
        v.src[1] = x->src[0];
        v.shape[0] = x->shape[1];
        v.shape[1] = x->shape[0];
    }
    v.mat = -1;
    int in = materialize(C, &v, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    int t = new_tensor(C, node_label(n), "lstm", 3, X->dn, X->sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "lstm", 0, "%s", C->t[in].name) < 0)
        return -1;
    if (y) {
        int8_t src0[4] = {1, -1, 0, 2}, src1[4] = {0, 1, -1, 2};
        bind_view(C, y, t, 4, layout ? src1 : src0);
    }
    for (size_t k = 1; k < 3; k++) {
        val *o = out_val(C, n, k);
        if (o) {
            o->kind = V_UNAVAIL;
            o->why = "the LSTM's last hidden or cell state (the model format's lstm has one output)";
        }
    }
    return 0;
}

/* Softmax / LogSoftmax over one logical axis: keeps x's view. */
static int op_softmax(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t ax = attr_i(n, "axis", C->opset >= 13 ? -1 : 1);
    int a = norm_axis(ax, x->nd);
    if (a < 0)
        return unsupported(C, n, "axis %lld out of range", (long long)ax);
    if (C->opset < 13 && a != x->nd - 1)
        return unsupported(C, n, "axis %d before opset 13 (softmax over flattened trailing dims)", a);
    if (x->src[a] < 0)
        return unsupported(C, n, "softmax over a size-1 dim");
    mtensor *T = &C->t[x->t];
    int t = new_tensor(C, node_label(n), "softmax", T->nd, T->dn, T->sz, C->nl);
    if (t < 0 || add_line(C, C->t[t].name, "softmax", 0, "%s, axis=%d", C->t[x->t].name, x->src[a]) < 0)
        return -1;
    C->l[C->nl - 1].sm_axis = x->src[a];
    C->l[C->nl - 1].in = x->t;
    bind_view(C, y, t, x->nd, x->src);
    return 0;
}

/* Add, Sub, Mul, Div (and Pow with a constant exponent). */
static int op_binary(ctx *C, const Onnx__NodeProto *n, val *a, val *b, val *y)
{
    if (is_static(a) && is_static(b))
        return fold_binary(C, n, a, b, y);
    if (a->kind == V_ACT && b->kind == V_ACT) {
        if (op_is(n, "Pow"))
            return unsupported(C, n, "power of two activations");
        if (same_shape(a, b)) {
            int ta = materialize(C, a, node_label(n)), tb = materialize(C, b, node_label(n));
            if (ta < 0 || tb < 0)
                return -1;
            mtensor *A = &C->t[ta];
            int t = new_tensor(C, node_label(n), "add", A->nd, A->dn, A->sz, C->nl);
            if (t < 0 || add_line(C, C->t[t].name, "add", 1, "%s, %s", C->t[ta].name, C->t[tb].name) < 0)
                return -1;
            bind_act(C, y, t);
            return 0;
        }
        /* broadcast: a pointwise op on the larger operand */
        if (broadcasts_to(b, a))
            return emit_pw(C, n, a, y, 1, 1 + (a->t == b->t));
        if (broadcasts_to(a, b))
            return emit_pw(C, n, b, y, 1, 1 + (a->t == b->t));
        return unsupported(C, n, "operands of shapes that do not broadcast one way");
    }
    val *x = a->kind == V_ACT ? a : b, *c = a->kind == V_ACT ? b : a;
    if (!broadcasts_to(c, x))
        return unsupported(C, n, "a constant that does not broadcast to the activation");
    return emit_pw(C, n, x, y, 1, 1);
}

static int op_shape(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t s = attr_i(n, "start", 0), e = attr_i(n, "end", x->nd);
    clamp_range(x->nd, &s, &e);
    int k = e > s ? (int)(e - s) : 0;
    sym shape = S(k);
    return set_const(C, y, 1, &shape, k, x->shape + s);
}

/* Pad (constant mode): no op. Zero pads are a view; symmetric spatial pads
 * read only by a Conv or Pool are added to its pads. */
static int op_pad(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    const Onnx__AttributeProto *md = attr(n, "mode");
    if (md && md->has_s && !(md->s.len == 8 && memcmp(md->s.data, "constant", 8) == 0))
        return unsupported(C, n, "mode %.*s (only constant padding before a Conv or Pool)",
                           (int)(md->s.len < 20 ? md->s.len : 20), (const char *)md->s.data);
    int64_t pads[2 * SB_MAX_DIMS] = {0};
    int np = attr_ints(n, "pads", pads, 2 * SB_MAX_DIMS);
    if (np < 0) {
        val *pv = in_val(C, n, 1);
        if (!pv || pv->kind != V_CONST || pv->ndata > 2 * SB_MAX_DIMS)
            return unsupported(C, n, "pads are not a constant");
        np = pv->ndata;
        for (int i = 0; i < np; i++)
            pads[i] = sym_is_const(pv->data[i]) ? pv->data[i].c : -1;
    }
    if (np != 2 * x->nd || in_val(C, n, 3))
        return unsupported(C, n, "pads of %d entries for rank %d, or axes", np, x->nd);
    int any = 0;
    for (int i = 0; i < np; i++) {
        if (pads[i] < 0 || pads[i] > (1 << 20))
            return unsupported(C, n, "pad %lld", (long long)pads[i]);
        any |= pads[i] != 0;
    }
    if (!any)
        return alias(C, x, y);
    int ok = x->nd == 4 && !pads[0] && !pads[1] && !pads[4] && !pads[5] && pads[2] == pads[6] && pads[3] == pads[7];
    int k = only_consumer(C, y->name);
    if (!ok || k < 0 || !(op_is(C->g->node[k], "Conv") || op_is(C->g->node[k], "MaxPool")
                          || op_is(C->g->node[k], "AveragePool"))
        || !in_name(C->g->node[k], 0) || strcmp(in_name(C->g->node[k], 0), y->name))
        return unsupported(C, n, "padding that is not symmetric on height and width right before a Conv or Pool");
    bind_view(C, y, x->t, x->nd, x->src);
    y->xpad[0] = pads[2];
    y->xpad[1] = pads[3];
    if (C->info)
        C->info->nviews++;
    return 0;
}

static int op_constant(ctx *C, const Onnx__NodeProto *n, val *y)
{
    const Onnx__AttributeProto *a;
    if ((a = attr(n, "value")) && a->t) {
        if (set_from_tensor(C, y, a->t, 0))
            return unsupported(C, n, "value tensor of more than %d dims or bad dims", SB_MAX_DIMS);
        return 0;
    }
    if ((a = attr(n, "value_int")) && a->has_i) {
        sym v = S(a->i);
        return set_const(C, y, 0, NULL, 1, &v);
    }
    if ((a = attr(n, "value_ints"))) {
        if (a->n_ints > MAX_CONST)
            return unsupported(C, n, "too large");
        sym out[MAX_CONST];
        for (size_t i = 0; i < a->n_ints; i++)
            out[i] = S(a->ints[i]);
        sym shape = S((int64_t)a->n_ints);
        return set_const(C, y, 1, &shape, (int)a->n_ints, out);
    }
    if ((a = attr(n, "value_float"))) {
        y->kind = V_STATIC;
        y->nd = 0;
        y->has_f = 1;
        y->f = a->f;
        return 0;
    }
    if ((a = attr(n, "value_floats"))) {
        y->kind = V_STATIC;
        y->nd = 1;
        y->shape[0] = S((int64_t)a->n_floats);
        return 0;
    }
    return unsupported(C, n, "no value, value_int(s) or value_float(s) attribute");
}

/* ---- the node table ----------------------------------------------------------- */

static const char *const k_pointwise[] = {
    "Relu", "Clip", "Sigmoid", "Tanh", "Gelu", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs",
    "Reciprocal", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
    "Mish", "Celu", "ThresholdedRelu", NULL,
};

static const char *const k_other[] = {
    "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul",
    "Einsum", "BatchNormalization", "LayerNormalization", "Softmax", "LogSoftmax", "Add", "Sub",
    "Mul", "Div", "Pow", "Concat", "Split", "Slice", "Flatten", "Reshape", "Transpose", "Squeeze",
    "Unsqueeze", "Gather", "LSTM", "Dropout", "Identity", "Constant", "Shape", "Cast",
    "ConstantOfShape", "ReduceMean", "Pad", NULL,
};

static int in_list(const char *const *l, const char *s)
{
    for (int i = 0; s && l[i]; i++)
        if (strcmp(l[i], s) == 0)
            return 1;
    return 0;
}

/* Refusals that need no shapes: op types and attributes. */
static int check_node_static(ctx *C, const Onnx__NodeProto *n)
{
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
        return unsupported(C, n, "operator domain '%.40s' (only the default ONNX domain)", n->domain);
    if (!n->op_type || !(in_list(k_pointwise, n->op_type) || in_list(k_other, n->op_type)))
        return unsupported(C, n, "operator not supported by the importer");
    if (op_is(n, "Conv") && attr_i(n, "group", 1) != 1)
        return unsupported(C, n, "group=%lld (grouped/depthwise conv: no groups in the model format)",
                           (long long)attr_i(n, "group", 1));
    return 0;
}

/* Weight positions: a graph input only read there (and without symbolic
 * dims) is a trained tensor of a graph-only export, not data. */
static int weight_slot(const Onnx__NodeProto *n, size_t slot)
{
    if (!n->op_type)
        return 0;
    if (op_is(n, "Gather"))
        return slot == 0;
    if (op_is(n, "MatMul") || op_is(n, "Einsum"))
        return slot == 1;
    if (op_is(n, "Add") || op_is(n, "Sub") || op_is(n, "Mul") || op_is(n, "Div") || op_is(n, "Pow")
        || op_is(n, "Identity"))
        return 1;
    return slot >= 1 && (op_is(n, "Conv") || op_is(n, "ConvTranspose") || op_is(n, "Gemm")
                         || op_is(n, "LSTM") || op_is(n, "GRU") || op_is(n, "RNN")
                         || op_is(n, "BatchNormalization") || op_is(n, "LayerNormalization")
                         || op_is(n, "PRelu"));
}

static int add_sym(ctx *C, const char *name, int64_t def)
{
    for (int i = 0; i < C->nsym; i++)
        if (strcmp(C->symname[i], name) == 0)
            return i;
    if (C->nsym == NSYM)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: more than %d symbolic dims", C->path, NSYM), -2;
    for (int i = 0; C->opts && i < C->opts->nsettings; i++)
        if (strcmp(C->opts->settings[i].name, name) == 0)
            def = C->opts->settings[i].value;
    if (def < 1 || def > ((int64_t)1 << 30))
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: param '%s' = %lld out of range", C->path, name, (long long)def), -2;
    snprintf(C->symname[C->nsym], SB_NAME_MAX, "%s", name);
    C->symdef[C->nsym] = def;
    if (name_take(C, name))
        return -2;
    return C->nsym++;
}

static int declare_input(ctx *C, const Onnx__ValueInfoProto *vi, val *x)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type
        || !tp->tensor_type->shape)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s' has no tensor shape", C->path, vi->name);
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    int nd = (int)sh->n_dim;
    if (nd < 1 || nd > SB_MAX_DIMS)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s' has rank %d (1 to %d)", C->path, vi->name,
                       nd, SB_MAX_DIMS);
    int elem = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 1;
    int isint = elem == 6 || elem == 7 || elem == 2 || elem == 3 || elem == 4 || elem == 5 || elem == 12 || elem == 13;
    const char *role4[4] = {"batch", "channels", "height", "width"};
    const char *role3[3] = {"batch", "seq", "embed"};
    const char *role2i[2] = {"batch", "seq"};
    char dn[SB_MAX_DIMS][SB_NAME_MAX], decl[2048] = "";
    sym sz[SB_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        const char *role = NULL;
        char pn[SB_NAME_MAX];
        if (nd == 4 && !isint)
            role = role4[i];
        else if (nd == 3 && !isint)
            role = role3[i];
        else if (nd == 2 && isint)
            role = role2i[i];
        else if (i == 0)
            role = "batch";
        int symbolic = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param
                       && d->dim_param[0];
        int64_t v = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? d->dim_value : 0;
        if (symbolic || v <= 0) {
            const char *dp = symbolic ? d->dim_param : "";
            static const char *const batchy[] = {"batch", "batch_size", "N", "n", "b", "B", "bs", "batchsize", NULL};
            static const char *const seqy[] = {"seq", "seq_len", "sequence", "sequence_length", "T", "S", "len", NULL};
            if ((i == 0 && !symbolic) || in_list(batchy, dp))
                snprintf(pn, sizeof pn, "batch");
            else if (in_list(seqy, dp))
                snprintf(pn, sizeof pn, "seq");
            else {
                size_t k = 0;
                for (const char *p = dp; *p && k < 40; p++) {
                    int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9' && k);
                    pn[k] = ok ? *p : '_';
                    k++;
                }
                pn[k] = '\0';
                if (!k || !((pn[0] >= 'a' && pn[0] <= 'z') || (pn[0] >= 'A' && pn[0] <= 'Z')))
                    snprintf(pn, sizeof pn, "dyn%d", C->nsym);
                if (!strcmp(pn, "model") || !strcmp(pn, "param") || !strcmp(pn, "input") || !strcmp(pn, "weight")
                    || !strcmp(pn, "repeat") || !strcmp(pn, "block") || !strcmp(pn, "end") || !strcmp(pn, "return")
                    || !strcmp(pn, "cutoff"))
                    strcat(pn, "_");
            }
            int k = add_sym(C, pn, 1);
            if (k < 0)
                return -1;
            sz[i] = S(1);
            sz[i].e[k] = 1;
            if (!strcmp(pn, "batch") || !strcmp(pn, "seq") || !role)
                role = pn;
        } else {
            if (v > ((int64_t)1 << 40))
                return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s': dim %d too large", C->path, vi->name, i);
            sz[i] = S(v);
        }
        if (role)
            recog_name(C, role, sym_val(C, sz[i]), dn[i]);
        else
            gen_name(C, sym_val(C, sz[i]), dn[i]);
    }
    uniq_dims(nd, dn);
    int t = new_tensor(C, vi->name, "input", nd, dn, sz, -1);
    if (t < 0)
        return -1;
    for (int i = 0; i < nd; i++) {
        char s[128];
        sym_str(C, sz[i], s, sizeof s);
        snprintf(decl + strlen(decl), sizeof decl - strlen(decl), "%s%s=%s", i ? ", " : "", C->t[t].dn[i], s);
    }
    sb_printf(&C->decl, "input %s[%s]\n", C->t[t].name, decl);
    bind_act(C, x, t);
    return 0;
}

static void poison_outputs(ctx *C, const Onnx__NodeProto *n)
{
    for (size_t i = 0; i < n->n_output; i++) {
        val *y = out_val(C, n, i);
        if (y && y->kind == V_NONE)
            y->kind = V_POISON;
    }
}

static int alias(ctx *C, val *x, val *y)
{
    if (x->kind == V_ACT) {
        bind_view(C, y, x->t, x->nd, x->src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    if (x->kind == V_CONST)
        return set_const(C, y, x->nd, x->shape, x->ndata, x->data);
    y->kind = x->kind;
    y->nd = x->nd;
    memcpy(y->shape, x->shape, sizeof y->shape);
    y->has_f = x->has_f;
    y->f = x->f;
    y->weight = x->weight;
    return 0;
}

static int do_node(ctx *C, int ni)
{
    const Onnx__NodeProto *n = C->g->node[ni];
    for (size_t i = 0; i < n->n_input; i++) {
        const char *nm = in_name(n, i);
        if (!nm)
            continue;
        val *x = vfind(C, nm);
        if (!x || x->kind == V_NONE) {
            if (x && x->prod > ni)
                unsupported(C, n, "input '%.80s' comes from a later node (the graph is not topologically sorted)", nm);
            else if (!x || x->prod < 0)
                unsupported(C, n, "input '%.80s' is not a graph input, initializer or node output", nm);
            poison_outputs(C, n);
            return 0;
        }
        if (x->kind == V_POISON) {
            poison_outputs(C, n);
            return 0;
        }
        if (x->kind == V_UNAVAIL) {
            unsupported(C, n, "uses '%.80s', %s", nm, x->why);
            poison_outputs(C, n);
            return 0;
        }
    }
    for (size_t i = 0; i < n->n_input; i++)
        consume(C, in_val(C, n, i));
    int rc = 0, nl0 = C->nl;
    if (op_is(n, "ReduceMean") && match_layernorm(C, ni, &rc))
        return rc < 0 ? -1 : 0;
    if ((op_is(n, "Div") || op_is(n, "Mul")) && match_gelu(C, ni, &rc))
        return rc < 0 ? -1 : 0;
    val *x = in_val(C, n, 0), *x1 = in_val(C, n, 1), *y = out_val(C, n, 0);
    const char *op = n->op_type;
    int needs_act = !(op_is(n, "Constant") || op_is(n, "Identity") || op_is(n, "Dropout") || op_is(n, "Cast")
                      || op_is(n, "Shape") || op_is(n, "Gather") || op_is(n, "Unsqueeze") || op_is(n, "Squeeze")
                      || op_is(n, "Concat") || op_is(n, "Slice") || op_is(n, "Add") || op_is(n, "Sub")
                      || op_is(n, "Mul") || op_is(n, "Div") || op_is(n, "Pow") || op_is(n, "Reshape")
                      || op_is(n, "Transpose") || op_is(n, "ConstantOfShape") || op_is(n, "MatMul")
                      || op_is(n, "Gemm") || op_is(n, "Einsum") || in_list(k_pointwise, op));
    if (!op_is(n, "Constant") && !op_is(n, "Concat") && !x)
        rc = unsupported(C, n, "missing input");
    else if (!y && !op_is(n, "Split") && !op_is(n, "LSTM"))
        rc = 0; /* nothing reads it */
    else if (needs_act && x->kind != V_ACT)
        rc = unsupported(C, n, "applied to a constant (only activations)");
    else if (x && x->nd > SB_MAX_DIMS)
        rc = unsupported(C, n, "more than %d dims", SB_MAX_DIMS);
    else if (op_is(n, "Constant"))
        rc = op_constant(C, n, y);
    else if (op_is(n, "Identity") || op_is(n, "Dropout") || op_is(n, "Cast")) {
        rc = alias(C, x, y);
        val *mask = out_val(C, n, 1);
        if (mask) {
            mask->kind = V_UNAVAIL;
            mask->why = "Dropout's mask";
        }
    } else if (op_is(n, "Shape"))
        rc = op_shape(C, n, x, y);
    else if (op_is(n, "Gather"))
        rc = x1 ? op_gather(C, n, x, x1, y) : unsupported(C, n, "missing indices");
    else if (op_is(n, "Unsqueeze") || op_is(n, "Squeeze"))
        rc = op_squeeze(C, n, x, y, op_is(n, "Unsqueeze"));
    else if (op_is(n, "Concat"))
        rc = op_concat(C, n, y);
    else if (op_is(n, "Slice"))
        rc = op_slice(C, n, x, y);
    else if (op_is(n, "Add") || op_is(n, "Sub") || op_is(n, "Mul") || op_is(n, "Div") || op_is(n, "Pow"))
        rc = x1 ? op_binary(C, n, x, x1, y) : unsupported(C, n, "needs two inputs");
    else if (in_list(k_pointwise, op)) {
        if (x->kind == V_ACT)
            rc = emit_pw(C, n, x, y, 1, 1);
        else
            rc = alias(C, x, y), y->kind = y->kind == V_CONST ? V_STATIC : y->kind;
    } else if (op_is(n, "Conv"))
        rc = op_conv(C, n, x, x1 ? x1 : x, y);
    else if (op_is(n, "MaxPool") || op_is(n, "AveragePool"))
        rc = op_pool(C, n, x, y, op_is(n, "AveragePool"));
    else if (op_is(n, "GlobalAveragePool") || op_is(n, "GlobalMaxPool")) {
        if (x->nd < 3)
            rc = unsupported(C, n, "input of rank %d", x->nd);
        else
            rc = emit_reduce(C, n, x, ((1u << x->nd) - 1) & ~3u, 1, y);
    } else if (op_is(n, "Gemm"))
        rc = x1 ? op_matmul(C, n, x, x1, (int)attr_i(n, "transA", 0), (int)attr_i(n, "transB", 0), y)
                : unsupported(C, n, "needs two inputs");
    else if (op_is(n, "MatMul"))
        rc = x1 ? op_matmul(C, n, x, x1, 0, 0, y) : unsupported(C, n, "needs two inputs");
    else if (op_is(n, "Einsum"))
        rc = x1 ? op_einsum(C, n, x, x1, y) : unsupported(C, n, "needs two inputs");
    else if (op_is(n, "BatchNormalization")) {
        if (x->nd < 2 || attr_i(n, "training_mode", 0))
            rc = unsupported(C, n, "rank %d input or training_mode", x->nd);
        else {
            int in = materialize(C, x, node_label(n));
            int t = in < 0 ? -1 : new_tensor(C, node_label(n), "bn", C->t[in].nd, C->t[in].dn, C->t[in].sz, C->nl);
            if (t < 0 || add_line(C, C->t[t].name, "batchnorm", 0, "%s", C->t[in].name) < 0)
                return -1;
            bind_act(C, y, t);
        }
    } else if (op_is(n, "LayerNormalization")) {
        int a = norm_axis(attr_i(n, "axis", -1), x->nd);
        if (a != x->nd - 1 || x->nd < 2)
            rc = unsupported(C, n, "normalizes over several axes (the model format's norm takes one)");
        else
            rc = emit_norm(C, n, x, a, y);
        for (size_t k = 1; k < 3; k++) {
            val *o = out_val(C, n, k);
            if (o) {
                o->kind = V_UNAVAIL;
                o->why = "LayerNormalization's mean or inverse deviation";
            }
        }
    } else if (op_is(n, "Softmax") || op_is(n, "LogSoftmax"))
        rc = op_softmax(C, n, x, y);
    else if (op_is(n, "ReduceMean")) {
        int64_t axes[SB_MAX_DIMS];
        int na = reduce_axes(C, n, axes, SB_MAX_DIMS);
        uint32_t mask = 0;
        if (na == -2)
            rc = unsupported(C, n, "axes are not a constant");
        else {
            if (na <= 0 && !attr_i(n, "noop_with_empty_axes", 0))
                mask = (1u << x->nd) - 1;
            for (int i = 0; i < na; i++) {
                int a = norm_axis(axes[i], x->nd);
                if (a < 0) {
                    rc = unsupported(C, n, "axis %lld out of range", (long long)axes[i]);
                    break;
                }
                mask |= 1u << a;
            }
            if (!rc)
                rc = mask ? emit_reduce(C, n, x, mask, (int)attr_i(n, "keepdims", 1), y) : alias(C, x, y);
        }
    } else if (op_is(n, "Flatten"))
        rc = op_flatten(C, n, x, y);
    else if (op_is(n, "Reshape")) {
        int nd;
        sym sz[SB_MAX_DIMS];
        rc = reshape_target(C, n, x, x1, &nd, sz);
        if (!rc && x->kind == V_ACT)
            rc = emit_reshape(C, n, x, nd, sz, y);
        else if (!rc && x->kind == V_CONST && shape_numel(C, nd, sz) == x->ndata)
            rc = set_const(C, y, nd, sz, x->ndata, x->data);
        else if (!rc) {
            y->kind = V_STATIC;
            y->nd = nd;
            memcpy(y->shape, sz, sizeof sz);
        }
    } else if (op_is(n, "Transpose"))
        rc = op_transpose(C, n, x, y);
    else if (op_is(n, "Split"))
        rc = op_split(C, n, x);
    else if (op_is(n, "Pad"))
        rc = op_pad(C, n, x, y);
    else if (op_is(n, "LSTM"))
        rc = op_lstm(C, n, x, x1 ? x1 : x, y);
    else if (op_is(n, "ConstantOfShape")) {
        if (x->kind != V_CONST || x->nd != 1 || x->ndata > SB_MAX_DIMS)
            rc = unsupported(C, n, "shape is not a constant");
        else {
            y->kind = V_STATIC;
            y->nd = x->ndata;
            memcpy(y->shape, x->data, (size_t)x->ndata * sizeof *x->data);
        }
    } else
        rc = unsupported(C, n, "operator not supported by the importer");
    if (rc < 0)
        return -1;
    if (rc > 0) {
        poison_outputs(C, n);
        return 0;
    }
    if (C->info && C->nl == nl0 && y && is_static(y))
        C->info->nfolded++;
    return 0;
}

/* ---- the whole import --------------------------------------------------------- */

static int prepass(ctx *C)
{
    Onnx__GraphProto *g = C->g;
    if (g->n_node > MAX_NODES)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: %zu nodes (at most %d)", C->path, g->n_node, MAX_NODES);
    for (size_t i = 0; i < g->n_node; i++)
        if (!g->node[i])
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: empty node %zu", C->path, i);
    /* every name gets its value now: later lookups never reallocate */
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i] && g->initializer[i]->name && !vget(C, g->initializer[i]->name))
            return -1;
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i] && g->input[i]->name && !vget(C, g->input[i]->name))
            return -1;
    for (size_t ni = 0; ni < g->n_node; ni++) {
        const Onnx__NodeProto *n = g->node[ni];
        for (size_t k = 0; k < n->n_output; k++) {
            if (!n->output[k] || !n->output[k][0])
                continue;
            val *y = vget(C, n->output[k]);
            if (!y)
                return -1;
            if (y->prod >= 0)
                return sb_fail(C->err, SB_EXIT_INPUT, "%s: value '%.100s' is produced by two nodes", C->path, n->output[k]);
            y->prod = (int)ni;
        }
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k] && n->input[k][0] && !vget(C, n->input[k]))
                return -1;
    }
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i] && g->output[i]->name && g->output[i]->name[0] && !vget(C, g->output[i]->name))
            return -1;
    /* consumers */
    C->ncons = calloc((size_t)C->nv + 1, sizeof *C->ncons);
    C->cons = calloc((size_t)C->nv + 1, sizeof *C->cons);
    C->skip = calloc(g->n_node + 1, sizeof *C->skip);
    if (!C->ncons || !C->cons || !C->skip)
        return oom(C);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t ni = 0; ni < g->n_node; ni++) {
            const Onnx__NodeProto *n = g->node[ni];
            for (size_t k = 0; k < n->n_input; k++) {
                val *x = in_val(C, n, k);
                if (!x)
                    continue;
                int vi = (int)(x - C->v);
                if (pass == 0) {
                    C->ncons[vi]++;
                    x->uses++;
                } else {
                    C->cons[vi][C->ncons[vi]++] = (int)ni;
                }
            }
        }
        if (pass == 0)
            for (int vi = 0; vi < C->nv; vi++) {
                if (C->ncons[vi] && !(C->cons[vi] = malloc((size_t)C->ncons[vi] * sizeof(int))))
                    return oom(C);
                C->ncons[vi] = 0;
            }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        val *x = g->output[i] && g->output[i]->name ? vfind(C, g->output[i]->name) : NULL;
        if (x)
            x->uses++;
    }
    for (size_t ni = 0; ni < g->n_node; ni++)
        if (check_node_static(C, g->node[ni]))
            C->skip[ni] = 2; /* reported; its outputs are unknown */
    return 0;
}

static int setup_inputs(ctx *C)
{
    Onnx__GraphProto *g = C->g;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        if (!tp || !tp->name)
            continue;
        val *x = vfind(C, tp->name);
        if (!x)
            continue; /* no name: nothing can read it */
        if (x->prod >= 0)
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: initializer '%.100s' is also a node output", C->path, tp->name);
        if (set_from_tensor(C, x, tp, 1))
            return C->oom ? -1
                          : sb_fail(C->err, SB_EXIT_INPUT, "%s: initializer '%.100s' has bad dims", C->path, tp->name);
    }
    /* params first (reserved names), in input order */
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi || !vi->name)
            continue;
        val *x = vfind(C, vi->name);
        if (!x || x->kind != V_NONE || x->prod >= 0)
            continue; /* an initializer listed as an input (IR < 4), or no name */
        if (!x->uses)
            continue;
        int symbolic = 0, known = vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
                                  && vi->type->tensor_type && vi->type->tensor_type->shape;
        if (known) {
            const Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
            for (size_t k = 0; k < sh->n_dim; k++)
                symbolic |= !sh->dim[k] || sh->dim[k]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                            || sh->dim[k]->dim_value <= 0;
        }
        int all_weight = 1;
        int vix = (int)(x - C->v);
        for (int k = 0; k < C->ncons[vix]; k++) {
            const Onnx__NodeProto *n = g->node[C->cons[vix][k]];
            for (size_t s = 0; s < n->n_input; s++)
                if (n->input[s] && strcmp(n->input[s], vi->name) == 0 && !weight_slot(n, s))
                    all_weight = 0;
        }
        if (!symbolic && all_weight && known) {
            const Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
            if (sh->n_dim > SB_MAX_DIMS)
                return sb_fail(C->err, SB_EXIT_INPUT, "%s: weight '%.100s' has rank %zu", C->path, vi->name, sh->n_dim);
            x->kind = V_STATIC;
            x->weight = 1;
            x->nd = (int)sh->n_dim;
            for (int k = 0; k < x->nd; k++) {
                if (sh->dim[k]->dim_value > ((int64_t)1 << 40))
                    return sb_fail(C->err, SB_EXIT_INPUT, "%s: weight '%.100s' too large", C->path, vi->name);
                x->shape[k] = S(sh->dim[k]->dim_value);
            }
            continue;
        }
        if (declare_input(C, vi, x))
            return -1;
    }
    return 0;
}

static void sanitize_model_name(const char *path, const char *graph, char *out, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t k = 0;
    for (const char *p = base; *p && *p != '.' && k + 1 < n && k < 60; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        out[k++] = ok ? ch : '_';
    }
    out[k] = '\0';
    if (!k || !((out[0] >= 'a' && out[0] <= 'z') || (out[0] >= 'A' && out[0] <= 'Z'))) {
        char tmp[72];
        snprintf(tmp, sizeof tmp, "onnx_%.60s", out);
        snprintf(out, n, "%.71s", tmp);
    }
    (void)graph;
}

/* Graph outputs: materialized; logits get a softmax_xent. */
static int finish_outputs(ctx *C)
{
    int have_loss = 0;
    for (size_t i = 0; i < C->g->n_output; i++) {
        const Onnx__ValueInfoProto *o = C->g->output[i];
        if (!o || !o->name || !o->name[0])
            continue;
        val *x = vfind(C, o->name);
        if (!x || x->kind == V_POISON)
            continue;
        if (x->kind != V_ACT)
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph output '%.100s' is %s", C->path, o->name,
                           x->kind == V_NONE ? "not produced by any node" : "a constant, not computed from the inputs");
        int t = materialize(C, x, o->name);
        if (t < 0)
            return -1;
        C->t[t].out = 1;
        if (have_loss || (C->opts && C->opts->no_loss))
            continue;
        int L = C->t[t].line;
        if (L < 0 || C->t[t].nd < 2)
            continue;
        line *l = &C->l[L];
        if (!strcmp(l->op, "softmax") && l->sm_axis == C->t[l->in].nd - 1 && C->t[l->in].nd >= 2) {
            snprintf(l->op, sizeof l->op, "softmax_xent");
            free(l->args);
            if (!(l->args = strdup(C->t[l->in].name)))
                return oom(C);
            have_loss = 1;
        } else if (!strcmp(l->op, "dense") || !strcmp(l->op, "einsum")) {
            char nm[SB_NAME_MAX];
            if (make_ident(C, "loss", "loss", nm) || add_line(C, nm, "softmax_xent", 0, "%s", C->t[t].name) < 0)
                return -1;
            have_loss = 1;
        }
    }
    return 0;
}

static void free_ctx(ctx *C)
{
    for (int i = 0; i < C->nv; i++)
        free(C->v[i].data);
    free(C->v);
    free(C->hash);
    free(C->t);
    for (int i = 0; i < C->nl; i++)
        free(C->l[i].args);
    free(C->l);
    free(C->decl.s);
    for (int i = 0; i < C->nnames; i++)
        free(C->names[i]);
    free(C->names);
    if (C->cons)
        for (int i = 0; i < C->nv; i++)
            free(C->cons[i]);
    free(C->cons);
    free(C->ncons);
    free(C->skip);
    free(C->unsup.s);
    if (C->mp)
        onnx__model_proto__free_unpacked(C->mp, NULL);
}

int sb_onnx_to_text(const void *data, size_t size, const char *path, const sb_onnx_opts *opts,
                    char **text, size_t *len, sb_onnx_info *info, sb_error *err)
{
    *text = NULL;
    *len = 0;
    if (info)
        memset(info, 0, sizeof *info);
    if (size == 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: empty file, not an ONNX model", path);
    ctx C0, *C = &C0;
    memset(C, 0, sizeof *C);
    C->path = path;
    C->opts = opts;
    C->err = err;
    C->info = info;
    int rc = -1;
    C->mp = onnx__model_proto__unpack(NULL, size, data);
    if (!C->mp) {
        sb_fail(err, SB_EXIT_INPUT, "%s: not an ONNX model, or a truncated one (the protobuf does not decode)", path);
        goto out;
    }
    C->g = C->mp->graph;
    if (!C->g || !C->mp->has_ir_version || C->g->n_node == 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s: not an ONNX model (%s)", path,
                !C->g ? "no graph" : !C->mp->has_ir_version ? "no IR version" : "the graph has no nodes");
        goto out;
    }
    for (size_t i = 0; i < C->mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = C->mp->opset_import[i];
        if (o && (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            C->opset = o->version;
    }
    if (C->opset < 7 || C->opset > 18) {
        sb_fail(err, SB_EXIT_INPUT, "%s: ONNX opset %lld is not supported (the importer reads opsets 7 to 18; "
                "tested with 11 to 17)", path, (long long)C->opset);
        goto out;
    }
    if (info) {
        info->ir_version = C->mp->ir_version;
        info->opset = C->opset;
        snprintf(info->producer, sizeof info->producer, "%.60s%s%.60s",
                 C->mp->producer_name ? C->mp->producer_name : "", C->mp->producer_version ? " " : "",
                 C->mp->producer_version ? C->mp->producer_version : "");
        info->nnodes = (int)C->g->n_node;
    }
    static const char *const reserved[] = {"model", "param", "cutoff", "block", "end", "repeat",
                                           "return", "input", "weight", NULL};
    for (int i = 0; reserved[i]; i++)
        if (name_take(C, reserved[i]))
            goto out;
    if (prepass(C) || setup_inputs(C))
        goto out;
    for (size_t ni = 0; ni < C->g->n_node; ni++) {
        if (C->skip[ni] == 2)
            poison_outputs(C, C->g->node[ni]);
        if (C->skip[ni])
            continue;
        if (do_node(C, (int)ni))
            goto out;
    }
    if (C->nunsup) {
        /* as many whole lines as the message holds, then a count */
        char head[256], list[1024] = "";
        int n = snprintf(head, sizeof head, "%s: cannot import: %d unsupported node%s (the model format has no equivalent):",
                         path, C->nunsup, C->nunsup == 1 ? "" : "s");
        size_t room = sizeof err->msg - (size_t)(n > 0 ? n : 0) - 48, used = 0;
        int shown = 0;
        for (const char *p = C->unsup.s; p && *p;) {
            const char *e = strchr(p + 1, '\n');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (used + l >= room || used + l >= sizeof list)
                break;
            memcpy(list + used, p, l);
            used += l;
            list[used] = '\0';
            shown++;
            p += l;
        }
        if (shown < C->nunsup)
            snprintf(list + used, sizeof list - used, "\n  ... and %d more", C->nunsup - shown);
        sb_fail(err, SB_EXIT_INPUT, "%s%s", head, list);
        goto out;
    }
    if (finish_outputs(C))
        goto out;
    if (C->nl == 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s: the graph computes nothing the model format can express (no ops)", path);
        goto out;
    }
    for (int i = 0; opts && i < opts->nrenames; i++) {
        int found = 0;
        for (int k = 0; k < C->ndims; k++)
            found |= strcmp(C->dims[k].name, opts->renames[i].from) == 0;
        if (!found) {
            char list[512] = "";
            for (int k = 0; k < C->ndims; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", C->dims[k].name);
            sb_fail(err, SB_EXIT_INPUT, "%s: --rename %s=%s: the import has no dim '%s' (dims: %s)", path,
                    opts->renames[i].from, opts->renames[i].to, opts->renames[i].from, list);
            goto out;
        }
    }
    sbuf b = {0};
    char mname[96];
    sanitize_model_name(path, C->g->name, mname, sizeof mname);
    const char *base = strrchr(path, '/');
    sb_printf(&b, "# Imported from %s by `shardbench import`: ONNX IR %lld, opset %lld, producer '%s'.\n",
              base ? base + 1 : path, (long long)C->mp->ir_version, (long long)C->opset,
              info ? info->producer : (C->mp->producer_name ? C->mp->producer_name : ""));
    sb_printf(&b, "# %zu ONNX nodes; weights are implicit in the ops that own them.\n", C->g->n_node);
    sb_printf(&b, "model %s\n", mname);
    for (int i = 0; i < C->nsym; i++)
        sb_printf(&b, "param %s = %lld\n", C->symname[i], (long long)C->symdef[i]);
    sb_printf(&b, "\n%s\n", C->decl.s ? C->decl.s : "");
    for (int i = 0; i < C->nl; i++) {
        line *l = &C->l[i];
        if (!l->op[0])
            sb_printf(&b, "%s\n", l->args);
        else if (l->pw > 0)
            sb_printf(&b, "%s = %s(%s, pw=%d)\n", l->lhs, l->op, l->args, l->pw);
        else
            sb_printf(&b, "%s = %s(%s)\n", l->lhs, l->op, l->args);
    }
    if (b.oom || C->decl.oom) {
        free(b.s);
        oom(C);
        goto out;
    }
    *text = b.s;
    *len = b.n;
    if (info) {
        info->ndims = 0;
        for (int k = 0; k < C->ndims && k < 64; k++) {
            char nm[SB_NAME_MAX];
            int how = C->dims[k].how;
            dim_name(C, C->dims[k].name, how, C->dims[k].size, nm);
            if (strcmp(nm, C->dims[k].name))
                how = SB_ONNX_DIM_RENAMED;
            snprintf(info->dims[info->ndims].name, SB_NAME_MAX, "%s", nm);
            info->dims[info->ndims++].how = how;
        }
    }
    rc = 0;
out:
    free_ctx(C);
    return rc;
}

#endif /* SB_HAVE_ONNX */
