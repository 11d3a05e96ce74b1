/* ops/conv.c: conv and pool (rank-4 inputs, windows over height and width).
 * conv's iteration space: 0 batch, 1 channels_in, 2 h, 3 w (of the output),
 * 4 kh, 5 kw, 6 channels; with groups=G > 1 a dim 7 `group` (size G, role
 * batch) and dims 1 and 6 count the channels of one group (in/G, out/G).
 * The channel dims of x and of the output follow `group` then, and dims 1
 * and 6 are never split: a rank holds whole groups. */
#define _GNU_SOURCE
#include "ops.h"

static int build_conv(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "conv";
    if (op_want_tensors(P, c, nm, 1, 1) || op_want_rank(P, c, 0, nm, 4)
        || kw_check(P, c, nm, "out kernel stride pad dilation groups pw dim"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t nout, pw, groups;
    char oname[SB_NAME_MAX], cname[SB_NAME_MAX];
    if (!kw_get(c, "out"))
        return lang_err(P, c->callee, "conv: missing argument 'out' (output channels)");
    if (kw_int(P, c, "out", 0, 1, &nout) || kw_int(P, c, "pw", 0, 0, &pw)
        || kw_pair(P, c, "kernel", 1, 1, op->kernel) || kw_pair(P, c, "stride", 1, 1, op->stride)
        || kw_pair(P, c, "pad", 0, 0, op->pad) || kw_pair(P, c, "dilation", 1, 1, op->dilation)
        || kw_int(P, c, "groups", 1, 1, &groups) || kw_name(P, c, "dim", x->dims[1].name, oname))
        return -1;
    op->pw = (int)pw;
    if (x->dims[1].size % groups || nout % groups)
        return lang_err(P, kw_get(c, "groups")->at,
                        "conv: groups=%lld must divide the input channels (%lld of '%s') and "
                        "out=%lld", (long long)groups, (long long)x->dims[1].size, x->name,
                        (long long)nout);
    op->groups = (int)groups;
    /* a dilated kernel spans dilation * (kernel - 1) + 1 rows */
    int64_t eh = (int64_t)op->dilation[0] * (op->kernel[0] - 1) + 1;
    int64_t ew = (int64_t)op->dilation[1] * (op->kernel[1] - 1) + 1;
    int64_t ho = 0, wo = 0;
    int64_t hin = x->dims[2].size + 2 * op->pad[0] - eh;
    int64_t win = x->dims[3].size + 2 * op->pad[1] - ew;
    if (hin < 0 || win < 0)
        return lang_err(P, c->callee,
                        "conv: kernel %dx%d larger than padded input %lldx%lld of '%s' (dilation "
                        "%dx%d: the kernel spans %lldx%lld)",
                        op->kernel[0], op->kernel[1], (long long)(x->dims[2].size + 2 * op->pad[0]),
                        (long long)(x->dims[3].size + 2 * op->pad[1]), x->name, op->dilation[0],
                        op->dilation[1], (long long)eh, (long long)ew);
    ho = hin / op->stride[0] + 1;
    wo = win / op->stride[1] + 1;
    k_name(cname, x->dims[1].name, oname);
    if (op_dim(P, c->callee, op, x->dims[0].name, x->dims[0].size, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, cname, x->dims[1].size / groups, SB_ROLE_K) < 0
        || op_dim(P, c->callee, op, x->dims[2].name, ho, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, x->dims[3].name, wo, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, "kh", op->kernel[0], SB_ROLE_K) < 0
        || op_dim(P, c->callee, op, "kw", op->kernel[1], SB_ROLE_K) < 0
        || op_dim(P, c->callee, op, oname, nout / groups, SB_ROLE_N) < 0
        || (groups > 1 && op_dim(P, c->callee, op, "group", groups, SB_ROLE_BATCH) < 0))
        return -1;
    op->nosplit = (1u << 2) | (1u << 3);
    /* grouped: a channel dim of x or of the output is group-major (group,
     * channel of the group); it follows `group`, the per-group dims stay whole */
    int chan = groups > 1 ? 7 : 1, ochan = groups > 1 ? 7 : 6;
    if (groups > 1)
        op->nosplit |= (1u << 1) | (1u << 6);
    op->nin = 1;
    int imap[4] = {0, chan, 2, 3};
    set_operand(&op->in[0], c->tens[0], 4, imap);
    o->nout = 1;
    o->ndims[0] = 4;
    o->dims[0][0] = x->dims[0];
    snprintf(o->dims[0][1].name, SB_NAME_MAX, "%s", oname);
    o->dims[0][1].size = nout;
    o->dims[0][2] = x->dims[2];
    o->dims[0][2].size = ho;
    o->dims[0][3] = x->dims[3];
    o->dims[0][3].size = wo;
    int omap[4] = {0, ochan, 2, 3};
    memcpy(o->maps[0], omap, sizeof omap);
    return 0;
}

/* The filter (channels, channels_in, kh, kw); grouped: (group, channels of
 * a group, channels_in of a group, kh, kw), the bytes of PyTorch's
 * (out, in/G, kh, kw). */
static void conv_weights(sb_op *op)
{
    const int64_t none[SB_MAX_DIMS] = {0};
    int map[4] = {6, 1, 4, 5}, gmap[5] = {7, 6, 1, 4, 5};
    if (op->groups > 1)
        op_add_weight(op, ".w", 5, gmap, none, op_fan_in_scale(op), 0);
    else
        op_add_weight(op, ".w", 4, map, none, op_fan_in_scale(op), 0);
}

const op_rule op_rule_conv = {.names = {"conv"}, .build = build_conv, .weights = conv_weights};

static int build_pool(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "pool";
    if (op_want_tensors(P, c, nm, 1, 1) || op_want_rank(P, c, 0, nm, 4)
        || kw_check(P, c, nm, "kernel stride pad type"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    char type[SB_NAME_MAX];
    if (!kw_get(c, "kernel"))
        return lang_err(P, c->callee, "pool: missing argument 'kernel'");
    if (kw_pair(P, c, "kernel", 1, 1, op->kernel) || kw_pair(P, c, "stride", 1, 1, op->stride)
        || kw_pair(P, c, "pad", 0, 0, op->pad) || kw_name(P, c, "type", "max", type))
        return -1;
    if (strcmp(type, "max") && strcmp(type, "avg"))
        return lang_err(P, kw_get(c, "type")->at, "pool: type must be max or avg, got '%s'", type);
    op->pool_avg = strcmp(type, "avg") == 0;
    int64_t hin = x->dims[2].size + 2 * op->pad[0] - op->kernel[0];
    int64_t win = x->dims[3].size + 2 * op->pad[1] - op->kernel[1];
    if (hin < 0 || win < 0)
        return lang_err(P, c->callee, "pool: window %dx%d larger than padded input of '%s'",
                    op->kernel[0], op->kernel[1], x->name);
    int64_t sz[4] = {x->dims[0].size, x->dims[1].size, hin / op->stride[0] + 1,
                     win / op->stride[1] + 1};
    o->nout = 1;
    o->ndims[0] = 4;
    for (int i = 0; i < 4; i++) {
        if (op_dim(P, c->callee, op, x->dims[i].name, sz[i], SB_ROLE_NONE) < 0)
            return -1;
        o->dims[0][i] = x->dims[i];
        o->dims[0][i].size = sz[i];
        o->maps[0][i] = i;
    }
    op->nin = 1;
    int imap[4] = {0, 1, 2, 3};
    set_operand(&op->in[0], c->tens[0], 4, imap);
    return 0;
}

const op_rule op_rule_pool = {.names = {"pool"}, .build = build_pool};
