/* shardbench/dtensor.h: DTensor-style utilities on top of the executor's
 * boxes: meshes and layouts (with TF DTensor's string forms), a barrier on a
 * mesh, sharded checkpoints (save once per distinct shard, restore into any
 * other boxes), CRC-32C, and a dataset that splits a global batch over a
 * mesh's batch axis.
 *
 * A mesh is a named grid of devices: axes with sizes, and the device id
 * (MPI rank) at each grid position, row-major (last axis fastest). A layout
 * gives each tensor dim a mesh axis or `unsharded`. Rank r at mesh position
 * with coordinates g holds, in a dim sharded over axis a of size n,
 * [g_a*D/n, (g_a+1)*D/n); ranks outside the mesh hold nothing. */
#ifndef SHARDBENCH_DTENSOR_H
#define SHARDBENCH_DTENSOR_H

#include <mpi.h>

#include "shardbench/relayout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_MESH_MAX_AXES 8
#define SB_MESH_MAX_DEVICES 4096
#define SB_MESH_NAME_MAX 64

typedef struct {
    char name[SB_MESH_NAME_MAX];                 /* may be empty */
    int naxes;
    char axis[SB_MESH_MAX_AXES][SB_MESH_NAME_MAX];
    int size[SB_MESH_MAX_AXES];
    int ndevices;                                /* product of sizes */
    int device[SB_MESH_MAX_DEVICES];             /* rank at each grid position */
} sb_mesh;

/* Parses DTensor's mesh string `name|x=2,y=4|0,1,...,7|0,1,...|devices`:
 * name (may be empty), axes, global device ids, then optional local ids and
 * device names (accepted, not used). Errors: syntax, sizes < 1, an axis
 * named twice, a device count that is not the product of the sizes, a
 * device id used twice. */
int sb_mesh_parse(const char *s, sb_mesh *m, sb_error *err);
/* Prints `name|x=2,y=4|ids|ids` (local ids = global ids); returns the
 * length that was needed (like snprintf). */
int sb_mesh_str(const sb_mesh *m, char *buf, size_t cap);
/* A mesh of ranks 0..prod-1 with the given axes. */
int sb_mesh_make(const char *name, int naxes, const char *const *axes, const int *sizes,
                 sb_mesh *m, sb_error *err);
int sb_mesh_axis(const sb_mesh *m, const char *axis); /* index, or -1 */
/* Grid coordinates of a rank (1), or 0 if the rank is not in the mesh. */
int sb_mesh_coords(const sb_mesh *m, int rank, int *coords);

#define SB_UNSHARDED "unsharded"

typedef struct {
    int nd;                                      /* tensor rank */
    int axis[SB_BOX_MAX_DIMS];                   /* mesh axis per dim, -1 unsharded */
    sb_mesh mesh;
} sb_layout;

/* Parses `sharding_specs:x,unsharded, mesh:<mesh string>`. Errors name the
 * spec: an unknown axis, an axis used twice in one layout, too many dims. */
int sb_layout_parse(const char *s, sb_layout *l, sb_error *err);
int sb_layout_str(const sb_layout *l, char *buf, size_t cap);
/* Builds a layout from spec names (an axis name or "unsharded" per dim). */
int sb_layout_make(const sb_mesh *m, int nd, const char *const *specs, sb_layout *l,
                   sb_error *err);
/* Every rank's box (boxes[nranks]) of a tensor of this global shape under
 * the layout. Errors: rank mismatch, a sharded dim whose size the axis size
 * does not divide, a mesh device id >= nranks. */
int sb_layout_boxes(const sb_layout *l, const int64_t *shape, int nranks, sb_box *boxes,
                    sb_error *err);
/* The inverse: a mesh and layout whose boxes are exactly boxes[nranks]
 * (sharded axes named d0, d1, ... after the tensor dim, replica axes r0,
 * r1, ...). Error if the boxes are not an even grid over a mesh. */
int sb_layout_from_boxes(int nd, const int64_t *shape, int nranks, const sb_box *boxes,
                         sb_layout *l, sb_error *err);

/* Every rank learns whether any rank failed: 0 when rc is 0 on every rank
 * of comm; else -1 on every rank, with err's code the largest code of any
 * failing rank (a code of 0 counts as SB_EXIT_INTERNAL) and err's message
 * the lowest failing rank's, and *failed_rank (when not NULL) that rank.
 * Collective over comm. */
int sb_agree(MPI_Comm comm, int rc, sb_error *err, int *failed_rank);

/* Every rank learns whether all ranks of comm passed the same text (lines
 * of "name=value" facts; NULL counts as ""): 0 when they did; else -1 on
 * every rank with the same err (code SB_EXIT_INPUT): "ranks disagree on
 * the WHAT: rank 0 has LINE, rank R has LINE", R the lowest rank whose text
 * differs from rank 0's and LINE the first line where the two differ.
 * Compares 64-bit hashes (one broadcast, one all-reduce); moves the two
 * texts only when they differ. Collective over comm. */
int sb_agree_text(MPI_Comm comm, const char *what, const char *text, sb_error *err);

/* Completes this rank's queued work (sync, when not NULL: the backend's
 * sync), checks that comm has exactly the mesh's device count, then blocks
 * until every rank of comm has entered. Logs entry and exit with the name
 * at debug level (SHARDBENCH_LOG=debug). Collective over comm. */
int sb_barrier(MPI_Comm comm, const sb_mesh *m, const char *name, void (*sync)(void),
               sb_error *err);
/* 1 when SHARDBENCH_LOG=debug; sb_debug prints "[shardbench rank R] ..." to
 * stderr then. */
int sb_debug_enabled(void);
void sb_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* CRC-32C (Castagnoli, reflected 0x82F63B78): the CPU's CRC32 instruction
 * where it has one (x86-64 SSE4.2), else table driven. crc is the running
 * value: start with 0, feed pieces in order. sb_crc32c_portable is the
 * table-driven path alone; sb_crc32c_hardware() says which sb_crc32c uses. */
uint32_t sb_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t sb_crc32c_portable(uint32_t crc, const void *data, size_t n);
int sb_crc32c_hardware(void);

/* ---- sharded checkpoints ------------------------------------------------
 * Files under a path prefix P: P.index (written last, by rank 0) and one
 * P.shard-RRRRR-of-NNNNN per rank that writes a shard. See runtime/README.md
 * for the format. */

typedef struct {
    const char *name;
    int nd;
    const int64_t *shape;     /* global shape */
    const sb_box *boxes;      /* every rank's box (comm size entries) */
    const float *data;        /* this rank's shard, row-major over its box */
} sb_ckpt_tensor;

typedef struct {
    int64_t step;             /* stored in the index, returned by restore */
    int64_t block_bytes;      /* CRC block size (0: 1 MiB) */
} sb_ckpt_save_opts;

/* Collective over comm. Of equal boxes (replicas) the lowest rank writes;
 * distinct boxes must be disjoint and cover the tensor. Every rank gets the
 * same verdict. */
int sb_checkpoint_save(MPI_Comm comm, const char *prefix, const sb_ckpt_tensor *t, int n,
                       const sb_ckpt_save_opts *opts, sb_error *err);

typedef struct {
    const char *name;
    int nd;
    const int64_t *shape;     /* expected global shape */
    sb_box box;               /* this rank's target box (nd 0: none) */
    float *data;              /* destination, row-major over box */
} sb_ckpt_target;

/* Collective over comm (any size, any boxes). Each rank reads only the CRC
 * blocks of the shards that overlap its target boxes, verifies them, and
 * writes the destinations only when every rank succeeded; on error every
 * rank returns the same message (naming file and tensor) and no destination
 * is touched. *step (may be NULL) gets the saved step. */
int sb_checkpoint_restore(MPI_Comm comm, const char *prefix, const sb_ckpt_target *t, int n,
                          int64_t *step, sb_error *err);

/* 1 if P.index exists (a checkpoint without its index does not exist). */
int sb_checkpoint_exists(const char *prefix);

/* Checkpoint folders for training runs: DIR/step-NNNNNN/ckpt.* */
/* Creates DIR and DIR/step-NNNNNN (mkdir -p) and writes the prefix
 * DIR/step-NNNNNN/ckpt into out. Local (call on one rank). */
int sb_checkpoint_step_dir(const char *dir, int64_t step, char *out, size_t cap, sb_error *err);
/* The checkpoint to restore from `dir`: `dir` itself when it is a prefix
 * (dir.index exists), DIR/ckpt when DIR/ckpt.index exists, else the newest
 * DIR/step-NNNNNN with an index. Error when there is none. Local. */
int sb_checkpoint_find(const char *dir, char *prefix, size_t cap, sb_error *err);
/* Keeps the newest `keep` complete step folders of DIR and removes every
 * step folder older than the oldest kept one (complete or not). Local. */
int sb_checkpoint_prune(const char *dir, int keep, sb_error *err);

/* The executor's weights: save (with steps done as the step) and restore
 * (weights and the step counter, so inputs continue where the save left
 * off). Collective. A restore accounts for every tensor: each weight of the
 * executor must be in the checkpoint with its shape, and each tensor of the
 * checkpoint a weight of the executor; else every rank fails with a message
 * naming the tensors the checkpoint has and the model not, the reverse,
 * and the shape mismatches. With `partial` (restore_executor_ex) the
 * weights both hold with the same shape are restored, the others keep
 * their initial values, and `skipped` (cap bytes, may be NULL) gets what
 * was left out ("" when nothing was). */
struct sb_executor;
int sb_checkpoint_save_executor(struct sb_executor *ex, const char *prefix, sb_error *err);
int sb_checkpoint_restore_executor(struct sb_executor *ex, const char *prefix, sb_error *err);
int sb_checkpoint_restore_executor_ex(struct sb_executor *ex, const char *prefix, int partial,
                                      char *skipped, size_t cap, sb_error *err);

/* ---- distributed dataset ------------------------------------------------ */

/* A source of samples: count samples, each `sample_floats` floats (shape
 * dims[nd]) and an int label. */
typedef struct sb_data_source sb_data_source;

/* Synthetic samples from a counter-based hash of (seed, index): floats in
 * [-1, 1), labels in [0, classes). */
int sb_data_synthetic(int64_t count, int nd, const int64_t *dims, int classes, uint64_t seed,
                      sb_data_source **out, sb_error *err);
/* A record file (format in runtime/README.md). Checks the header; each
 * record's CRC is checked when it is read. */
int sb_data_open_records(const char *path, sb_data_source **out, sb_error *err);
/* Writes a record file from a source (temp name, fsync, rename). */
int sb_data_write_records(const char *path, sb_data_source *src, sb_error *err);
int64_t sb_data_count(const sb_data_source *s);
/* Sample i (random access): x gets its floats, *label its label. */
int sb_data_read(const sb_data_source *s, int64_t i, float *x, int32_t *label, sb_error *err);
int sb_data_dims(const sb_data_source *s, int64_t *dims); /* returns nd */
/* One line that tells sources apart (kind, count, sample dims; a record
 * file's size and a checksum of its header and of the stored CRCs of up to
 * 256 records spread over the file; a synthetic source's classes and
 * seed): ranks compare it so that per-node copies of a file that differ
 * fail at start-up. Not the path. */
void sb_data_describe(const sb_data_source *s, char *buf, size_t cap);
void sb_data_free(sb_data_source *s);

/* How a dataset is split. The input tensors' layouts (sample tensor and
 * label tensor, in that order: the data structure) must shard dim 0, the
 * batch dim, over batch_axis and shard no other dim before it. */
typedef struct {
    const sb_mesh *mesh;
    const char *batch_axis;     /* NULL: the batch is replicated */
    int nlayouts;               /* must be 2 (samples, labels) */
    const sb_layout *layouts;
    int64_t global_batch;
    int64_t per_replica_batch;  /* 0, or a dataset already batched per replica: checked */
    uint64_t seed;              /* shuffle; 0 = no shuffle */
    int drop_remainder;         /* 0: the count must be a multiple of the global batch */
    int prefetch;               /* 1: a background thread reads the next batch */
} sb_dataset_opts;

typedef struct sb_dataset sb_dataset;

/* This rank's view of the dataset (its replica along the batch axis). The
 * source stays owned by the caller and must outlive the dataset. */
int sb_dataset_open(sb_data_source *src, int rank, const sb_dataset_opts *o, sb_dataset **out,
                    sb_error *err);
int64_t sb_dataset_per_replica_batch(const sb_dataset *d);
int64_t sb_dataset_batches_per_epoch(const sb_dataset *d);
/* The next per-replica batch (epochs follow each other): x has
 * per_replica_batch * sample_floats floats, labels and index (global sample
 * indices; may be NULL) per_replica_batch entries. *epoch may be NULL. */
int sb_dataset_next(sb_dataset *d, float *x, int32_t *labels, int64_t *index, int64_t *epoch,
                    sb_error *err);
void sb_dataset_close(sb_dataset *d);

/* The shuffled order of an epoch (perm[count]): identical on every rank for
 * the same (seed, epoch); identity when seed is 0. */
void sb_dataset_permutation(uint64_t seed, int64_t epoch, int64_t count, int64_t *perm);

#ifdef __cplusplus
}
#endif
#endif
