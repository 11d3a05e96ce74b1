/* lang.c: the model language's interpreter. Reads the format of
 * models/README.md: statements, params, blocks and their calls, repeat,
 * return, aliases, declarations. Each op call goes to its builder (op_exec,
 * ops/table.c), which makes the graph IR of shardbench/model.h. Every fault
 * names path:line:col (err.c). Tokens: lex.c; expressions and call
 * arguments: expr.c; names and scopes: names.c. Nothing it calls calls it
 * back. */
#define _GNU_SOURCE
#include "lang.h"

#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include "ops/ops.h"

static int expect_nl(parser *P, int *pos)
{
    char d[96];
    if (P->t[*pos].kind != TK_NL)
        return lang_err(P, &P->t[*pos], "expected end of line, found %s", tok_desc(&P->t[*pos], d, sizeof d));
    (*pos)++;
    return 0;
}

/* ---- statements ------------------------------------------------------------- */

static int exec_range(parser *P, scope *s, int start, int end, int *ret, int *nret, int *returned);

static int find_end(parser *P, int pos, int *endpos)
{
    /* pos: first token after the header line. Counts nested block/repeat. */
    int depth = 0, at_start = 1;
    const token *open = &P->t[pos - 1];
    for (int i = pos; i < P->n; i++) {
        token *tk = &P->t[i];
        if (tk->kind == TK_EOF)
            break;
        if (tk->kind == TK_NL) {
            at_start = 1;
            continue;
        }
        if (at_start) {
            if (tok_is(tk, "repeat") || tok_is(tk, "block"))
                depth++;
            else if (tok_is(tk, "end")) {
                if (depth == 0) {
                    *endpos = i;
                    return 0;
                }
                depth--;
            }
        }
        at_start = 0;
    }
    return lang_err(P, open, "missing 'end' for this block or repeat");
}

static blockdef *find_block(parser *P, const token *name)
{
    char nm[SB_NAME_MAX];
    tok_str(name, nm, sizeof nm);
    int *i = lang_strmap_get(&P->block_idx, nm);
    return i ? &P->blocks[*i] : NULL;
}

static int call_block(parser *P, scope *caller, blockdef *bd, call *c, target *tg)
{
    int bi = (int)(bd - P->blocks);
    for (int i = 0; i < P->depth; i++)
        if (P->stack[i] == bi)
            return lang_err(P, c->callee, "cycle: block '%s' calls itself", bd->name);
    if (P->depth == MAX_CALL_DEPTH)
        return lang_err(P, c->callee, "blocks nested too deeply (more than %d)", MAX_CALL_DEPTH);
    scope s = {0};
    char lhs[SB_NAME_MAX], uname[SB_NAME_MAX];
    tok_str(tg->lhs[0], lhs, sizeof lhs);
    if (lang_unique_name(P, tg->lhs[0], caller->prefix, lhs, uname))
        return -1;
    snprintf(s.prefix, sizeof s.prefix, "%.*s/", SB_NAME_MAX - 2, uname);
    int rc = -1;
    if (c->npos > bd->nformals) {
        lang_err(P, c->callee, "block '%s' takes %d arguments, got %d", bd->name, bd->nformals, c->npos);
        goto out;
    }
    if (c->str) {
        lang_err(P, c->str, "block '%s': unexpected string argument", bd->name);
        goto out;
    }
    for (int f = 0; f < bd->nformals; f++) {
        char fname[SB_NAME_MAX];
        tok_str(bd->formal[f], fname, sizeof fname);
        kwarg *kw = kw_get(c, fname);
        if (f < c->npos) {
            if (kw) {
                lang_err(P, kw->key, "block '%s': argument '%s' given twice", bd->name, fname);
                goto out;
            }
            if (lang_bind(P, &s, fname, c->pos_is_tensor[f], c->pos_v[f]))
                goto out;
        } else if (kw && kw->is_list) {
            if (lang_bind(P, &s, fname, 0, 0))
                goto out;
            binding *b = lang_find(&s, fname);
            for (int i = 0; i < kw->nitems; i++) {
                if (!kw->items[i].has_int || kw->items[i].name) {
                    lang_err(P, kw->at, "block '%s': list argument '%s' must hold integers", bd->name, fname);
                    goto out;
                }
                b->list[i] = kw->items[i].i;
            }
            b->nlist = kw->nitems;
        } else if (kw) {
            if (kw->str || kw->items[0].name) {
                lang_err(P, kw->at, "block '%s': argument '%s' must be a tensor or an integer", bd->name, fname);
                goto out;
            }
            if (kw->items[0].ident && !kw->items[0].has_int) {
                char tn[SB_NAME_MAX];
                tok_str(kw->items[0].ident, tn, sizeof tn);
                binding *b = lang_find(caller, tn);
                if (!b || !b->is_tensor) {
                    lang_err(P, kw->at, "unknown tensor '%s'", tn);
                    goto out;
                }
                if (lang_bind(P, &s, fname, 1, b->v))
                    goto out;
            } else if (lang_bind(P, &s, fname, 0, kw->items[0].i)) {
                goto out;
            }
        } else if (bd->def_start[f] >= 0) {
            int pos = bd->def_start[f];
            int64_t v;
            if (lang_expr(P, &s, &pos, &v) || lang_bind(P, &s, fname, 0, v))
                goto out;
        } else {
            lang_err(P, c->callee, "block '%s': missing argument '%s'", bd->name, fname);
            goto out;
        }
    }
    for (int i = 0; i < c->nkw; i++) {
        int ok = 0;
        for (int f = 0; f < bd->nformals; f++)
            ok |= tok_is(c->kw[i].key, "") || (c->kw[i].key->len == bd->formal[f]->len
                  && memcmp(c->kw[i].key->s, bd->formal[f]->s, (size_t)bd->formal[f]->len) == 0);
        if (!ok) {
            lang_err(P, c->kw[i].key, "block '%s' has no argument '%.*s'", bd->name, c->kw[i].key->len,
                 c->kw[i].key->s);
            goto out;
        }
    }
    P->stack[P->depth++] = bi;
    int ret[SB_MAX_IO], nret = 0, returned = 0;
    rc = exec_range(P, &s, bd->body, bd->end, ret, &nret, &returned);
    P->depth--;
    if (rc)
        goto out;
    rc = -1;
    if (!returned) {
        lang_err(P, c->callee, "block '%s' has no 'return'", bd->name);
        goto out;
    }
    if (nret != tg->nlhs) {
        lang_err(P, tg->lhs[0], "block '%s' returns %d tensor%s, but %d name%s on the left", bd->name,
             nret, nret == 1 ? "" : "s", tg->nlhs, tg->nlhs == 1 ? " is" : "s are");
        goto out;
    }
    for (int k = 0; k < nret; k++) {
        char ln[SB_NAME_MAX];
        tok_str(tg->lhs[k], ln, sizeof ln);
        if (lang_bind(P, caller, ln, 1, ret[k]))
            goto out;
    }
    rc = 0;
out:
    lang_scope_free(&s);
    return rc;
}

/* `input name[d=expr, ...]` or `weight name[...]` */
static int exec_decl(parser *P, scope *s, int *pos, sb_tensor_kind kind)
{
    const token *kwt = &P->t[*pos];
    (*pos)++;
    token *nt = &P->t[*pos];
    char d[96];
    if (nt->kind != TK_IDENT)
        return lang_err(P, nt, "expected a tensor name after '%.*s', found %s", kwt->len, kwt->s,
                    tok_desc(nt, d, sizeof d));
    (*pos)++;
    if (lang_expect_punct(P, pos, '['))
        return -1;
    sb_dim dims[SB_MAX_DIMS];
    int nd = 0;
    while (!tok_punct(&P->t[*pos], ']')) {
        token *dn = &P->t[*pos];
        if (nd == SB_MAX_DIMS)
            return lang_err(P, dn, "more than %d dims", SB_MAX_DIMS);
        if (dn->kind != TK_IDENT || !(tok_punct(&P->t[*pos + 1], '=') || tok_punct(&P->t[*pos + 1], ':')))
            return lang_err(P, dn, "expected 'name=size' for a dim, found %s", tok_desc(dn, d, sizeof d));
        tok_str(dn, dims[nd].name, SB_NAME_MAX);
        *pos += 2;
        if (lang_expr(P, s, pos, &dims[nd].size))
            return -1;
        nd++;
        if (tok_punct(&P->t[*pos], ','))
            (*pos)++;
        else if (!tok_punct(&P->t[*pos], ']'))
            return lang_expect_punct(P, pos, ']');
    }
    (*pos)++;
    if (nd == 0)
        return lang_err(P, nt, "tensor needs at least one dim");
    char lname[SB_NAME_MAX], uname[SB_NAME_MAX];
    tok_str(nt, lname, sizeof lname);
    if (lang_unique_name(P, nt, s->prefix, lname, uname))
        return -1;
    int t = op_add_tensor(P, nt, uname, kind, nd, dims, -1, 0);
    if (t < 0 || lang_bind(P, s, lname, 1, t))
        return -1;
    return expect_nl(P, pos);
}

/* `tie W = E`: declared weight W (rank 2: embed, vocab) is the table of
 * the embedding op that made tensor E, transposed (a tied output head).
 * sb_model_param_count counts it once (sb_model.tied). */
static int exec_tie(parser *P, scope *s, int *pos)
{
    token *wt = &P->t[*pos + 1], *et = &P->t[*pos + 3];
    char d[96], wn[SB_NAME_MAX], en[SB_NAME_MAX];
    if (wt->kind != TK_IDENT)
        return lang_err(P, wt, "expected a weight name after 'tie', found %s", tok_desc(wt, d, sizeof d));
    *pos += 2;
    if (lang_expect_punct(P, pos, '='))
        return -1;
    if (et->kind != TK_IDENT)
        return lang_err(P, et, "expected a tensor name after '=', found %s", tok_desc(et, d, sizeof d));
    (*pos)++;
    tok_str(wt, wn, sizeof wn);
    tok_str(et, en, sizeof en);
    binding *bw = lang_find(s, wn), *be = lang_find(s, en);
    if (!bw || !bw->is_tensor || P->m->tensors[bw->v].kind != SB_TENSOR_WEIGHT)
        return lang_err(P, wt, "tie: '%s' is not a declared weight", wn);
    if (!be || !be->is_tensor || P->m->tensors[be->v].producer < 0 ||
        P->m->ops[P->m->tensors[be->v].producer].kind != SB_OP_EMBEDDING)
        return lang_err(P, et, "tie: '%s' is not the output of an embedding", en);
    const sb_tensor *w = &P->m->tensors[bw->v];
    const sb_op *e = &P->m->ops[P->m->tensors[be->v].producer];
    const sb_weight *tab = &e->weights[0];
    if (w->ndims != 2 || w->dims[0].size != tab->size[1] || w->dims[1].size != tab->size[0])
        return lang_err(P, wt, "tie: '%s' must be [%lld, %lld], the table of '%s' transposed", wn,
                        (long long)tab->size[1], (long long)tab->size[0], e->name);
    for (int i = 0; i < P->m->ntied; i++)
        if (P->m->tied[i] == (int)bw->v)
            return lang_err(P, wt, "tie: '%s' is tied already", wn);
    if (P->m->ntied == 4)
        return lang_err(P, wt, "tie: at most 4 tied weights");
    P->m->tied[P->m->ntied] = (int)bw->v;
    P->m->tied_to[P->m->ntied++] = P->m->tensors[be->v].producer;
    return expect_nl(P, pos);
}

/* Nested repeats of statements that make no op (or of nothing) are
 * bounded too: MAX_STEPS statements and repeat rounds in all. */
static int too_many_steps(parser *P, const token *tk)
{
    return lang_err(P, tk, "more than %d statements run (repeats nested too deep?)", MAX_STEPS);
}

/* `repeat N` ... `end`: the body N times. */
static int exec_repeat(parser *P, scope *s, int *pos, int end, int *ret, int *nret, int *returned)
{
    const token *tk = &P->t[*pos];
    (*pos)++;
    int64_t n;
    if (lang_expr(P, s, pos, &n) || expect_nl(P, pos))
        return -1;
    if (n < 0 || n > MAX_OPS)
        return lang_err(P, tk, "repeat count %lld out of range", (long long)n);
    int e;
    if (find_end(P, *pos, &e))
        return -1;
    if (e > end)
        return lang_err(P, tk, "missing 'end' for this repeat");
    for (int64_t k = 0; k < n; k++) {
        if (++P->steps > MAX_STEPS)
            return too_many_steps(P, tk);
        if (exec_range(P, s, *pos, e, ret, nret, returned))
            return -1;
        if (*returned)
            return lang_err(P, tk, "'return' inside 'repeat' is not allowed");
    }
    *pos = e + 1;
    if (expect_nl(P, pos))
        return -1;
    return 0;
}

/* `return a, b` into ret; nothing may follow it before `end`. */
static int exec_return(parser *P, scope *s, int *pos, int end, int *ret, int *nret)
{
    const token *tk = &P->t[*pos];
    char d[96];
    if (P->depth == 0)
        return lang_err(P, tk, "'return' outside a block");
    (*pos)++;
    *nret = 0;
    for (;;) {
        token *nt = &P->t[*pos];
        char name[SB_NAME_MAX];
        if (nt->kind != TK_IDENT)
            return lang_err(P, nt, "expected a tensor name after 'return', found %s", tok_desc(nt, d, sizeof d));
        tok_str(nt, name, sizeof name);
        binding *b = lang_find(s, name);
        if (!b || !b->is_tensor)
            return lang_err(P, nt, "unknown tensor '%s'", name);
        if (*nret == SB_MAX_IO)
            return lang_err(P, nt, "too many returned tensors");
        ret[(*nret)++] = (int)b->v;
        (*pos)++;
        if (!tok_punct(&P->t[*pos], ','))
            break;
        (*pos)++;
    }
    if (expect_nl(P, pos))
        return -1;
    for (; *pos < end; (*pos)++)
        if (P->t[*pos].kind != TK_NL)
            return lang_err(P, &P->t[*pos], "statement after 'return'");
    return 0;
}

/* `a, b = callee(args)` (an op or a block call) or `a = b` (an alias). */
static int exec_assign(parser *P, scope *s, int *pos)
{
    char d[96];
    target tg = {.s = s};
    for (;;) {
        token *lt = &P->t[*pos];
        if (lt->kind != TK_IDENT)
            return lang_err(P, lt, "expected a name, found %s", tok_desc(lt, d, sizeof d));
        if (tg.nlhs == SB_MAX_IO)
            return lang_err(P, lt, "too many names on the left");
        tg.lhs[tg.nlhs++] = lt;
        (*pos)++;
        if (tok_punct(&P->t[*pos], ',')) {
            (*pos)++;
            continue;
        }
        break;
    }
    if (!tok_punct(&P->t[*pos], '='))
        return lang_err(P, &P->t[*pos], "expected '=' (statements look like 'y = op(x, ...)'), found %s",
                    tok_desc(&P->t[*pos], d, sizeof d));
    (*pos)++;
    if (P->t[*pos].kind == TK_IDENT && P->t[*pos + 1].kind == TK_NL && tg.nlhs == 1) {
        /* alias: `a = b` names an existing tensor */
        char from[SB_NAME_MAX], to[SB_NAME_MAX];
        tok_str(&P->t[*pos], from, sizeof from);
        tok_str(tg.lhs[0], to, sizeof to);
        binding *b = lang_find(s, from);
        if (!b || !b->is_tensor)
            return lang_err(P, &P->t[*pos], "unknown tensor '%s'", from);
        if (lang_bind(P, s, to, 1, b->v))
            return -1;
        *pos += 2;
        return 0;
    }
    if (P->t[*pos].kind != TK_IDENT || !tok_punct(&P->t[*pos + 1], '('))
        return lang_err(P, &P->t[*pos], "expected an op call like 'conv(x, out=64)', found %s",
                    tok_desc(&P->t[*pos], d, sizeof d));
    call c;
    if (lang_call(P, s, pos, &c) || expect_nl(P, pos))
        return -1;
    blockdef *bd = find_block(P, c.callee);
    if (bd)
        return call_block(P, s, bd, &c, &tg);
    return op_exec(P, s, &c, &tg);
}

static int exec_range(parser *P, scope *s, int start, int end, int *ret, int *nret, int *returned)
{
    int pos = start;
    char d[96];
    while (pos < end) {
        token *tk = &P->t[pos];
        if (tk->kind == TK_NL) {
            pos++;
            continue;
        }
        if (++P->steps > MAX_STEPS)
            return too_many_steps(P, tk);
        if (tk->kind != TK_IDENT)
            return lang_err(P, tk, "expected a statement, found %s", tok_desc(tk, d, sizeof d));
        if (tok_is(tk, "model") || tok_is(tk, "param") || tok_is(tk, "cutoff")) {
            if (P->depth > 0 || s->prefix[0])
                return lang_err(P, tk, "'%.*s' is only allowed at top level", tk->len, tk->s);
            while (P->t[pos].kind != TK_NL)
                pos++;
            continue;
        }
        if (tok_is(tk, "block")) {
            if (P->depth > 0)
                return lang_err(P, tk, "blocks must be defined at top level");
            int e;
            if (find_end(P, pos + 1, &e))
                return -1;
            pos = e + 1;
            continue;
        }
        if (tok_is(tk, "end"))
            return lang_err(P, tk, "'end' without 'block' or 'repeat'");
        if (tok_is(tk, "input") || tok_is(tk, "weight")) {
            if (exec_decl(P, s, &pos, tok_is(tk, "input") ? SB_TENSOR_INPUT : SB_TENSOR_WEIGHT))
                return -1;
            continue;
        }
        if (tok_is(tk, "tie") && P->t[pos + 1].kind == TK_IDENT && tok_punct(&P->t[pos + 2], '=')) {
            if (exec_tie(P, s, &pos))
                return -1;
            continue;
        }
        if (tok_is(tk, "repeat")) {
            if (exec_repeat(P, s, &pos, end, ret, nret, returned))
                return -1;
            continue;
        }
        if (tok_is(tk, "return")) {
            if (exec_return(P, s, &pos, end, ret, nret))
                return -1;
            *returned = 1;
            return 0;
        }
        if (exec_assign(P, s, &pos))
            return -1;
    }
    return 0;
}

/* `model NAME` (NAME may hold `-`: transformer-large) or `model "NAME"`
 * (any of letters, digits, `-`, `_`, `.`: "llama3-8b"). */
static int pass1_model(parser *P, int *pos)
{
    sb_model *m = P->m;
    char d[96];
    (*pos)++;
    token *q = &P->t[*pos];
    if (q->kind == TK_STRING) {
        if (q->len < 1 || (size_t)q->len >= sizeof m->name)
            return lang_err(P, q, "a model name has 1 to %d characters", (int)sizeof m->name - 1);
        for (int i = 0; i < q->len; i++)
            if (!isalnum((unsigned char)q->s[i]) && !strchr("-_.", q->s[i]))
                return lang_err(P, q, "model name %s: only letters, digits, '-', '_' and '.'",
                                tok_desc(q, d, sizeof d));
        snprintf(m->name, sizeof m->name, "%.*s", q->len, q->s);
        (*pos)++;
        return expect_nl(P, pos);
    }
    if (P->t[*pos].kind != TK_IDENT)
        return lang_err(P, &P->t[*pos], "expected a model name, found %s", tok_desc(&P->t[*pos], d, sizeof d));
    tok_str(&P->t[*pos], m->name, sizeof m->name);
    (*pos)++;
    /* names like transformer-large: IDENT ('-' (IDENT|INT))* */
    while (tok_punct(&P->t[*pos], '-')
           && (P->t[*pos + 1].kind == TK_IDENT || P->t[*pos + 1].kind == TK_INT)
           && strlen(m->name) + 2 + (size_t)(P->t[*pos + 1].kind == TK_IDENT ? P->t[*pos + 1].len : 20) < sizeof m->name) {
        char part[SB_NAME_MAX];
        if (P->t[*pos + 1].kind == TK_IDENT)
            tok_str(&P->t[*pos + 1], part, sizeof part);
        else
            snprintf(part, sizeof part, "%lld", (long long)P->t[*pos + 1].ival);
        strcat(m->name, "-");
        strcat(m->name, part);
        *pos += 2;
    }
    if (expect_nl(P, pos))
        return -1;
    return 0;
}

/* The line of the first statement before token `upto` that starts with
 * keyword kw (and then the name of token `name`, when not NULL); 0 if none. */
static int first_line(const parser *P, int upto, const char *kw, const token *name)
{
    for (int i = 0; i < upto; i++) {
        const token *t = &P->t[i];
        if (!tok_is(t, kw) || (i > 0 && P->t[i - 1].kind != TK_NL))
            continue;
        const token *n = &P->t[i + 1];
        if (!name || (n->kind == name->kind && n->len == name->len
                      && !memcmp(n->s, name->s, (size_t)name->len)))
            return t->line;
    }
    return 0;
}

/* `param NAME = EXPR`, or the value --set gives it. */
static int pass1_param(parser *P, int *pos, const sb_setting *settings, int nsettings, int *used)
{
    sb_model *m = P->m;
    char d[96];
    (*pos)++;
    token *nt = &P->t[*pos];
    if (nt->kind != TK_IDENT)
        return lang_err(P, nt, "expected a parameter name, found %s", tok_desc(nt, d, sizeof d));
    char name[SB_NAME_MAX];
    tok_str(nt, name, sizeof name);
    if (lang_param(P, name))
        return lang_err(P, nt, "parameter '%s' defined twice (first on line %d)", name,
                        first_line(P, *pos - 1, "param", nt));
    (*pos)++;
    if (lang_expect_punct(P, pos, '='))
        return -1;
    int64_t v;
    if (lang_expr(P, NULL, pos, &v) || expect_nl(P, pos))
        return -1;
    for (int i = 0; i < nsettings; i++)
        if (strcmp(settings[i].name, name) == 0) {
            v = settings[i].value;
            used[i] = 1;
        }
    if (m->nparams == P->cap_params) {
        int nc = P->cap_params ? P->cap_params * 2 : 16;
        sb_param *np = sb_realloc(m->params, (size_t)nc * sizeof *np, P->err);
        if (!np)
            return -1;
        m->params = np;
        P->cap_params = nc;
    }
    int k = m->nparams++;
    snprintf(m->params[k].name, SB_NAME_MAX, "%s", name);
    m->params[k].value = v;
    return lang_strmap_put(P, &P->param_idx, m->params[k].name, k);
}

/* `block NAME(args)` ... `end`: its arguments, defaults and body, for calls. */
static int pass1_block(parser *P, int *pos)
{
    char d[96];
    (*pos)++;
    token *nt = &P->t[*pos];
    if (nt->kind != TK_IDENT)
        return lang_err(P, nt, "expected a block name, found %s", tok_desc(nt, d, sizeof d));
    if (find_block(P, nt))
        return lang_err(P, nt, "block '%.*s' defined twice (first on line %d)", nt->len, nt->s,
                        first_line(P, *pos - 1, "block", nt));
    if (P->nblocks == P->cap_blocks) {
        int nc = P->cap_blocks ? P->cap_blocks * 2 : 16;
        blockdef *nb = sb_realloc(P->blocks, (size_t)nc * sizeof *nb, P->err);
        if (!nb)
            return -1;
        P->blocks = nb;
        P->cap_blocks = nc;
    }
    blockdef *bd = &P->blocks[P->nblocks];
    memset(bd, 0, sizeof *bd);
    tok_str(nt, bd->name, sizeof bd->name);
    if (lang_strmap_put(P, &P->block_idx, bd->name, P->nblocks++))
        return -1;
    bd->header = *pos;
    (*pos)++;
    if (lang_expect_punct(P, pos, '('))
        return -1;
    while (!tok_punct(&P->t[*pos], ')')) {
        token *ft = &P->t[*pos];
        if (ft->kind != TK_IDENT)
            return lang_err(P, ft, "expected an argument name, found %s", tok_desc(ft, d, sizeof d));
        if (bd->nformals == MAX_KW)
            return lang_err(P, ft, "too many block arguments (at most %d)", MAX_KW);
        for (int f = 0; f < bd->nformals; f++)
            if (bd->formal[f]->len == ft->len && !memcmp(bd->formal[f]->s, ft->s, (size_t)ft->len))
                return lang_err(P, ft, "argument '%.*s' repeated", ft->len, ft->s);
        bd->formal[bd->nformals] = ft;
        bd->def_start[bd->nformals] = -1;
        (*pos)++;
        if (tok_punct(&P->t[*pos], '=')) {
            (*pos)++;
            bd->def_start[bd->nformals] = *pos;
            int64_t dummy;
            scope empty = {0};
            /* defaults may use params and earlier arguments; checked at call */
            while (!tok_punct(&P->t[*pos], ',') && !tok_punct(&P->t[*pos], ')')
                   && P->t[*pos].kind != TK_EOF)
                (*pos)++;
            (void)dummy;
            (void)empty;
        }
        bd->nformals++;
        if (tok_punct(&P->t[*pos], ','))
            (*pos)++;
        else if (!tok_punct(&P->t[*pos], ')'))
            return lang_expect_punct(P, pos, ')');
    }
    (*pos)++;
    if (expect_nl(P, pos))
        return -1;
    bd->body = *pos;
    if (find_end(P, *pos, &bd->end))
        return -1;
    *pos = bd->end + 1;
    if (expect_nl(P, pos))
        return -1;
    return 0;
}

/* Pass 1: model name, params (in order, with settings applied), cutoff,
 * block definitions. */
static int pass1(parser *P, const sb_setting *settings, int nsettings, int *used)
{
    sb_model *m = P->m;
    int pos = 0, have_cutoff = 0;
    while (P->t[pos].kind != TK_EOF) {
        token *tk = &P->t[pos];
        if (tk->kind == TK_NL) {
            pos++;
            continue;
        }
        if (tok_is(tk, "model")) {
            if (first_line(P, pos, "model", NULL)) /* one name: not the last of several */
                return lang_err(P, tk, "'model' given twice (first on line %d)",
                                first_line(P, pos, "model", NULL));
            if (pass1_model(P, &pos))
                return -1;
        } else if (tok_is(tk, "param")) {
            if (pass1_param(P, &pos, settings, nsettings, used))
                return -1;
        } else if (tok_is(tk, "cutoff")) {
            pos++;
            int64_t v;
            if (lang_expr(P, NULL, &pos, &v) || expect_nl(P, &pos))
                return -1;
            if (v < 1 || v > (1 << 30))
                return lang_err(P, tk, "cutoff must be a positive integer, got %lld", (long long)v);
            if (have_cutoff)
                return lang_err(P, tk, "cutoff given twice (first on line %d)",
                                first_line(P, (int)(tk - P->t), "cutoff", NULL));
            have_cutoff = 1;
            m->cutoff = (int)v;
        } else if (tok_is(tk, "block")) {
            if (pass1_block(P, &pos))
                return -1;
        } else {
            /* skip other statements (and whole repeat bodies) in pass 1 */
            if (tok_is(tk, "repeat")) {
                while (P->t[pos].kind != TK_NL)
                    pos++;
                pos++;
                int e;
                if (find_end(P, pos, &e))
                    return -1;
                pos = e + 1;
            }
            while (P->t[pos].kind != TK_NL && P->t[pos].kind != TK_EOF)
                pos++;
        }
    }
    return 0;
}

int sb_model_parse(const char *text, size_t len, const char *path, const sb_setting *settings,
                   int nsettings, sb_model *out, sb_error *err)
{
    memset(out, 0, sizeof *out);
    parser P = {.path = path, .m = out, .err = err};
    token_list tl;
    if (sb_lex(text, len, path, &tl, err))
        return -1;
    P.t = tl.t;
    P.n = tl.n;
    snprintf(out->path, sizeof out->path, "%s", path);
    /* no `model` line: the file's name up to its first '.', checked as a
     * `model` line's is: any other character than a letter, digit, '-',
     * '_' or '.' replaced by '_' (so no control byte, quote or ';' reaches
     * a terminal, the database or a shell); none left: "model" */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strcspn(base, ".");
    if (bl >= sizeof out->name)
        bl = sizeof out->name - 1;
    for (size_t i = 0; i < bl; i++)
        out->name[i] = isalnum((unsigned char)base[i]) || strchr("-_", base[i]) ? base[i] : '_';
    out->name[bl] = '\0';
    if (!bl)
        snprintf(out->name, sizeof out->name, "model");
    out->cutoff = 4;
    int *used = calloc((size_t)(nsettings > 0 ? nsettings : 1), sizeof *used);
    scope top = {0};
    int rc = -1;
    if (!used) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto done;
    }
    if (pass1(&P, settings, nsettings, used))
        goto done;
    for (int i = 0; i < nsettings; i++)
        if (!used[i]) {
            char known[512] = "";
            for (int j = 0; j < out->nparams; j++) {
                strncat(known, j ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, out->params[j].name, sizeof known - strlen(known) - 1);
            }
            sb_fail(err, SB_EXIT_INPUT, "%s: unknown parameter '%s' in --set (parameters: %s)", path,
                    settings[i].name, known[0] ? known : "none");
            goto done;
        }
    int ret[SB_MAX_IO], nret = 0, returned = 0;
    if (exec_range(&P, &top, 0, P.n - 1, ret, &nret, &returned))
        goto done;
    if (out->nops == 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s: the model has no ops", path);
        goto done;
    }
    rc = 0;
done:
    lang_scope_free(&top);
    free(used);
    free(P.blocks);
    lang_strmap_free(&P.names);
    lang_strmap_free(&P.suffix);
    lang_strmap_free(&P.param_idx);
    lang_strmap_free(&P.block_idx);
    free(tl.t);
    if (rc)
        sb_model_free(out);
    return rc;
}
