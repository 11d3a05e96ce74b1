/* order.c: vertex orders for the DP.
 *
 * Block-first (the DP's default, sb_order_blocks): GenerateSeq over the
 * interiors of repeated layers first, then over the rest (below).
 *
 * GenerateSeq (PaSE): repeatedly take the unprocessed vertex whose dependent
 * set is smallest (ties: lowest op index), where a vertex's dependent set is
 * its unprocessed neighbours plus those of every processed vertex it is
 * connected to through processed vertices. Taking v merges its set into
 * each member's set. This is the prototype's ordering.
 *
 * Breadth-first: the order of a BFS from op 0 over the undirected graph (the
 * paper's baseline ordering; its dependent sets are the BFS frontier). */
#include "shardbench/search.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int *v;
    int n, cap;
} set;

static int set_has(const set *s, int x)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == x)
            return 1;
    return 0;
}

static void set_add(set *s, int x)
{
    if (set_has(s, x))
        return;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        int *nv = realloc(s->v, (size_t)s->cap * sizeof *nv);
        if (!nv)
            abort(); /* small sets; out of memory here is not recoverable */
        s->v = nv;
    }
    s->v[s->n++] = x;
}

static void set_del(set *s, int x)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == x) {
            s->v[i] = s->v[--s->n];
            return;
        }
}

static set *neighbour_sets(const sb_problem *pb)
{
    int n = pb->m->nops;
    set *nb = calloc((size_t)n, sizeof *nb);
    if (!nb)
        abort();
    for (int k = 0; k < pb->nedges; k++) {
        int a = pb->edges[k].src, b = pb->edges[k].dst;
        if (a == b)
            continue;
        set_add(&nb[a], b);
        set_add(&nb[b], a);
    }
    return nb;
}

static void free_sets(set *s, int n)
{
    for (int i = 0; i < n; i++)
        free(s[i].v);
    free(s);
}

/* The first vertices are taken while the least dependent set among them
 * has at most this many vertices (a repeated layer's interior, with the
 * layer's inputs and outputs still open, has dependent sets of 1 or 2 in
 * the shipped transformers; taking larger ones first makes tables over
 * three 161-config ops at p = 256 in the transformer's decoder). */
#define FIRST_MAX_DEP 2

/* GenerateSeq; with first != NULL, the vertices with first[v] set come
 * before all others (GenerateSeq among them while their least dependent
 * set has at most FIRST_MAX_DEP vertices, then one GenerateSeq over all
 * that are left). */
static void generate_seq(const sb_problem *pb, const char *first, int *order)
{
    int n = pb->m->nops;
    set *nb = neighbour_sets(pb);
    char *done = calloc((size_t)n, 1);
    if (!done)
        abort();
    int nfirst = 0;
    for (int v = 0; first && v < n; v++)
        nfirst += first[v] != 0;
    for (int i = 0; i < n; i++) {
        int best = -1;
        for (int v = 0; v < n; v++)
            if (!done[v] && (i >= nfirst || first[v]) && (best < 0 || nb[v].n < nb[best].n))
                best = v;
        if (i < nfirst && nb[best].n > FIRST_MAX_DEP) {
            nfirst = 0; /* the rest in one GenerateSeq */
            best = -1;
            for (int v = 0; v < n; v++)
                if (!done[v] && (best < 0 || nb[v].n < nb[best].n))
                    best = v;
        }
        order[i] = best;
        done[best] = 1;
        set *s = &nb[best];
        for (int j = 0; j < s->n; j++) {
            int u = s->v[j];
            for (int q = 0; q < s->n; q++)
                if (s->v[q] != u)
                    set_add(&nb[u], s->v[q]);
            set_del(&nb[u], best);
        }
    }
    free(done);
    free_sets(nb, n);
}

void sb_order_pase(const sb_problem *pb, int *order)
{
    generate_seq(pb, NULL, order);
}

/* Length of the repeated-block instance prefix of an op name ("x.3" of
 * "x.3/a/qkv": a first path component ending in '.' and digits), 0 if none. */
static int instance_prefix(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash)
        return 0;
    const char *d = slash;
    while (d > name && d[-1] >= '0' && d[-1] <= '9')
        d--;
    if (d == slash || d - 1 <= name || d[-1] != '.')
        return 0;
    return (int)(slash - name);
}

int sb_block_interior(const sb_problem *pb, char *interior)
{
    const sb_model *m = pb->m;
    int n = m->nops, count = 0;
    int *plen = malloc((size_t)(n ? n : 1) * sizeof *plen);
    if (!plen)
        abort();
    for (int v = 0; v < n; v++) {
        plen[v] = instance_prefix(m->ops[v].name);
        interior[v] = plen[v] > 0;
    }
    /* an op whose output is read outside its instance is a boundary */
    for (int k = 0; k < pb->nedges; k++) {
        int a = pb->edges[k].src, b = pb->edges[k].dst;
        if (interior[a] && (plen[a] != plen[b] || strncmp(m->ops[a].name, m->ops[b].name,
                                                        (size_t)plen[a])))
            interior[a] = 0;
    }
    for (int v = 0; v < n; v++)
        count += interior[v];
    free(plen);
    return count;
}

void sb_order_blocks(const sb_problem *pb, int *order)
{
    int n = pb->m->nops;
    char *interior = calloc((size_t)(n ? n : 1), 1);
    if (!interior)
        abort();
    sb_block_interior(pb, interior);
    generate_seq(pb, interior, order);
    free(interior);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

void sb_order_bf(const sb_problem *pb, int *order)
{
    int n = pb->m->nops;
    set *nb = neighbour_sets(pb);
    char *seen = calloc((size_t)n, 1);
    if (!seen)
        abort();
    int head = 0, tail = 0;
    for (int root = 0; root < n; root++) {
        if (seen[root])
            continue;
        seen[root] = 1;
        order[tail++] = root;
        while (head < tail) {
            int v = order[head++];
            if (nb[v].n > 1)
                qsort(nb[v].v, (size_t)nb[v].n, sizeof(int), cmp_int);
            for (int j = 0; j < nb[v].n; j++) {
                int u = nb[v].v[j];
                if (!seen[u]) {
                    seen[u] = 1;
                    order[tail++] = u;
                }
            }
        }
    }
    free(seen);
    free_sets(nb, n);
}
