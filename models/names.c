/* names.c: the names of a model being parsed: the unique names of ops and
 * tensors ("x", "x.1", ...; the next free suffix of each name remembered),
 * scopes (what a name is bound to in a block call or at top level), params
 * by name.
 * Lookups are hashed (strmap), so parsing takes time in proportion to the
 * ops made. */
#define _GNU_SOURCE
#include "lang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- name registry (op and tensor names are unique) --------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Slot of s in the map: where it is, or the empty slot where it goes. */
static size_t strmap_slot(const strmap *m, const char *s)
{
    size_t i = hash_str(s) & (m->cap - 1);
    while (m->key[i] && strcmp(m->key[i], s) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

int *lang_strmap_get(strmap *m, const char *s)
{
    if (!m->cap)
        return NULL;
    size_t i = strmap_slot(m, s);
    return m->key[i] ? &m->val[i] : NULL;
}

int lang_strmap_put(parser *P, strmap *m, const char *s, int v)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        strmap g = {.cap = nc, .n = m->n};
        g.key = sb_calloc(nc, sizeof *g.key, P->err);
        g.val = g.key ? sb_calloc(nc, sizeof *g.val, P->err) : NULL;
        if (!g.val) {
            free(g.key);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t j = strmap_slot(&g, m->key[i]);
                g.key[j] = m->key[i];
                g.val[j] = m->val[i];
            }
        free(m->key);
        free(m->val);
        *m = g;
    }
    size_t j = strmap_slot(m, s);
    m->key[j] = strdup(s);
    if (!m->key[j])
        return sb_fail(P->err, SB_EXIT_INTERNAL, "out of memory");
    m->val[j] = v;
    m->n++;
    return 0;
}

void lang_strmap_free(strmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->key[i]);
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* Makes prefix+base unique among op and tensor names ("x", "x.1", ...): the
 * first of x, x.1, x.2, ... not taken. Names are never released, so the
 * suffixes below the one last given to x stay taken, and the search for
 * the next x starts there (one step per name instead of one per earlier x). */
int lang_unique_name(parser *P, const token *at, const char *prefix, const char *base,
                       char *out)
{
    char stem[SB_NAME_MAX + 32], cand[SB_NAME_MAX + 48];
    snprintf(stem, sizeof stem, "%s%s", prefix, base);
    snprintf(cand, sizeof cand, "%s", stem);
    if (lang_strmap_get(&P->names, cand)) {
        int *next = lang_strmap_get(&P->suffix, stem);
        int k = next ? *next : 1;
        do
            snprintf(cand, sizeof cand, "%s.%d", stem, k++);
        while (lang_strmap_get(&P->names, cand));
        if (strlen(cand) < SB_NAME_MAX) {
            if (next)
                *next = k;
            else if (lang_strmap_put(P, &P->suffix, stem, k))
                return -1;
        }
    }
    if (strlen(cand) >= SB_NAME_MAX)
        return lang_err(P, at, "name '%s' too long (nested blocks too deep?)", cand);
    strcpy(out, cand);
    return lang_strmap_put(P, &P->names, cand, 0);
}

/* ---- scopes -------------------------------------------------------------- */

binding *lang_find(scope *s, const char *name)
{
    int *i = lang_strmap_get(&s->idx, name);
    return i ? &s->b[*i] : NULL;
}

int lang_bind(parser *P, scope *s, const char *name, int is_tensor, int64_t v)
{
    binding *b = lang_find(s, name);
    if (!b) {
        if (s->n == s->cap) {
            int nc = s->cap ? s->cap * 2 : 32;
            binding *nb = sb_realloc(s->b, (size_t)nc * sizeof *nb, P->err);
            if (!nb)
                return -1;
            s->b = nb;
            s->cap = nc;
        }
        b = &s->b[s->n];
        snprintf(b->name, sizeof b->name, "%s", name);
        if (lang_strmap_put(P, &s->idx, b->name, s->n))
            return -1;
        s->n++;
    }
    b->is_tensor = is_tensor;
    b->v = v;
    b->nlist = 0;
    return 0;
}

void lang_scope_free(scope *s)
{
    free(s->b);
    lang_strmap_free(&s->idx);
}

sb_param *lang_param(parser *P, const char *name)
{
    int *i = lang_strmap_get(&P->param_idx, name);
    return i ? &P->m->params[*i] : NULL;
}
