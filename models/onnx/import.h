/* onnx/import.h: the ONNX importer's state and the functions its files
 * share (internal to models/onnx/; only with SB_HAVE_ONNX).
 *
 * import.c walks the graph and hands each node to the handler of its op
 * type (k_ops[], import.c); values.c keeps the values, names, model tensors
 * and lines of text the handlers emit; conv.c, gemm.c, norm.c, shape.c,
 * elementwise.c and lstm.c hold the handlers of each family of ONNX
 * operators. Calls go one way: import.c to the handlers, the handlers to
 * values.c (and norm.c's reductions); values.c calls none of them. */
#ifndef SB_MODELS_ONNX_IMPORT_H
#define SB_MODELS_ONNX_IMPORT_H

#include "shardbench/onnx.h"

#include <stdint.h>
#include <string.h>

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

/* ---- growing text ----------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

/* ---- the importer's state -------------------------------------------------- */

enum { V_NONE = 0, V_CONST, V_STATIC, V_ACT, V_POISON, V_UNAVAIL, V_SEQ };

/* V_SEQ: what a sequence value holds (seq.c): the parts of a
 * SplitToSequence, an empty sequence, or a Loop's repeat of each part. */
enum { SQ_SPLIT = 1, SQ_EMPTY, SQ_REPEAT };

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
    int nf;                  /* V_STATIC: float (or bool) elements read, at most MAX_FCONST */
    float *fdata;            /* their values (rotary tables, masks), or NULL */
    int mask;                /* V_STATIC: an (n, n) causal mask (MASK_*), else 0 */
    int sq;                  /* V_SEQ: SQ_* */
    const char *sq_src;      /* V_SEQ: the value split (SQ_SPLIT) or repeated (SQ_REPEAT) */
    int sq_axis, sq_keep;    /* its axis; SQ_SPLIT: parts keep the axis (size 1) */
    sym sq_n;                /* SQ_SPLIT: the number of parts */
    int64_t sq_rep;          /* SQ_REPEAT: each part repeated this often */
} val;

#define MAX_FCONST 65536  /* elements of a float or bool constant kept for pattern checks */

/* Causal masks recognised in constants: a keep-mask (true / 1 on and below
 * the diagonal, false / 0 above) or an additive one (0 on and below, -inf or
 * a very large negative number above). */
enum { MASK_NONE = 0, MASK_KEEP = 1, MASK_ADD = 2 };

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
    int64_t heads, head_dim, seq; /* attention's head count and width, the token inputs' length (0: none yet) */
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

    struct {
        const char *probe;
        int ok;
    } probes[16];       /* ox_have's answers */
    int nprobes;
    struct {
        int node[7];     /* Add, Mul(x, cos), Mul(rot, sin), Concat, Neg, Slice(h:), Slice(:h) */
        const char *x, *cos, *sin;
    } *ropes;           /* rotary patterns held back from the walk (rope.c) */
    int nropes, capropes;
    int64_t batch_static; /* a static leading dim made the `batch` param (its value), else 0 */
    int batch_axis;       /* the data inputs' dim that is the batch of a static export: 0, or 1
                             (seq-first: nn.Transformer's (seq, batch, embed)) */
    int seq_first;        /* set when a reshape shows the batch param is a seq-first export's seq */
    char seq_param[SB_NAME_MAX]; /* the dim_param made the `seq` param, "" before */
    uint64_t dims_used;   /* the --dim options that fixed an axis (bit i) */
    int64_t tok_before;   /* the `tokens` dim's factor before its batch (seq when seq-major), 0: none yet */
} ctx;

/* ---- the node table ----------------------------------------------------------- */

/* What a node needs before its handler runs. */
enum {
    OX_ACT = 1,  /* input 0 is an activation (else: "applied to a constant") */
    OX_NO_X = 2, /* runs without input 0 (Constant, Concat) */
    OX_NO_Y = 4, /* runs when nothing reads output 0 (Split, LSTM) */
};

/* A handler maps one node: x, x1 its first two inputs (NULL if absent), y
 * its first output. Returns 0, 1 when the node is refused (unsupported()
 * said why; its outputs become unknown), or -1 on a fatal error. */
typedef int (*ox_handler)(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);

typedef struct {
    const char *op_type;
    ox_handler handler;
    int flags;   /* OX_* */
    /* A pattern starting at this node (node index ni), tried first: returns
     * 1 when it took the node (its result in *rc), 0 to go on. */
    int (*match)(ctx *C, int ni, int *rc);
} ox_op;

int ox_node_conv(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_maxpool(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_avgpool(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_globalpool(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_pad(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_gemm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_matmul(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_einsum(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_batchnorm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_layernorm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_softmax(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_reducemean(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_constant(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_identity(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_shape(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_gather(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_unsqueeze(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_squeeze(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_concat(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_slice(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_flatten(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_reshape(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_transpose(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_split(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_constantofshape(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_equal(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_where(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_range(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_trilu(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_expand(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_binary(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_pointwise(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_lstm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_splittosequence(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_sequenceempty(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_loop(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);
int ox_node_concatfromsequence(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y);

/* ---- small helpers -------------------------------------------------------------- */

static inline sym S(int64_t c)
{
    sym s;
    memset(&s, 0, sizeof s);
    s.c = c;
    return s;
}

static inline int sym_is_const(sym a)
{
    for (int i = 0; i < NSYM; i++)
        if (a.e[i])
            return 0;
    return 1;
}

static inline int sym_eq(sym a, sym b)
{
    return a.c == b.c && memcmp(a.e, b.e, sizeof a.e) == 0;
}

static inline int op_is(const Onnx__NodeProto *n, const char *op)
{
    return n->op_type && strcmp(n->op_type, op) == 0;
}

static inline const char *in_name(const Onnx__NodeProto *n, size_t i)
{
    return i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

static inline const char *out0(const Onnx__NodeProto *n)
{
    return n->n_output && n->output[0] && n->output[0][0] ? n->output[0] : NULL;
}

/* A static (non-activation) input of a node: constant, weight, or the output
 * of a Constant node or a folded subgraph. */
static inline int is_static(const val *x)
{
    return x && (x->kind == V_CONST || x->kind == V_STATIC);
}

static inline const char *node_label(const Onnx__NodeProto *n)
{
    return n->name && n->name[0] ? n->name : (n->n_output && n->output[0] ? n->output[0] : "?");
}

/* ---- shared functions, by the file that defines them ------------------------ */

/* values.c */
int ox_sym_mul(sym a, sym b, sym *out);
int ox_sym_div(sym a, sym b, sym *out);
void ox_printf(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ox_oom(ctx *C);
void ox_sym_str(ctx *C, sym a, char *buf, size_t n);
int64_t ox_sym_val(ctx *C, sym a);
int64_t ox_sym_export_val(ctx *C, sym a);
int ox_name_take(ctx *C, const char *s);
int ox_make_ident(ctx *C, const char *src, const char *fallback, char *out);
void ox_dim_name(ctx *C, const char *proposed, int how, int64_t size, char *out);
void ox_gen_name(ctx *C, int64_t size, char *out);
void ox_recog_name(ctx *C, const char *nm, int64_t size, char *out);
void ox_uniq_dims(int nd, char dn[][SB_NAME_MAX]);
int ox_unsupported(ctx *C, const Onnx__NodeProto *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
val *ox_vfind(ctx *C, const char *name);
val *ox_vget(ctx *C, const char *name);
int64_t ox_shape_numel(ctx *C, int nd, const sym *s);
int ox_new_tensor(ctx *C, const char *onnx_name, const char *fallback, int nd, char dn_[][SB_NAME_MAX], const sym *sz_, int lineno);
int ox_add_line(ctx *C, const char *lhs, const char *op, int can_pw, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void ox_bind_act(ctx *C, val *x, int t);
void ox_bind_view(ctx *C, val *x, int t, int nd, const int8_t *src);
const char *ox_lname(ctx *C, const val *x, int j);
int ox_materialize(ctx *C, val *x, const char *base);
const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name);
int64_t ox_attr_i(const Onnx__NodeProto *n, const char *name, int64_t def);
int ox_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max);
val *ox_in_val(ctx *C, const Onnx__NodeProto *n, size_t i);
val *ox_out_val(ctx *C, const Onnx__NodeProto *n, size_t i);
int ox_set_from_tensor(ctx *C, val *x, const Onnx__TensorProto *tp, int weight);
int ox_set_const(ctx *C, val *x, int nd, const sym *shape, int n, const sym *data);
int ox_emit_pw(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int count, int own_reads);
void ox_consume(ctx *C, val *x);
int ox_broadcasts_to(const val *b, const val *a);
int ox_same_shape(const val *a, const val *b);
int ox_static_name(ctx *C, const char *name);
int ox_only_consumer(ctx *C, const char *name);
int ox_scalar_of(ctx *C, const char *name, double *f);
int ox_refuse_shaped(ctx *C, const Onnx__NodeProto *n, val *y, int nd, const sym *shape, const char *why);
void ox_absorb(ctx *C, int ni);
int ox_binop_with_static(ctx *C, const Onnx__NodeProto *k, const char *a);
int ox_alias(ctx *C, val *x, val *y);

int ox_set_fconst(ctx *C, val *x, int nd, const sym *shape, int n, const float *data);
/* 1 when the model language of this build has what `probe` (a one-line op
 * call on `x[a=4, b=4]`) uses: new op kinds and keywords from other
 * branches are used only once they parse. */
int ox_have(ctx *C, const char *probe);

/* norm.c */
int ox_norm_axis(int64_t a, int nd);
int ox_match_layernorm(ctx *C, int ni, int *rc);
int ox_match_masked_softmax(ctx *C, int ni, int *rc);
int ox_match_rmsnorm(ctx *C, int ni, int *rc);
int ox_emit_reduce(ctx *C, const Onnx__NodeProto *n, val *x, uint32_t lmask, int keep, val *y);

/* rope.c */
int ox_hold_rope(ctx *C);
int ox_match_rope(ctx *C, int ni, int *rc);

/* shape.c */
int ox_emit_reshape(ctx *C, const Onnx__NodeProto *n, val *x, int nd, const sym *sz, val *y);
int ox_emit_expand(ctx *C, const Onnx__NodeProto *n, val *x, int nd, const sym *sz, val *y);
int ox_slice_range(ctx *C, const Onnx__NodeProto *n, int nd, int64_t d, int *axis, int64_t *s, int64_t *e);

/* seq.c */
int ox_hold_repeat(ctx *C);
int ox_match_repeat(ctx *C, int ni, int *rc);

/* The body graph of a Loop node, or NULL. */
const Onnx__GraphProto *ox_loop_body(const Onnx__NodeProto *n);

/* fold.c */
/* Refuses node n: `what` depends on the dynamic axis (param) of s, which
 * the import needs as a number (--dim NAME=N). Returns 1. */
int ox_need_number(ctx *C, const Onnx__NodeProto *n, sym s, const char *what);
int ox_fold_slice_static(ctx *C, const Onnx__NodeProto *n, val *x, const int64_t *st, const int64_t *en,
                         const int64_t *ax, const int64_t *sp, int k, val *y);
int ox_slice_weight(ctx *C, const Onnx__NodeProto *n, val *x, const int64_t *st, const int64_t *en,
                    const int64_t *ax, const int64_t *sp, int k, val *y);
int ox_fold_split_const(ctx *C, const Onnx__NodeProto *n, val *x, int a, const int64_t *sizes, int ns);

/* elementwise.c */
int ox_match_gelu(ctx *C, int ni, int *rc);
int ox_match_silu(ctx *C, int ni, int *rc);
int ox_match_mul(ctx *C, int ni, int *rc);
/* Div: soft-capping c * tanh(x / c) (softcap), else the Gelu of ox_match_gelu. */
int ox_match_div(ctx *C, int ni, int *rc);

#endif
