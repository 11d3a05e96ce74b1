/* runtime/relayout/groups.c: the cache of rank-group sub-communicators.
 *
 * A grouping is a color per rank of the parent communicator; the first time
 * a grouping is asked for, every rank calls MPI_Comm_split (collective), and
 * afterwards the communicator comes from the cache with no communication.
 * Hits agree across ranks because every rank asks for the same groupings in
 * the same order. Lookup is a linear scan: executors ask for a handful of
 * groupings, not thousands.
 *
 * Free the cache before MPI_Finalize. */
#include "shardbench/relayout.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int *color;     /* n entries; every negative color stored as -1 */
    MPI_Comm comm;  /* MPI_COMM_NULL on ranks outside every group */
} group_entry;

struct sb_group_cache {
    MPI_Comm parent;
    int n, me;
    group_entry *e;
    int count, cap;
    void (*split_hook)(MPI_Comm parent, int color, int key, MPI_Comm child);
};

void sb_group_cache_set_split_hook(sb_group_cache *gc,
                                   void (*hook)(MPI_Comm parent, int color, int key,
                                                MPI_Comm child))
{
    gc->split_hook = hook;
}

int sb_group_cache_new(MPI_Comm comm, sb_group_cache **out, sb_error *err)
{
    *out = NULL;
    int n, me;
    if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &n) != MPI_SUCCESS ||
        MPI_Comm_rank(comm, &me) != MPI_SUCCESS)
        return sb_fail(err, SB_EXIT_INTERNAL, "group cache: not a valid communicator");
    sb_group_cache *gc = sb_calloc(1, sizeof *gc, err);
    if (!gc)
        return -1;
    gc->parent = comm;
    gc->n = n;
    gc->me = me;
    *out = gc;
    return 0;
}

static int same_colors(const int *key, const int *color, int n)
{
    for (int i = 0; i < n; i++)
        if (key[i] != (color[i] < 0 ? -1 : color[i]))
            return 0;
    return 1;
}

int sb_group_get(sb_group_cache *gc, const int *color, MPI_Comm *out, sb_error *err)
{
    *out = MPI_COMM_NULL;
    for (int i = 0; i < gc->count; i++)
        if (same_colors(gc->e[i].color, color, gc->n)) {
            *out = gc->e[i].comm;
            return 0;
        }
    /* A miss: make room first, so that a failure happens before the
     * collective rather than after the other ranks have committed to it. */
    if (gc->count == gc->cap) {
        int cap = gc->cap ? 2 * gc->cap : 8;
        group_entry *e = sb_realloc(gc->e, sizeof *e * (size_t)cap, err);
        if (!e)
            return -1;
        gc->e = e;
        gc->cap = cap;
    }
    int *key = sb_malloc(sizeof *key * (size_t)gc->n, err);
    if (!key)
        return -1;
    for (int i = 0; i < gc->n; i++)
        key[i] = color[i] < 0 ? -1 : color[i];
    MPI_Comm comm = MPI_COMM_NULL;
    int c = key[gc->me];
    if (MPI_Comm_split(gc->parent, c < 0 ? MPI_UNDEFINED : c, gc->me, &comm) != MPI_SUCCESS) {
        free(key);
        return sb_fail(err, SB_EXIT_INTERNAL, "group cache: MPI_Comm_split failed on rank %d",
                       gc->me);
    }
    if (gc->split_hook)
        gc->split_hook(gc->parent, c < 0 ? -1 : c, gc->me, comm);
    gc->e[gc->count].color = key;
    gc->e[gc->count].comm = comm;
    gc->count++;
    *out = comm;
    return 0;
}

int sb_group_cache_size(const sb_group_cache *gc) { return gc->count; }

void sb_group_cache_free(sb_group_cache *gc)
{
    if (!gc)
        return;
    for (int i = 0; i < gc->count; i++) {
        if (gc->e[i].comm != MPI_COMM_NULL)
            MPI_Comm_free(&gc->e[i].comm);
        free(gc->e[i].color);
    }
    free(gc->e);
    free(gc);
}
