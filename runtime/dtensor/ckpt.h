/* ckpt.h: what the checkpoint files share (internal to runtime/dtensor/):
 * the format's constants, byte buffers, atomic file writes (ckpt_format.c),
 * the index reader (ckpt_format.c) and the local restore (ckpt_restore.c).
 * The format itself: runtime/README.md. Integers are little-endian. */
#ifndef SB_RUNTIME_DTENSOR_CKPT_H
#define SB_RUNTIME_DTENSOR_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "shardbench/dtensor.h"

#define CK_VERSION 1u
#define CK_DTYPE_F32 1u
#define CK_NAME_MAX 256
#define CK_ALIGN 64
extern const char ck_shard_magic[8], ck_index_magic[8];

/* ---- byte buffers (little-endian) ---- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
    int oom;
} wbuf;

void ck_w_bytes(wbuf *w, const void *src, size_t n);
void ck_w_u32(wbuf *w, uint32_t v);
void ck_w_u64(wbuf *w, uint64_t v);
void ck_w_str(wbuf *w, const char *s);

typedef struct {
    const unsigned char *p;
    size_t n, pos;
    int bad;
} rbuf;

/* n bytes, or NULL (and r->bad) when fewer are left */
const unsigned char *ck_r_take(rbuf *r, size_t n);
uint32_t ck_r_u32(rbuf *r);
uint64_t ck_r_u64(rbuf *r);
void ck_r_str(rbuf *r, char *out, size_t cap);

/* ---- files ---- */

typedef struct {
    const void *p;
    size_t n;
} piece;

int ck_fsync_dir_of(const char *path, sb_error *err);
/* Writes pieces to path atomically: path.tmp, fsync, rename, fsync dir. */
int ck_write_atomic(const char *path, const piece *pc, int npc, sb_error *err);
/* P.index of prefix P */
void ck_index_path(const char *prefix, char *out, size_t cap);

/* ---- the index, read ---- */

typedef struct {
    int file;
    sb_box box;
    uint64_t off, nbytes;
    uint32_t crc, nblocks;
    const unsigned char *blocks; /* nblocks little-endian u32, inside the index bytes */
} ck_shard;

typedef struct {
    char name[CK_NAME_MAX];
    uint32_t dtype;
    int nd;
    int64_t shape[SB_BOX_MAX_DIMS];
    int nshards;
    ck_shard *shards;
} ck_tensor;

typedef struct {
    char path[4096], dir[4096];
    unsigned char *bytes;
    int64_t step;
    uint32_t crc;        /* the index file's own CRC-32C (its last 4 bytes) */
    uint64_t block;
    int nfiles;
    char (*files)[CK_NAME_MAX];
    int ntensors;
    ck_tensor *t;
} ck_index;

int ck_index_load(const char *prefix, ck_index *x, sb_error *err);
void ck_index_free(ck_index *x);

/* ---- restore (ckpt_restore.c) ---- */

/* sb_checkpoint_restore; scratch: the targets' buffers are the caller's
 * scratch (written even when the restore fails), so the shards are read
 * straight into them; *step (when not NULL) is the saved step. */
int ck_restore_impl(MPI_Comm comm, const char *prefix, const sb_ckpt_target *g, int n,
                    int scratch, int64_t *step, sb_error *err);

#endif
