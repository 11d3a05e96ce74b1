/* order.c: vertex orders for the DP.
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

void sb_order_pase(const sb_problem *pb, int *order)
{
    int n = pb->m->nops;
    set *nb = neighbour_sets(pb);
    char *done = calloc((size_t)n, 1);
    if (!done)
        abort();
    for (int i = 0; i < n; i++) {
        int best = -1;
        for (int v = 0; v < n; v++)
            if (!done[v] && (best < 0 || nb[v].n < nb[best].n))
                best = v;
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
