/* runtime/relayout/relayout.c: boxes, copies between boxes, and relayout (moving a
 * distributed tensor from the boxes ranks hold to the boxes ranks need).
 *
 * Planning is local: every rank gets every rank's boxes, so each one derives
 * the same exchange without talking to the others, and every rank reaches
 * the same verdict on bad input (no rank is left waiting in a collective).
 * Running is one MPI_Alltoallv of packed overlaps (counts in floats) plus a
 * direct copy of the overlap a rank holds and needs itself.
 *
 * What this is not: a general redistribution library. A rank holds one box
 * and needs one box; the element type is float; boxes are row-major. */
#include "shardbench/relayout.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- boxes --------------------------------------------------------------- */

int64_t sb_box_volume(const sb_box *b)
{
    if (b->nd <= 0)
        return 0;
    int64_t v = 1;
    for (int i = 0; i < b->nd; i++) {
        if (b->hi[i] <= b->lo[i])
            return 0;
        v *= b->hi[i] - b->lo[i];
    }
    return v;
}

int sb_box_intersect(const sb_box *a, const sb_box *b, sb_box *out)
{
    sb_box r;
    memset(&r, 0, sizeof r);
    if (a->nd <= 0 || a->nd != b->nd) {
        *out = r;
        return 0;
    }
    r.nd = a->nd;
    for (int i = 0; i < a->nd; i++) {
        r.lo[i] = a->lo[i] > b->lo[i] ? a->lo[i] : b->lo[i];
        r.hi[i] = a->hi[i] < b->hi[i] ? a->hi[i] : b->hi[i];
        if (r.lo[i] >= r.hi[i]) {
            memset(out, 0, sizeof *out);
            return 0;
        }
    }
    *out = r;
    return 1;
}

int sb_box_equal(const sb_box *a, const sb_box *b)
{
    if (a->nd != b->nd)
        return 0;
    for (int i = 0; i < a->nd; i++)
        if (a->lo[i] != b->lo[i] || a->hi[i] != b->hi[i])
            return 0;
    return 1;
}

const char *sb_box_str(const sb_box *b, char *buf, size_t n)
{
    if (b->nd <= 0)
        return snprintf(buf, n, "(empty)"), buf;
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < b->nd && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld:%lld", i ? ", " : "",
                              (long long)b->lo[i], (long long)b->hi[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

static void add_run(float *restrict d, const float *restrict s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] += s[i];
}

void sb_box_copy(const float *src, const sb_box *from, float *dst, const sb_box *to,
                 const sb_box *sub, int accumulate)
{
    int nd = sub->nd;
    if (nd <= 0 || sb_box_volume(sub) == 0)
        return;
    int64_t ext[SB_BOX_MAX_DIMS], fs[SB_BOX_MAX_DIMS], ts[SB_BOX_MAX_DIMS];
    int64_t fe[SB_BOX_MAX_DIMS], te[SB_BOX_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        ext[i] = sub->hi[i] - sub->lo[i];
        fe[i] = from->hi[i] - from->lo[i];
        te[i] = to->hi[i] - to->lo[i];
    }
    fs[nd - 1] = ts[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--) {
        fs[i] = fs[i + 1] * fe[i + 1];
        ts[i] = ts[i + 1] * te[i + 1];
    }
    int64_t s0 = 0, d0 = 0;
    for (int i = 0; i < nd; i++) {
        s0 += (sub->lo[i] - from->lo[i]) * fs[i];
        d0 += (sub->lo[i] - to->lo[i]) * ts[i];
    }
    // Trailing dims spanned whole in both buffers are one contiguous run.
    int m = nd;
    while (m > 1 && ext[m - 1] == fe[m - 1] && ext[m - 1] == te[m - 1]) {
        ext[m - 2] *= ext[m - 1];
        fe[m - 2] *= fe[m - 1];
        te[m - 2] *= te[m - 1];
        fs[m - 2] = fs[m - 1];
        ts[m - 2] = ts[m - 1];
        m--;
    }
    const int64_t run = ext[m - 1];
    int64_t idx[SB_BOX_MAX_DIMS] = {0};
    const float *s = src + s0;
    float *d = dst + d0;
    for (;;) {
        if (accumulate)
            add_run(d, s, run);
        else
            memcpy(d, s, sizeof(float) * (size_t)run);
        int k = m - 2;
        for (; k >= 0; k--) {
            s += fs[k];
            d += ts[k];
            if (++idx[k] < ext[k])
                break;
            s -= fs[k] * ext[k];
            d -= ts[k] * ext[k];
            idx[k] = 0;
        }
        if (k < 0)
            break;
    }
}

/* Offset of sub's first element in a buffer laid out as box b, if sub is one
 * contiguous range of it; -1 otherwise. */
static int64_t contiguous_offset(const sb_box *sub, const sb_box *b)
{
    int nd = b->nd, k = nd - 1;
    while (k > 0 && sub->hi[k] - sub->lo[k] == b->hi[k] - b->lo[k])
        k--;
    for (int i = 0; i < k; i++)
        if (sub->hi[i] - sub->lo[i] != 1)
            return -1;
    int64_t off = 0;
    for (int i = 0; i < nd; i++)
        off = off * (b->hi[i] - b->lo[i]) + (sub->lo[i] - b->lo[i]);
    return off;
}

/* ---- plan ---------------------------------------------------------------- */

typedef struct {
    int peer;
    sb_box box;     /* the overlap, global coordinates */
    int64_t count;  /* floats */
} overlap;

struct sb_relayout {
    MPI_Comm comm;
    int n, me, nd;
    sb_relayout_mode mode;
    sb_box src, dst;         /* this rank's boxes (nd 0: empty) */
    int has_self;
    sb_box self;             /* src ∩ dst copied locally */
    overlap *send, *recv;    /* at most one per peer, ordered by peer */
    int n_send, n_recv;
    int *scount, *sdispl, *rcount, *rdispl; /* MPI arguments, floats */
    int64_t floats_sent, floats_recv;
    int traffic;             /* some rank moves something over MPI */
    int send_direct;         /* send straight from src_buf (no packing) */
    int recv_direct;         /* receive straight into dst_buf (no unpacking) */
    float *sbuf, *rbuf;      /* packing buffers (NULL when direct / unused), made by the
                                first run in its memory */
    void (*buf_release)(void *); /* whose memory they are (NULL: host, free) */
};

void sb_relayout_free(sb_relayout *r)
{
    if (!r)
        return;
    free(r->send);
    free(r->recv);
    free(r->scount);
    free(r->sdispl);
    free(r->rcount);
    free(r->rdispl);
    void (*release)(void *) = r->buf_release ? r->buf_release : free;
    if (r->sbuf)
        release(r->sbuf);
    if (r->rbuf)
        release(r->rbuf);
    free(r);
}

int64_t sb_relayout_bytes_sent(const sb_relayout *r)
{
    return r->floats_sent * (int64_t)sizeof(float);
}

int64_t sb_relayout_bytes_received(const sb_relayout *r)
{
    return r->floats_recv * (int64_t)sizeof(float);
}

void sb_relayout_peer_counts(const sb_relayout *r, int64_t *send, int64_t *recv)
{
    for (int p = 0; p < r->n; p++) {
        if (send)
            send[p] = r->scount[p];
        if (recv)
            recv[p] = r->rcount[p];
    }
}

/* A box of rank `rank` (`what` is "src" or "dst"), normalized: nd 0 when it
 * holds no element. */
static int check_box(const sb_box *b, int rank, const char *what, int nd,
                     const int64_t *shape, sb_box *out, sb_error *err)
{
    char s[400];
    memset(out, 0, sizeof *out);
    if (b->nd == 0)
        return 0;
    if (b->nd != nd)
        return sb_fail(err, SB_EXIT_INPUT,
                       "relayout: rank %d's %s box has %d dims, the tensor has %d",
                       rank, what, b->nd, nd);
    for (int i = 0; i < nd; i++)
        if (b->lo[i] < 0 || b->hi[i] < b->lo[i] || b->hi[i] > shape[i])
            return sb_fail(err, SB_EXIT_INPUT,
                           "relayout: rank %d's %s box %s is not inside the tensor "
                           "(dim %d has size %lld)",
                           rank, what, sb_box_str(b, s, sizeof s), i, (long long)shape[i]);
    if (sb_box_volume(b) > 0)
        *out = *b;
    return 0;
}

/* Adds the overlap of rank `s`'s box with rank `d`'s to the MPI totals. */
static void tally(int64_t *sent, int64_t *recvd, int s, int d, int64_t v, int *traffic)
{
    if (s == d || v == 0)
        return;
    sent[s] += v;
    recvd[d] += v;
    *traffic = 1;
}

/* The tensor's rank, shape and the mode, checked. */
static int check_tensor(int nd, const int64_t *shape, sb_relayout_mode mode, sb_error *err)
{
    if (nd < 1 || nd > SB_BOX_MAX_DIMS)
        return sb_fail(err, SB_EXIT_INPUT, "relayout: a tensor of %d dims (1 to %d allowed)",
                       nd, SB_BOX_MAX_DIMS);
    int64_t total = 1;
    for (int i = 0; i < nd; i++) {
        if (shape[i] < 0)
            return sb_fail(err, SB_EXIT_INPUT, "relayout: dim %d has negative size %lld", i,
                           (long long)shape[i]);
        if (shape[i] > 0 && total > INT64_MAX / shape[i])
            return sb_fail(err, SB_EXIT_INPUT,
                           "relayout: the tensor has more than 2^63 elements (dim %d)", i);
        total *= shape[i];
    }
    if (mode != SB_RELAYOUT_COPY && mode != SB_RELAYOUT_ACCUM)
        return sb_fail(err, SB_EXIT_INPUT, "relayout: unknown mode %d", (int)mode);
    return 0;
}

/* COPY: every dst rank's overlaps with the distinct source boxes, each
 * from one holder (the rank itself when it holds a replica, else one
 * replica by rank); checks that distinct boxes are disjoint and cover
 * every dst box. This rank's sends and receives go to r. */
static int plan_copy(sb_relayout *r, const sb_box *S, const sb_box *D, int64_t *tot_sent,
                     int64_t *tot_recv, sb_error *err)
{
    char s1[400], s2[400];
    int n = r->n, me = r->me, rc = -1;
    int *rep = NULL;               /* first rank holding the same box */
    int *nrep = NULL, *repstart = NULL, *replicas = NULL;
    sb_box ov;
    /* Replica sets: rep[q] is the first rank whose box equals q's. */
    rep = sb_malloc(sizeof *rep * (size_t)n, err);
    nrep = sb_calloc((size_t)n, sizeof *nrep, err);
    repstart = sb_calloc((size_t)n + 1, sizeof *repstart, err);
    replicas = sb_malloc(sizeof *replicas * (size_t)n, err);
    if (!rep || !nrep || !repstart || !replicas)
        goto out;
    for (int q = 0; q < n; q++) {
        rep[q] = -1;
        if (S[q].nd == 0)
            continue;
        for (int p = 0; p < q && rep[q] < 0; p++)
            if (rep[p] == p && sb_box_equal(&S[p], &S[q]))
                rep[q] = p;
        if (rep[q] < 0)
            rep[q] = q;
        nrep[rep[q]]++;
    }
    for (int q = 0; q < n; q++)
        repstart[q + 1] = repstart[q] + nrep[q];
    for (int q = 0; q < n; q++) /* repstart[k] becomes the end of set k */
        if (rep[q] >= 0)
            replicas[repstart[rep[q]]++] = q;
    for (int q = n; q > 0; q--)
        repstart[q] = repstart[q - 1];
    repstart[0] = 0;
    /* Distinct source boxes must be disjoint. */
    for (int p = 0; p < n; p++) {
        if (rep[p] != p)
            continue;
        for (int q = p + 1; q < n; q++)
            if (rep[q] == q && sb_box_intersect(&S[p], &S[q], &ov)) {
                sb_fail(err, SB_EXIT_INPUT,
                        "relayout (copy): src boxes of rank %d %s and rank %d %s "
                        "overlap without being identical",
                        p, sb_box_str(&S[p], s1, sizeof s1), q,
                        sb_box_str(&S[q], s2, sizeof s2));
                goto out;
            }
    }
    /* Holder of distinct box k for dst rank d: d itself when it holds a
     * replica, else replica d mod count (in rank order). Coverage: the
     * disjoint overlaps must add up to the dst volume. */
    for (int d = 0; d < n; d++) {
        if (D[d].nd == 0)
            continue;
        int64_t covered = 0;
        for (int k = 0; k < n; k++) {
            if (rep[k] != k || !sb_box_intersect(&S[k], &D[d], &ov))
                continue;
            int64_t v = sb_box_volume(&ov);
            int h = rep[d] == k ? d : replicas[repstart[k] + d % nrep[k]];
            covered += v;
            tally(tot_sent, tot_recv, h, d, v, &r->traffic);
            if (d == me && h != me) {
                overlap *o = &r->recv[r->n_recv++];
                o->peer = h;
                o->box = ov;
                o->count = v;
            } else if (d == me) {
                r->has_self = 1;
                r->self = ov;
            }
            if (h == me && d != me) {
                overlap *o = &r->send[r->n_send++];
                o->peer = d;
                o->box = ov;
                o->count = v;
            }
        }
        if (covered != sb_box_volume(&D[d])) {
            sb_fail(err, SB_EXIT_INPUT,
                    "relayout (copy): rank %d needs elements that no rank holds "
                    "(dst box %s, %lld of %lld elements held)",
                    d, sb_box_str(&D[d], s1, sizeof s1), (long long)covered,
                    (long long)sb_box_volume(&D[d]));
            goto out;
        }
    }
    /* Receives came in order of the distinct boxes; order them by peer. */
    for (int i = 1; i < r->n_recv; i++)
        for (int j = i; j > 0 && r->recv[j - 1].peer > r->recv[j].peer; j--) {
            overlap t = r->recv[j];
            r->recv[j] = r->recv[j - 1];
            r->recv[j - 1] = t;
        }
    rc = 0;
out:
    free(rep);
    free(nrep);
    free(repstart);
    free(replicas);
    return rc;
}

/* ACCUM: every overlap of a source box with a dst box moves (and adds). */
static void plan_accum(sb_relayout *r, const sb_box *S, const sb_box *D, int64_t *tot_sent,
                       int64_t *tot_recv)
{
    int n = r->n, me = r->me;
    sb_box ov;
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++) {
            if (!sb_box_intersect(&S[s], &D[d], &ov))
                continue;
            int64_t v = sb_box_volume(&ov);
            tally(tot_sent, tot_recv, s, d, v, &r->traffic);
            overlap *o = NULL;
            if (s == me && d == me) {
                r->has_self = 1;
                r->self = ov;
            } else if (s == me) {
                o = &r->send[r->n_send++];
                o->peer = d;
            } else if (d == me) {
                o = &r->recv[r->n_recv++];
                o->peer = s;
            }
            if (o) {
                o->box = ov;
                o->count = v;
            }
        }
}

/* MPI counts and displacements are ints: every rank checks every rank's
 * totals, so all of them fail together before any exchange. */
static int check_int_counts(int n, const int64_t *tot_sent, const int64_t *tot_recv,
                            sb_error *err)
{
    for (int q = 0; q < n; q++)
        if (tot_sent[q] > INT_MAX || tot_recv[q] > INT_MAX) {
            int sends = tot_sent[q] > INT_MAX;
            sb_fail(err, SB_EXIT_INTERNAL,
                    "relayout: rank %d would %s %lld floats in one exchange, more than "
                    "MPI's int count limit (%d); split the tensor or the exchange",
                    q, sends ? "send" : "receive",
                    (long long)(sends ? tot_sent[q] : tot_recv[q]), INT_MAX);
            return -1;
        }
    return 0;
}

/* Counts, displacements, and whether packing can be skipped: when every
 * overlap is one contiguous range of the buffer, MPI reads (or writes) the
 * caller's buffer in place. Receiving in place is for COPY only (ACCUM
 * adds). */
static void set_counts(sb_relayout *r)
{
    int64_t off = 0;
    r->send_direct = r->n_send > 0 && sb_box_volume(&r->src) <= INT_MAX;
    for (int i = 0; i < r->n_send; i++) {
        overlap *o = &r->send[i];
        r->scount[o->peer] = (int)o->count;
        r->sdispl[o->peer] = (int)off;
        off += o->count;
        if (r->send_direct && contiguous_offset(&o->box, &r->src) < 0)
            r->send_direct = 0;
    }
    r->floats_sent = off;
    if (r->send_direct)
        for (int i = 0; i < r->n_send; i++)
            r->sdispl[r->send[i].peer] = (int)contiguous_offset(&r->send[i].box, &r->src);
    off = 0;
    r->recv_direct = r->mode == SB_RELAYOUT_COPY && r->n_recv > 0 &&
                     sb_box_volume(&r->dst) <= INT_MAX;
    for (int i = 0; i < r->n_recv; i++) {
        overlap *o = &r->recv[i];
        r->rcount[o->peer] = (int)o->count;
        r->rdispl[o->peer] = (int)off;
        off += o->count;
        if (r->recv_direct && contiguous_offset(&o->box, &r->dst) < 0)
            r->recv_direct = 0;
    }
    r->floats_recv = off;
    if (r->recv_direct)
        for (int i = 0; i < r->n_recv; i++)
            r->rdispl[r->recv[i].peer] = (int)contiguous_offset(&r->recv[i].box, &r->dst);
}

int sb_relayout_plan(MPI_Comm comm, int nd, const int64_t *shape, const sb_box *src,
                     const sb_box *dst, sb_relayout_mode mode, sb_relayout **out,
                     sb_error *err)
{
    *out = NULL;
    int n, me;
    if (MPI_Comm_size(comm, &n) != MPI_SUCCESS || MPI_Comm_rank(comm, &me) != MPI_SUCCESS)
        return sb_fail(err, SB_EXIT_INTERNAL, "relayout: not a valid communicator");
    if (check_tensor(nd, shape, mode, err))
        return -1;

    int rc = -1;
    sb_relayout *r = NULL;
    sb_box *S = NULL, *D = NULL;   /* normalized boxes of every rank */
    int64_t *tot_sent = NULL, *tot_recv = NULL;

    S = sb_malloc(sizeof *S * (size_t)n, err);
    D = sb_malloc(sizeof *D * (size_t)n, err);
    tot_sent = sb_calloc((size_t)n, sizeof *tot_sent, err);
    tot_recv = sb_calloc((size_t)n, sizeof *tot_recv, err);
    r = sb_calloc(1, sizeof *r, err);
    if (!S || !D || !tot_sent || !tot_recv || !r)
        goto done;
    r->comm = comm;
    r->n = n;
    r->me = me;
    r->nd = nd;
    r->mode = mode;
    r->send = sb_calloc((size_t)n, sizeof *r->send, err);
    r->recv = sb_calloc((size_t)n, sizeof *r->recv, err);
    r->scount = sb_calloc((size_t)n, sizeof *r->scount, err);
    r->sdispl = sb_calloc((size_t)n, sizeof *r->sdispl, err);
    r->rcount = sb_calloc((size_t)n, sizeof *r->rcount, err);
    r->rdispl = sb_calloc((size_t)n, sizeof *r->rdispl, err);
    if (!r->send || !r->recv || !r->scount || !r->sdispl || !r->rcount || !r->rdispl)
        goto done;
    for (int q = 0; q < n; q++)
        if (check_box(&src[q], q, "src", nd, shape, &S[q], err) ||
            check_box(&dst[q], q, "dst", nd, shape, &D[q], err))
            goto done;
    r->src = S[me];
    r->dst = D[me];

    if (mode == SB_RELAYOUT_COPY) {
        if (plan_copy(r, S, D, tot_sent, tot_recv, err))
            goto done;
    } else {
        plan_accum(r, S, D, tot_sent, tot_recv);
    }
    if (check_int_counts(n, tot_sent, tot_recv, err))
        goto done;
    set_counts(r);
    /* packing buffers: made by the first run, in its memory */
    rc = 0;
done:
    if (rc == 0)
        *out = r;
    else
        sb_relayout_free(r);
    free(S);
    free(D);
    free(tot_sent);
    free(tot_recv);
    return rc;
}

/* ---- run ----------------------------------------------------------------- */

/* What a run does to tensor memory, host or backend: one body serves both
 * (sb_relayout_run on host memory and MPI, sb_relayout_run_mem through a
 * backend's functions). copy moves sub (global coordinates) between buffers
 * holding boxes `from` and `to`. */
typedef struct {
    const sb_relayout_mem *mem; /* NULL: host memory */
} run_ops;

static void ops_copy(const run_ops *o, const float *src, const sb_box *from, float *dst,
                     const sb_box *to, const sb_box *sub, int accumulate)
{
    if (!o->mem) {
        sb_box_copy(src, from, dst, to, sub, accumulate);
        return;
    }
    int nd = sub->nd, fd[SB_BOX_MAX_DIMS], fl[SB_BOX_MAX_DIMS], td[SB_BOX_MAX_DIMS],
        tl[SB_BOX_MAX_DIMS], sz[SB_BOX_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        fd[i] = (int)(from->hi[i] - from->lo[i]);
        fl[i] = (int)(sub->lo[i] - from->lo[i]);
        td[i] = (int)(to->hi[i] - to->lo[i]);
        tl[i] = (int)(sub->lo[i] - to->lo[i]);
        sz[i] = (int)(sub->hi[i] - sub->lo[i]);
    }
    o->mem->box_copy(dst, td, tl, src, fd, fl, sz, nd, accumulate);
}

static void ops_zero(const run_ops *o, float *p, size_t n)
{
    if (o->mem)
        o->mem->zero(p, n);
    else
        memset(p, 0, n * sizeof *p);
}

static float *ops_alloc(const run_ops *o, size_t n)
{
    return o->mem ? o->mem->alloc(n * sizeof(float)) : malloc((n ? n : 1) * sizeof(float));
}

static void ops_release(const run_ops *o, void *p)
{
    if (!p)
        return;
    if (o->mem)
        o->mem->release(p);
    else
        free(p);
}

/* The packing buffers, made by the first run in its memory and kept with
 * the plan (the next runs of a plan are in the same memory). */
static int packing_buffers(sb_relayout *r, const run_ops *o)
{
    void (*release)(void *) = o->mem ? o->mem->release : NULL;
    if (r->buf_release != release && (r->sbuf || r->rbuf)) { /* another memory: start over */
        void (*old)(void *) = r->buf_release ? r->buf_release : free;
        if (r->sbuf)
            old(r->sbuf);
        if (r->rbuf)
            old(r->rbuf);
        r->sbuf = r->rbuf = NULL;
    }
    r->buf_release = release;
    if (r->n_send > 0 && !r->send_direct && !r->sbuf
        && !(r->sbuf = ops_alloc(o, (size_t)r->floats_sent)))
        return -1;
    if (r->n_recv > 0 && !r->recv_direct && !r->rbuf
        && !(r->rbuf = ops_alloc(o, (size_t)r->floats_recv)))
        return -1;
    return 0;
}

static void unpack(sb_relayout *r, const float *src_buf, float *dst_buf, const run_ops *o);

static int run_ops_impl(sb_relayout *r, const float *src_buf, float *dst_buf, const run_ops *o,
                        sb_error *err)
{
    const int need_src = r->n_send > 0 || r->has_self;
    const int need_dst = r->dst.nd != 0;
    const int64_t vs = sb_box_volume(&r->src), vd = sb_box_volume(&r->dst);
    /* A missing buffer is this rank's mistake alone: it still takes part
     * (sending zeros, receiving into scratch) so that the others finish,
     * then reports. */
    const int no_src = need_src && !src_buf, no_dst = need_dst && !dst_buf;
    float *scratch_src = NULL, *scratch_dst = NULL;
    int rc = 0;
    if (no_src) {
        if (!(scratch_src = ops_alloc(o, (size_t)vs)))
            goto oom;
        ops_zero(o, scratch_src, (size_t)vs);
        src_buf = scratch_src;
    }
    if (no_dst && !(dst_buf = scratch_dst = ops_alloc(o, (size_t)vd)))
        goto oom;
    if (packing_buffers(r, o))
        goto oom;
    const float *sendbuf = r->send_direct ? src_buf : r->sbuf;
    float *recvbuf = r->recv_direct ? dst_buf : r->rbuf;
    if (r->n_send > 0 && !r->send_direct)
        for (int i = 0; i < r->n_send; i++) {
            const overlap *ov = &r->send[i];
            /* the overlap alone, at its displacement */
            ops_copy(o, src_buf, &r->src, r->sbuf + r->sdispl[ov->peer], &ov->box, &ov->box, 0);
        }
    if (r->traffic) {
        static float dummy; /* never read or written: its counts are 0 */
        const float *sb = sendbuf ? sendbuf : &dummy;
        float *rb = recvbuf ? recvbuf : &dummy;
        int x = o->mem ? o->mem->alltoallv(sb, r->scount, r->sdispl, rb, r->rcount, r->rdispl,
                                           r->comm)
                       : MPI_Alltoallv(sb, r->scount, r->sdispl, MPI_FLOAT, rb, r->rcount,
                                       r->rdispl, MPI_FLOAT, r->comm);
        if (x != MPI_SUCCESS)
            rc = sb_fail(err, SB_EXIT_INTERNAL, "relayout: the exchange failed on rank %d", r->me);
    }
    if (!rc && (no_src || no_dst))
        rc = sb_fail(err, SB_EXIT_INPUT,
                     "relayout: rank %d passed a NULL %s buffer for a non-empty box", r->me,
                     no_src ? "src" : "dst");
    if (!rc && need_dst)
        unpack(r, src_buf, dst_buf, o);
    ops_release(o, scratch_src);
    ops_release(o, scratch_dst);
    return rc;
oom:
    /* this rank cannot take part: the others would wait for it forever */
    fprintf(stderr, "relayout: rank %d: out of memory for relayout buffers; aborting\n", r->me);
    MPI_Abort(r->comm, SB_EXIT_INTERNAL);
    return -1;
}

/* The received overlaps (in rbuf, or already in dst_buf when recv_direct)
 * and the self overlap into dst_buf. */
static void unpack(sb_relayout *r, const float *src_buf, float *dst_buf, const run_ops *o)
{
    const int64_t vd = sb_box_volume(&r->dst);
    if (r->mode == SB_RELAYOUT_ACCUM) {
        /* Zero, then add every contribution in rank order (self
         * included), so the sum does not depend on arrival order. */
        ops_zero(o, dst_buf, (size_t)vd);
        int i = 0;
        for (; i < r->n_recv && r->recv[i].peer < r->me; i++)
            ops_copy(o, r->rbuf + r->rdispl[r->recv[i].peer], &r->recv[i].box, dst_buf,
                     &r->dst, &r->recv[i].box, 1);
        if (r->has_self)
            ops_copy(o, src_buf, &r->src, dst_buf, &r->dst, &r->self, 1);
        for (; i < r->n_recv; i++)
            ops_copy(o, r->rbuf + r->rdispl[r->recv[i].peer], &r->recv[i].box, dst_buf,
                     &r->dst, &r->recv[i].box, 1);
    } else {
        if (r->has_self)
            ops_copy(o, src_buf, &r->src, dst_buf, &r->dst, &r->self, 0);
        if (!r->recv_direct)
            for (int i = 0; i < r->n_recv; i++)
                ops_copy(o, r->rbuf + r->rdispl[r->recv[i].peer], &r->recv[i].box, dst_buf,
                         &r->dst, &r->recv[i].box, 0);
    }
}

int sb_relayout_run(sb_relayout *r, const float *src_buf, float *dst_buf, sb_error *err)
{
    const run_ops host = {NULL};
    return run_ops_impl(r, src_buf, dst_buf, &host, err);
}

int sb_relayout_run_mem(sb_relayout *r, const float *src_buf, float *dst_buf,
                        const sb_relayout_mem *mem, sb_error *err)
{
    const run_ops dev = {mem};
    return run_ops_impl(r, src_buf, dst_buf, &dev, err);
}

/* ---- point to point -------------------------------------------------------- */

/* Sends in flight: each request with the packed buffer it reads. */
struct sb_relayout_pending {
    MPI_Request *req;
    float **buf;
    int n, cap;
};

int sb_relayout_pending_new(sb_relayout_pending **out, sb_error *err)
{
    *out = sb_calloc(1, sizeof **out, err);
    return *out ? 0 : -1;
}

/* Frees the buffers of the sends that are done (all of them with wait). */
static int pending_reap(sb_relayout_pending *p, int wait)
{
    int k = 0, rc = MPI_SUCCESS;
    for (int i = 0; i < p->n; i++) {
        int done = 0;
        int x = wait ? MPI_Wait(&p->req[i], MPI_STATUS_IGNORE)
                     : MPI_Test(&p->req[i], &done, MPI_STATUS_IGNORE);
        if (x != MPI_SUCCESS)
            rc = x;
        if (wait || done || x != MPI_SUCCESS) {
            free(p->buf[i]);
            continue;
        }
        p->req[k] = p->req[i];
        p->buf[k++] = p->buf[i];
    }
    p->n = k;
    return rc;
}

int sb_relayout_pending_wait(sb_relayout_pending *p, sb_error *err)
{
    if (p && pending_reap(p, 1) != MPI_SUCCESS)
        return sb_fail(err, SB_EXIT_INTERNAL, "relayout: a point-to-point send failed");
    return 0;
}

void sb_relayout_pending_free(sb_relayout_pending *p)
{
    if (!p)
        return;
    pending_reap(p, 1);
    free(p->req);
    free(p->buf);
    free(p);
}

static int pending_push(sb_relayout_pending *p, float *buf, MPI_Request **req, sb_error *err)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        MPI_Request *q = sb_realloc(p->req, sizeof *q * (size_t)cap, err);
        if (!q)
            return -1;
        p->req = q;
        float **b = sb_realloc(p->buf, sizeof *b * (size_t)cap, err);
        if (!b)
            return -1;
        p->buf = b;
        p->cap = cap;
    }
    p->buf[p->n] = buf;
    *req = &p->req[p->n++];
    return 0;
}

int sb_relayout_run_p2p(sb_relayout *r, const float *src_buf, float *dst_buf, int tag,
                        sb_relayout_pending *pend, sb_error *err)
{
    const run_ops host = {NULL};
    if (((r->n_send > 0 || r->has_self) && !src_buf) || (r->dst.nd != 0 && !dst_buf))
        return sb_fail(err, SB_EXIT_INPUT, "relayout: rank %d passed a NULL buffer for a "
                       "non-empty box", r->me);
    pending_reap(pend, 0);
    int rc = 0;
    MPI_Request *rr = NULL;
    if (r->n_recv > 0) {
        if (packing_buffers(r, &host) || !(rr = sb_malloc(sizeof *rr * (size_t)r->n_recv, err)))
            return sb_fail(err, SB_EXIT_INTERNAL, "relayout: rank %d: out of memory", r->me);
        float *base = r->recv_direct ? dst_buf : r->rbuf;
        for (int i = 0; i < r->n_recv && !rc; i++) {
            int p = r->recv[i].peer;
            if (MPI_Irecv(base + r->rdispl[p], r->rcount[p], MPI_FLOAT, p, tag, r->comm, &rr[i])
                != MPI_SUCCESS)
                rc = sb_fail(err, SB_EXIT_INTERNAL, "relayout: a receive failed on rank %d", r->me);
        }
    }
    /* each send from a buffer of its own: the caller may reuse src_buf at
     * once, and a plan runs again (the next micro-batch) before its sends
     * are done */
    for (int i = 0; i < r->n_send && !rc; i++) {
        const overlap *ov = &r->send[i];
        float *buf = malloc((size_t)(ov->count ? ov->count : 1) * sizeof *buf);
        MPI_Request *req;
        if (!buf || pending_push(pend, buf, &req, err)) {
            free(buf);
            rc = sb_fail(err, SB_EXIT_INTERNAL, "relayout: rank %d: out of memory", r->me);
            break;
        }
        sb_box_copy(src_buf, &r->src, buf, &ov->box, &ov->box, 0);
        if (MPI_Isend(buf, (int)ov->count, MPI_FLOAT, ov->peer, tag, r->comm, req) != MPI_SUCCESS)
            rc = sb_fail(err, SB_EXIT_INTERNAL, "relayout: a send failed on rank %d", r->me);
    }
    if (r->n_recv > 0 && MPI_Waitall(r->n_recv, rr, MPI_STATUSES_IGNORE) != MPI_SUCCESS && !rc)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "relayout: a receive failed on rank %d", r->me);
    free(rr);
    if (!rc && r->dst.nd != 0)
        unpack(r, src_buf, dst_buf, &host);
    return rc;
}
