/* dp_reuse.c: repeated eliminations of the exact DP, copied instead of
 * computed (dp_reuse.h says when; search/README.md, "Exact shortcuts"). */
#include "dp_reuse.h"

#include <stdlib.h>
#include <string.h>

struct dp_memo_entry {
    uint64_t h;
    int nv, k, nin;
    int dom[DP_MAX_SCOPE];
    double *base;  /* nv */
    dp_inflow *in; /* nin, their tables copied */
    int64_t gsize;
    double *g;     /* the result: table and argmins */
    uint16_t *arg;
    double bytes;
};

static uint64_t hash_words(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 32;
    }
    for (size_t i = n & ~(size_t)7; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

static void free_entry(dp_memo_entry *e)
{
    for (int q = 0; q < e->nin; q++)
        free(e->in[q].t);
    free(e->in);
    free(e->base);
    free(e->g);
    free(e->arg);
}

/* Mixes n doubles into h: all of them when few, else an even sample of
 * HASH_SAMPLE (the hash only finds candidates: equality is checked in full). */
#define HASH_SAMPLE 4096
static uint64_t hash_table(uint64_t h, const double *t, int64_t n)
{
    if (n <= 2 * HASH_SAMPLE)
        return hash_words(h, t, (size_t)n * sizeof *t);
    int64_t step = n / HASH_SAMPLE;
    for (int64_t i = 0; i < n; i += step)
        h = hash_words(h, t + i, sizeof *t);
    return hash_words(h, t + n - 1, sizeof *t);
}

uint64_t dp_memo_hash(const dp_elim_inputs *x)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    int hdr[3] = {x->nv, x->k, x->nin};
    h = hash_words(h, hdr, sizeof hdr);
    for (int q = 0; q < x->k; q++)
        h = hash_words(h, &x->dom[q], sizeof x->dom[q]);
    h = hash_words(h, x->base, (size_t)x->nv * sizeof *x->base);
    for (int q = 0; q < x->nin; q++) {
        const dp_inflow *fl = &x->in[q];
        h = hash_words(h, &fl->level, sizeof fl->level);
        h = hash_words(h, fl->pos, (size_t)fl->nv * sizeof *fl->pos);
        h = hash_table(h, fl->t, fl->rows * x->nv);
    }
    return h;
}

/* Whether e's inputs are x's (hash h), compared in full. */
static int same_inputs(const dp_memo_entry *e, uint64_t h, const dp_elim_inputs *x)
{
    if (e->h != h || e->nv != x->nv || e->k != x->k || e->nin != x->nin)
        return 0;
    if (memcmp(e->dom, x->dom, (size_t)x->k * sizeof *x->dom))
        return 0;
    if (memcmp(e->base, x->base, (size_t)x->nv * sizeof *x->base))
        return 0;
    for (int q = 0; q < x->nin; q++) {
        const dp_inflow *a = &e->in[q], *b = &x->in[q];
        if (a->nv != b->nv || a->level != b->level || a->rows != b->rows
            || memcmp(a->pos, b->pos, (size_t)a->nv * sizeof *a->pos)
            || memcmp(a->t, b->t, (size_t)(a->rows * x->nv) * sizeof *a->t))
            return 0;
    }
    return 1;
}

int dp_memo_take(dp_memo *m, uint64_t h, const dp_elim_inputs *x, double *g, uint16_t *arg,
                 int64_t gsize)
{
    for (int i = m->n - 1; i >= 0; i--)
        if (same_inputs(&m->e[i], h, x)) {
            memcpy(g, m->e[i].g, (size_t)gsize * sizeof *g);
            memcpy(arg, m->e[i].arg, (size_t)gsize * sizeof *arg);
            m->hits++;
            return 1;
        }
    return 0;
}

dp_memo_entry *dp_memo_prepare(const dp_memo *m, uint64_t h, const dp_elim_inputs *x,
                               int64_t gsize)
{
    int nv = x->nv, nin = x->nin;
    double bytes = (double)nv * 8 + (double)gsize * 10;
    for (int q = 0; q < nin; q++)
        bytes += (double)(x->in[q].rows * nv) * 8;
    if (bytes > m->cap / 2)
        return NULL;
    dp_memo_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    *e = (dp_memo_entry){.h = h, .nv = nv, .k = x->k, .nin = nin, .gsize = gsize, .bytes = bytes};
    memcpy(e->dom, x->dom, (size_t)x->k * sizeof *x->dom);
    e->base = malloc((size_t)nv * sizeof *e->base);
    e->in = calloc((size_t)(nin ? nin : 1), sizeof *e->in);
    int ok = e->base && e->in;
    for (int q = 0; ok && q < nin; q++) {
        e->in[q] = x->in[q];
        size_t n = (size_t)(x->in[q].rows * nv) * sizeof *x->in[q].t;
        e->in[q].t = malloc(n);
        ok = e->in[q].t != NULL;
        if (ok)
            memcpy(e->in[q].t, x->in[q].t, n);
    }
    if (!ok) {
        dp_memo_discard(e);
        return NULL;
    }
    memcpy(e->base, x->base, (size_t)nv * sizeof *x->base);
    return e;
}

void dp_memo_commit(dp_memo *m, dp_memo_entry *e, const double *g, const uint16_t *arg)
{
    e->g = malloc((size_t)e->gsize * sizeof *e->g);
    e->arg = malloc((size_t)e->gsize * sizeof *e->arg);
    dp_memo_entry *ne = realloc(m->e, (size_t)(m->n + 1) * sizeof *ne);
    if (!e->g || !e->arg || !ne) {
        if (ne)
            m->e = ne;
        dp_memo_discard(e);
        return;
    }
    m->e = ne;
    memcpy(e->g, g, (size_t)e->gsize * sizeof *g);
    memcpy(e->arg, arg, (size_t)e->gsize * sizeof *arg);
    int drop = 0;
    while (drop < m->n && m->bytes + e->bytes > m->cap) {
        m->bytes -= m->e[drop].bytes;
        free_entry(&m->e[drop++]);
    }
    memmove(m->e, m->e + drop, (size_t)(m->n - drop) * sizeof *m->e);
    m->n -= drop;
    m->e[m->n++] = *e;
    m->bytes += e->bytes;
    free(e);
}

void dp_memo_discard(dp_memo_entry *e)
{
    free_entry(e);
    free(e);
}

void dp_memo_free(dp_memo *m)
{
    for (int i = 0; i < m->n; i++)
        free_entry(&m->e[i]);
    free(m->e);
}

/* ---- pair tables ---------------------------------------------------------- */

struct dp_pair_entry {
    uint64_t h;
    size_t klen;
    unsigned char *key;
    int64_t size;
    double *t;
    double bytes;
};

uint64_t dp_pair_hash(const void *key, size_t klen)
{
    return hash_words(0xcbf29ce484222325ULL, key, klen);
}

int dp_pair_take(dp_pair_cache *c, uint64_t h, const void *key, size_t klen, double *t,
                 int64_t size)
{
    for (int i = c->n - 1; i >= 0; i--) {
        const dp_pair_entry *e = &c->e[i];
        if (e->h == h && e->klen == klen && e->size == size && memcmp(e->key, key, klen) == 0) {
            memcpy(t, e->t, (size_t)size * sizeof *t);
            c->hits++;
            return 1;
        }
    }
    return 0;
}

void dp_pair_put(dp_pair_cache *c, uint64_t h, const void *key, size_t klen, const double *t,
                 int64_t size)
{
    double bytes = (double)klen + (double)size * sizeof *t;
    if (bytes > c->cap / 2)
        return;
    dp_pair_entry e = {.h = h, .klen = klen, .size = size, .bytes = bytes};
    e.key = malloc(klen ? klen : 1);
    e.t = malloc((size_t)size * sizeof *t);
    dp_pair_entry *ne = realloc(c->e, (size_t)(c->n + 1) * sizeof *ne);
    if (ne)
        c->e = ne;
    if (!e.key || !e.t || !ne) {
        free(e.key);
        free(e.t);
        return;
    }
    memcpy(e.key, key, klen);
    memcpy(e.t, t, (size_t)size * sizeof *t);
    int drop = 0;
    while (drop < c->n && c->bytes + bytes > c->cap) {
        c->bytes -= c->e[drop].bytes;
        free(c->e[drop].key);
        free(c->e[drop++].t);
    }
    memmove(c->e, c->e + drop, (size_t)(c->n - drop) * sizeof *c->e);
    c->n -= drop;
    c->e[c->n++] = e;
    c->bytes += bytes;
}

void dp_pair_free(dp_pair_cache *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        free(c->e[i].t);
    }
    free(c->e);
}
