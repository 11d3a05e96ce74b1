/* exec.h: the executor's state (per-op boxes and buffers, weights, the
 * executor itself), seen by executor/ and by the op kinds (ops/). No
 * functions: the services on this state are in services.h. Internal to
 * runtime/. */
#ifndef SB_RUNTIME_EXECUTOR_EXEC_H
#define SB_RUNTIME_EXECUTOR_EXEC_H

#include "shardbench/relayout.h"
#include "shardbench/runtime.h"
#include "timing.h"

/* a buffer of backend memory holding one box of a tensor */
typedef struct {
    float *p;
    sb_box box;
    int64_t n;
} tbuf;

/* a trained tensor: owner op, global shape, how its dims follow the op's
 * iteration dims, this rank's shard and gradient */
typedef struct {
    char name[SB_NAME_MAX];
    int op;
    int slot;           /* input slot for an explicit `weight` operand, else -1 */
    int tensor;         /* model tensor for explicit weights */
    /* a tied weight (`tie W = E`, tied.c): W is a working copy of param
     * `owner` (the embedding's table, transposed) in this op's layout: no
     * update, no optimizer state, no ZeRO slices; pulled from the owner
     * at each step's start (pull), its summed gradient pushed into the
     * owner's before the update (push). -1: a trained weight of its own */
    int owner;
    sb_relayout *pull, *push;
    int nd;
    int64_t shape[SB_MAX_DIMS];
    int map[SB_MAX_DIMS];
    double scale, offset;
    uint32_t grad_free; /* iteration dims its gradient is all-reduced over */
    MPI_Comm gcomm;
    tbuf w, dw;
    tbuf m, v;          /* Adam's moments (update rule adam only; ZeRO: the slice's) */
    /* ZeRO (sb_strategy.zero >= 1 and gcomm of zq > 1 ranks): the shard
     * (box, n floats, flattened) is cut into zq contiguous slices, rank r of
     * gcomm owning zcount[r] floats at zdispl[r]; this rank's is [zlo, zhi).
     * Stage 2 and 3 keep the summed gradient of the slice in dws (dw is then
     * a buffer of the op's backward only); stage 3 keeps the weight's slice
     * in ws and gathers w for the op's forward and backward only. */
    sb_box box;
    int64_t n;
    int zq;
    int64_t zlo, zhi;
    int *zcount, *zdispl;
    tbuf ws, dws;
} param;

#define SB_EXEC_MAX_OP_PARAMS 8

/* The buffers of one micro-batch of an op: activations, gradients and
 * statistics that live from its forward to its backward. */
#define SB_EXEC_STEP_BUFFERS                                                                        \
    tbuf in[SB_MAX_IO], din[SB_MAX_IO];                                                            \
    tbuf out[SB_MAX_IO], dout[SB_MAX_IO];                                                          \
    tbuf save[4]; /* statistics kept for the backward */                                           \
    tbuf ids;     /* int32 token ids or labels (backend memory) */
typedef struct {
    SB_EXEC_STEP_BUFFERS
} opx_bufs;

typedef struct {
    int idx;
    int c[SB_MAX_DIMS];
    int q, in_grid;
    int r0, nr;         /* the ranks of the op's stage: [r0, r0 + nr) (no pipeline: 0, P) */
    int g[SB_MAX_DIMS];
    int64_t lo[SB_MAX_DIMS], hi[SB_MAX_DIMS];
    /* the micro-batch being run; the executor keeps the others in mb[] */
    union {
        opx_bufs bufs;
        struct {
            SB_EXEC_STEP_BUFFERS
        };
    };
    opx_bufs *mb;       /* M micro-batches' buffers (mb[j] while j is not running) */
    sb_relayout *fwd[SB_MAX_IO], *bwd[SB_MAX_IO];
    int param_of_slot[SB_MAX_IO];
    int params[SB_EXEC_MAX_OP_PARAMS], nparams;
    MPI_Comm kcomm;     /* partial sums of split reduction dims */
    MPI_Comm acomm;     /* statistics over a split axis (norm, softmax, loss, mean) */
    MPI_Comm lcomm;     /* LSTM: ranks of one layer group */
    double loss_rows;   /* loss op: global row count */
    struct lstm_state *lstm;
} opx;

#define SB_EXEC_MAX_PARAMS_TOTAL 65536

struct sb_executor {
    MPI_Comm comm;
    int rank, size;
    const sb_model *m;  /* the model one micro-batch sees (batch cut M ways), or full */
    const sb_model *full; /* the caller's model (the global batch) */
    const sb_backend *be;
    float lr;
    sb_update_rule update;
    float beta1, beta2, eps;
    int zero;           /* ZeRO stage 0..3 (sb_strategy.zero) */
    /* recomputation (recompute.c): m->nops flags, NULL when no op is
     * recomputed; 1 while a recomputed op's forward runs again before its
     * backward (stage 3 then keeps the gathered weight for the backward) */
    unsigned char *recompute;
    int recomputing;
    uint64_t seed;
    int step;
    opx *ops;
    sb_op_time *times;  /* booked from `ledger` once per step (services.c) */
    /* [4 i + k], k = forward entry, forward exit, backward entry, backward
     * exit of op i in this step: its first entry and last exit of that
     * phase as marks (-1: none yet), and after the step as seconds since
     * step_mark (NaN: none) */
    int *phase_marks;
    double *phase_t;
    int step_mark;      /* the mark the step began with, the phases' origin (-1: none) */
    exec_ledger ledger; /* this step's timing marks and bookings (timing.h) */
    param *params;
    int nparams;
    int nshadow;        /* the last nshadow params are tied copies (tied.c),
                           not weights of their own (sb_executor_nweights) */
    sb_group_cache *groups;
    int64_t live_bytes, peak_bytes;
    double loss_sum;    /* this rank's share of the step's loss */
    /* real data (sb_exec_opts.data) */
    const sb_data_source *data;
    uint64_t data_seed;
    int data_tensor;            /* the model's input tensor */
    int64_t data_batch, data_count, sample_floats;
    int64_t *perm, perm_epoch;  /* epoch order, cached */
    /* a record this rank could not read (or a bad label) in this step: the
     * step goes on with zeros, so collectives stay matched, and every rank
     * learns of it after the forward (sb_executor_step returns -2) */
    int data_failed;
    sb_error data_err;
    struct { float *p; int64_t n; } *pool; /* freed buffers kept for reuse */
    int npool, cap_pool;
    /* pipeline (sb_strategy.pipe): stages, micro-batches, schedule */
    sb_pipeline pipe;
    int stage;          /* this rank's stage */
    int nmb, cur_mb;    /* M micro-batches; the one being run */
    int p2p;            /* relayouts run point to point (stages progress on their own) */
    sb_model micro;     /* M > 1: the model with every batch dim cut M ways */
    int *mb_dim;        /* M > 1: per tensor, its dim that follows batch, or -1 */
    sb_relayout_pending *pending; /* sends still in flight (p2p) */
};

#endif
