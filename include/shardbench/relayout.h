/* shardbench/relayout.h: moving a distributed tensor from the boxes ranks
 * hold to the boxes ranks need (box intersection + MPI), and the cache of
 * rank-group sub-communicators. One routine serves every edge of the
 * executor (forward copy, backward gradient accumulation), checkpoint
 * restore and dataset sharding.
 *
 * Boxes are half-open index ranges per dim of a row-major global tensor.
 * Every rank passes the same description of every rank's boxes; each rank
 * then sends exactly the overlaps of what it holds with what others need. */
#ifndef SHARDBENCH_RELAYOUT_H
#define SHARDBENCH_RELAYOUT_H

#include <mpi.h>

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_BOX_MAX_DIMS 8

typedef struct {
    int nd;                          /* 0 = empty box (rank holds/needs nothing) */
    int64_t lo[SB_BOX_MAX_DIMS];
    int64_t hi[SB_BOX_MAX_DIMS];     /* exclusive */
} sb_box;

int64_t sb_box_volume(const sb_box *b);              /* 0 for an empty box */
int sb_box_intersect(const sb_box *a, const sb_box *b, sb_box *out); /* 1 if non-empty */
int sb_box_equal(const sb_box *a, const sb_box *b);  /* same nd and bounds */
/* "[0:4, 2:8]" (half-open per dim, like a Python slice), or "(empty)" for
 * nd 0; returns buf. */
const char *sb_box_str(const sb_box *b, char *buf, size_t n);

/* Copies the sub-box `sub` (inside both boxes) from a buffer laid out as box
 * `from` to a buffer laid out as box `to` (row-major, float). accumulate:
 * to += from instead of to = from. */
void sb_box_copy(const float *src, const sb_box *from, float *dst, const sb_box *to,
                 const sb_box *sub, int accumulate);

typedef enum {
    SB_RELAYOUT_COPY = 0,  /* dst = the element, from one holder. Source boxes
                              must be pairwise identical or disjoint (replicas
                              of a partition); every needed element must be
                              held by some rank. The replica a dst rank reads
                              from is spread over replicas (dst rank mod count). */
    SB_RELAYOUT_ACCUM = 1, /* dst = sum over every source box containing the
                              element (sources may overlap: halos, partial sums,
                              several consumers); elements no source holds are 0. */
} sb_relayout_mode;

typedef struct sb_relayout sb_relayout;

/* Plans a relayout on comm (size n): src[r] and dst[r] are rank r's held and
 * needed boxes (all ranks pass identical arrays; nd of non-empty boxes must
 * equal the tensor's nd). Local work only; no communication. */
int sb_relayout_plan(MPI_Comm comm, int nd, const int64_t *shape, const sb_box *src,
                     const sb_box *dst, sb_relayout_mode mode, sb_relayout **out,
                     sb_error *err);

/* Runs it: src_buf holds this rank's src box (row-major), dst_buf receives
 * its dst box (fully overwritten, also in ACCUM mode). Collective over comm:
 * every rank of comm calls it, with NULL buffers where its boxes are empty. */
int sb_relayout_run(sb_relayout *r, const float *src_buf, float *dst_buf, sb_error *err);

/* The same run on buffers in another memory (a GPU's): the tensor data is
 * touched only through these functions. box_copy has sb_strided_box_copy's
 * semantics (kernels.h); alltoallv moves the packed overlaps (counts and
 * displacements in floats, as MPI_Alltoallv; the entry for this rank is
 * always 0: its own overlap is box-copied) and is collective over comm.
 * Packing buffers come from alloc, are kept by the plan for its next runs
 * and given back with release by sb_relayout_free (sb_relayout_run and this
 * are one body; the run's memory decides where they live). The CPU backend
 * never needs it (sb_relayout_run is this with host memory and MPI). */
typedef struct {
    void (*box_copy)(float *dst, const int *dst_dims, const int *dst_lo, const float *src,
                     const int *src_dims, const int *src_lo, const int *size, int nd,
                     int accumulate);
    void (*zero)(float *p, size_t n);
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    int (*alltoallv)(const float *sbuf, const int *scount, const int *sdispl, float *rbuf,
                     const int *rcount, const int *rdispl, MPI_Comm comm);
} sb_relayout_mem;

int sb_relayout_run_mem(sb_relayout *r, const float *src_buf, float *dst_buf,
                        const sb_relayout_mem *mem, sb_error *err);

/* Point to point, for ranks that do not move in step (a pipeline's
 * stages): sb_relayout_run_p2p runs this rank's part alone. It posts its
 * receives (MPI_Irecv), sends each of its overlaps from a packed buffer of
 * its own (MPI_Isend, left in flight in `pend`), copies its own overlap,
 * waits for its receives and unpacks them (dst_buf as sb_relayout_run
 * leaves it). A rank with no part need not call it; the ranks that hold
 * and the ranks that need call it when each gets to it. Runs of one plan
 * between two ranks match in the order they are made; `tag` (0 .. 32767)
 * tells plans apart, so runs of different plans may come in another order
 * on each side. Host memory. Sends are reaped by later runs;
 * sb_relayout_pending_wait waits for all of them. */
typedef struct sb_relayout_pending sb_relayout_pending;
int sb_relayout_pending_new(sb_relayout_pending **out, sb_error *err);
int sb_relayout_run_p2p(sb_relayout *r, const float *src_buf, float *dst_buf, int tag,
                        sb_relayout_pending *pend, sb_error *err);
int sb_relayout_pending_wait(sb_relayout_pending *pend, sb_error *err);
void sb_relayout_pending_free(sb_relayout_pending *pend); /* waits first */

/* Bytes this rank sends / receives per run (excluding its local copy). */
int64_t sb_relayout_bytes_sent(const sb_relayout *r);
int64_t sb_relayout_bytes_received(const sb_relayout *r);

/* Floats this rank sends to / receives from each rank of comm per run
 * (arrays of comm's size; 0 for itself: the local copy bypasses MPI). Either
 * pointer may be NULL. For benchmarks that replay the same exchange. */
void sb_relayout_peer_counts(const sb_relayout *r, int64_t *send, int64_t *recv);

void sb_relayout_free(sb_relayout *r);

/* Group cache: sub-communicators made once per distinct partition of comm's
 * ranks. color[r] (for every rank r of comm) is the group rank r joins, or
 * -1 for none. Collective over comm: all ranks call it in the same order with
 * the same colors. *out is MPI_COMM_NULL for a rank with color -1. The cache
 * owns the communicators. */
typedef struct sb_group_cache sb_group_cache;

int sb_group_cache_new(MPI_Comm comm, sb_group_cache **out, sb_error *err);
int sb_group_get(sb_group_cache *gc, const int *color, MPI_Comm *out, sb_error *err);
int sb_group_cache_size(const sb_group_cache *gc); /* distinct groupings made */
void sb_group_cache_free(sb_group_cache *gc);
/* Optional: called right after each MPI_Comm_split the cache makes,
 * collective over the parent (every rank, color -1 included, child
 * MPI_COMM_NULL there), with the split's color and key (the rank in the
 * parent): the cuda backend splits its NCCL communicator alongside. */
void sb_group_cache_set_split_hook(sb_group_cache *gc,
                                   void (*hook)(MPI_Comm parent, int color, int key,
                                                MPI_Comm child));

#ifdef __cplusplus
}
#endif
#endif
