/* ops/einsum.c: einsum of two operands, its equation and roles. */
#define _GNU_SOURCE
#include "ops.h"

/* Parses "a b c, d e -> a d" (names separated by spaces). */
typedef struct {
    int n[3];
    char name[3][SB_MAX_DIMS][SB_NAME_MAX];
} eqn;

static int parse_eqn(parser *P, const token *at, eqn *e)
{
    memset(e, 0, sizeof *e);
    int part = 0;
    int i = 0;
    const char *s = at->s;
    int len = at->len;
    while (i < len) {
        char ch = s[i];
        if (ch == ' ' || ch == '\t') {
            i++;
        } else if (ch == ',') {
            if (part != 0)
                return lang_err(P, at, "einsum: equation needs exactly two inputs ('a b, b c -> a c')");
            part = 1;
            i++;
        } else if (ch == '-' && i + 1 < len && s[i + 1] == '>') {
            if (part != 1)
                return lang_err(P, at, "einsum: equation needs two inputs before '->'");
            part = 2;
            i += 2;
        } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
            int j = i;
            while (j < len && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z')
                               || (s[j] >= '0' && s[j] <= '9') || s[j] == '_'))
                j++;
            if (e->n[part] == SB_MAX_DIMS)
                return lang_err(P, at, "einsum: more than %d dims in one operand", SB_MAX_DIMS);
            if (j - i >= SB_NAME_MAX)
                return lang_err(P, at, "einsum: dim name too long");
            memcpy(e->name[part][e->n[part]], s + i, (size_t)(j - i));
            e->name[part][e->n[part]][j - i] = '\0';
            for (int k = 0; k < e->n[part]; k++)
                if (strcmp(e->name[part][k], e->name[part][e->n[part]]) == 0)
                    return lang_err(P, at, "einsum: dim '%s' repeated in one operand",
                                e->name[part][k]);
            e->n[part]++;
            i = j;
        } else {
            return lang_err(P, at, "einsum: unexpected character '%c' in equation", ch);
        }
    }
    if (part != 2 || !e->n[0] || !e->n[1] || !e->n[2])
        return lang_err(P, at, "einsum: equation must look like 'b s e, e f -> b s f'");
    return 0;
}

static int eqn_find(const eqn *e, int part, const char *name)
{
    for (int i = 0; i < e->n[part]; i++)
        if (strcmp(e->name[part][i], name) == 0)
            return i;
    return -1;
}

static int build_einsum(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "einsum";
    if (op_want_tensors(P, c, nm, 2, 2) || kw_check(P, c, nm, "pw"))
        return -1;
    if (!c->str)
        return lang_err(P, c->callee, "einsum: missing the equation string, e.g. \"b s e, e f -> b s f\"");
    int64_t pw;
    if (kw_int(P, c, "pw", 0, 0, &pw))
        return -1;
    op->pw = (int)pw;
    eqn e;
    if (parse_eqn(P, c->str, &e))
        return -1;
    const sb_tensor *in[2] = {T(P, c->tens[0]), T(P, c->tens[1])};
    for (int k = 0; k < 2; k++)
        if (in[k]->ndims != e.n[k])
            return lang_err(P, c->tens_at[k], "einsum: operand %d '%s' has rank %d, the equation says %d",
                        k + 1, in[k]->name, in[k]->ndims, e.n[k]);
    /* sizes must agree */
    for (int i = 0; i < e.n[0]; i++) {
        int j = eqn_find(&e, 1, e.name[0][i]);
        if (j >= 0 && in[0]->dims[i].size != in[1]->dims[j].size)
            return lang_err(P, c->str, "einsum: dim '%s' is %lld in '%s' but %lld in '%s'", e.name[0][i],
                        (long long)in[0]->dims[i].size, in[0]->name, (long long)in[1]->dims[j].size,
                        in[1]->name);
    }
    /* output dims first, then reduction dims */
    int nm_ = 0, nn = 0;
    for (int i = 0; i < e.n[2]; i++) {
        const char *d = e.name[2][i];
        int a = eqn_find(&e, 0, d), b = eqn_find(&e, 1, d);
        if (a < 0 && b < 0)
            return lang_err(P, c->str, "einsum: output dim '%s' is in neither input", d);
        int role = a >= 0 && b >= 0 ? SB_ROLE_BATCH : a >= 0 ? SB_ROLE_M : SB_ROLE_N;
        nm_ += role == SB_ROLE_M;
        nn += role == SB_ROLE_N;
        int64_t size = a >= 0 ? in[0]->dims[a].size : in[1]->dims[b].size;
        if (op_dim(P, c->str, op, d, size, role) < 0)
            return -1;
        for (int k = 0; k < i; k++)
            if (strcmp(e.name[2][k], d) == 0)
                return lang_err(P, c->str, "einsum: output dim '%s' repeated", d);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < e.n[k]; i++) {
            const char *d = e.name[k][i];
            if (eqn_find(&e, 2, d) >= 0)
                continue;
            if (eqn_find(&e, 1 - k, d) < 0)
                return lang_err(P, c->str, "einsum: dim '%s' appears in one input only and not in the output (not supported)", d);
            if (k == 1)
                continue; /* added from the first input already */
            if (op_dim(P, c->str, op, d, in[0]->dims[i].size, SB_ROLE_K) < 0)
                return -1;
        }
    if (nm_ < 1 || nn < 1)
        return lang_err(P, c->str, "einsum: needs at least one output dim only in the first input and one only in the second (got %d and %d)",
                    nm_, nn);
    op->nin = 2;
    for (int k = 0; k < 2; k++) {
        int map[SB_MAX_DIMS];
        for (int i = 0; i < e.n[k]; i++)
            for (int j = 0; j < op->ndims; j++)
                if (strcmp(op->dims[j].name, e.name[k][i]) == 0)
                    map[i] = j;
        set_operand(&op->in[k], c->tens[k], e.n[k], map);
    }
    o->nout = 1;
    o->ndims[0] = e.n[2];
    for (int i = 0; i < e.n[2]; i++) {
        o->dims[0][i] = op->dims[i];
        o->maps[0][i] = i;
    }
    return 0;
}

const op_rule op_rule_einsum = {.names = {"einsum"}, .build = build_einsum};
