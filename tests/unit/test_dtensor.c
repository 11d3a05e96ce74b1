/* test_dtensor.c: meshes and layouts (parse, print, validation errors,
 * boxes and back), CRC-32C against published vectors, and the distributed
 * dataset (split over replicas, every sample once per epoch, deterministic
 * shuffle, drop-remainder, DTensor-style errors, record files, prefetch).
 * Single process: the dataset's rank is a parameter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardbench/dtensor.h"

/* ---- mesh and layout ------------------------------------------------------------ */

static void test_mesh_roundtrip(void **state)
{
    (void)state;
    sb_mesh m;
    sb_error err = {0};
    assert_int_equal(sb_mesh_parse("|x=2,y=4|0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7|/job:localhost/"
                                   "replica:0/task:0/device:CPU:0",
                                   &m, &err),
                     0);
    assert_int_equal(m.naxes, 2);
    assert_int_equal(m.ndevices, 8);
    assert_string_equal(m.axis[1], "y");
    char s[256];
    sb_mesh_str(&m, s, sizeof s);
    assert_string_equal(s, "|x=2,y=4|0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7");
    sb_mesh m2;
    assert_int_equal(sb_mesh_parse("grid|a=3|5,4,3", &m2, &err), 0);
    sb_mesh_str(&m2, s, sizeof s);
    assert_string_equal(s, "grid|a=3|5,4,3|5,4,3");
    int g[SB_MESH_MAX_AXES];
    assert_int_equal(sb_mesh_coords(&m2, 3, g), 1);
    assert_int_equal(g[0], 2);
    assert_int_equal(sb_mesh_coords(&m2, 0, g), 0);
    assert_int_equal(sb_mesh_coords(&m, 6, g), 1);
    assert_int_equal(g[0], 1);
    assert_int_equal(g[1], 2);
    /* a truncated buffer reports the length needed */
    assert_int_equal(sb_mesh_str(&m, s, 5),
                     (int)strlen("|x=2,y=4|0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7"));
}

static void expect_mesh_error(const char *s, const char *want)
{
    sb_mesh m;
    sb_error err = {0};
    int rc = sb_mesh_parse(s, &m, &err);
    if (rc == 0 || !strstr(err.msg, want))
        fail_msg("mesh '%s': rc %d, message '%s', expected '%s'", s, rc, err.msg, want);
    assert_int_equal(err.code, SB_EXIT_INPUT);
}

static void test_mesh_errors(void **state)
{
    (void)state;
    expect_mesh_error("x=2", "expected");
    expect_mesh_error("|x=2,x=2|0,1,2,3", "axis 'x' is named twice");
    expect_mesh_error("|x=0|", "size 0");
    expect_mesh_error("|x=two|0,1", "is not a number");
    expect_mesh_error("|x=2,y=2|0,1,2", "3 global device ids for 4 devices");
    expect_mesh_error("|x=2|0,0", "used twice");
    expect_mesh_error("|x=2|0,1,2", "more global device ids");
    expect_mesh_error("|x|0", "no '=SIZE'");
    expect_mesh_error("|x=2|0,1|7", "local device id '7'");
    expect_mesh_error("|unsharded=2|0,1", "not a valid axis name");
}

static void test_layout_roundtrip(void **state)
{
    (void)state;
    sb_layout l;
    sb_error err = {0};
    const char *s = "sharding_specs:x,unsharded, mesh:|x=2,y=4|0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7";
    assert_int_equal(sb_layout_parse(s, &l, &err), 0);
    assert_int_equal(l.nd, 2);
    assert_int_equal(l.axis[0], 0);
    assert_int_equal(l.axis[1], -1);
    char out[512];
    sb_layout_str(&l, out, sizeof out);
    assert_string_equal(out, s);
    /* boxes: (4, 6) sharded on dim 0 over x (2); y replicates */
    int64_t shape[2] = {4, 6};
    sb_box b[9];
    assert_int_equal(sb_layout_boxes(&l, shape, 9, b, &err), 0);
    assert_int_equal(b[0].lo[0], 0);
    assert_int_equal(b[0].hi[0], 2);
    assert_int_equal(b[3].hi[0], 2);
    assert_int_equal(b[4].lo[0], 2);
    assert_int_equal(b[7].hi[0], 4);
    assert_int_equal(b[5].hi[1], 6);
    assert_int_equal(b[8].nd, 0); /* not in the mesh */
    /* and back: the mesh found has the replica axis inner (r0 = y) */
    sb_layout back;
    assert_int_equal(sb_layout_from_boxes(2, shape, 9, b, &back, &err), 0);
    sb_layout_str(&back, out, sizeof out);
    assert_string_equal(out, "sharding_specs:d0,unsharded, mesh:|d0=2,r0=4|0,1,2,3,4,5,6,7|"
                             "0,1,2,3,4,5,6,7");
    /* a rank-0 tensor and a 2-d sharding over both axes */
    assert_int_equal(sb_layout_parse("sharding_specs:y,x, mesh:m|x=2,y=2|0,1,2,3", &l, &err), 0);
    assert_int_equal(sb_layout_boxes(&l, shape, 4, b, &err), 0);
    assert_int_equal(b[1].lo[0], 2); /* rank 1: x=0, y=1: rows 2..4 */
    assert_int_equal(b[1].lo[1], 0);
    assert_int_equal(b[2].lo[1], 3);
    assert_int_equal(sb_layout_from_boxes(2, shape, 4, b, &back, &err), 0);
    sb_layout_str(&back, out, sizeof out);
    assert_string_equal(out, "sharding_specs:d0,d1, mesh:|d1=2,d0=2|0,1,2,3|0,1,2,3");
    assert_int_equal(sb_layout_parse("sharding_specs: mesh:|x=2|0,1|0,1", &l, &err), 0);
    assert_int_equal(l.nd, 0);
    sb_layout_str(&l, out, sizeof out);
    assert_string_equal(out, "sharding_specs: mesh:|x=2|0,1|0,1");
}

static void expect_layout_error(const char *s, const char *want)
{
    sb_layout l;
    sb_error err = {0};
    int rc = sb_layout_parse(s, &l, &err);
    if (rc == 0 || !strstr(err.msg, want))
        fail_msg("layout '%s': rc %d, message '%s', expected '%s'", s, rc, err.msg, want);
}

static void test_layout_errors(void **state)
{
    (void)state;
    expect_layout_error("sharding_specs:z,unsharded, mesh:|x=2|0,1", "'z', which is not an axis");
    expect_layout_error("sharding_specs:x,x, mesh:|x=2|0,1", "mesh axis 'x' is used twice");
    expect_layout_error("specs:x, mesh:|x=2|0,1", "does not start with");
    expect_layout_error("sharding_specs:x,", "no 'mesh:' part");
    expect_layout_error("sharding_specs:x, mesh:|x=2|0", "1 global device ids for 2");
    expect_layout_error("sharding_specs:, mesh:|x=2|0,1", "empty sharding spec");
    sb_layout l;
    sb_error err = {0};
    assert_int_equal(sb_layout_parse("sharding_specs:unsharded,y, mesh:|x=2,y=4|0,1,2,3,4,5,6,7",
                                     &l, &err),
                     0);
    int64_t shape[2] = {4, 6};
    sb_box b[8];
    assert_int_equal(sb_layout_boxes(&l, shape, 8, b, &err), -1);
    assert_non_null(strstr(err.msg, "size 6 is sharded over mesh axis 'y' of size 4, which does "
                                    "not divide it"));
    assert_int_equal(sb_layout_boxes(&l, (int64_t[]){4, 8}, 4, b, &err), -1);
    assert_non_null(strstr(err.msg, "mesh device 4 is not one of the 4 ranks"));
    /* boxes that are no layout */
    sb_box odd[2] = {{.nd = 1, .lo = {0}, .hi = {3}}, {.nd = 1, .lo = {3}, .hi = {8}}};
    assert_int_equal(sb_layout_from_boxes(1, (int64_t[]){8}, 2, odd, &l, &err), -1);
    assert_non_null(strstr(err.msg, "even grid"));
}

/* ---- CRC-32C --------------------------------------------------------------------- */

static void test_crc32c(void **state)
{
    (void)state;
    assert_int_equal(sb_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(sb_crc32c(0, "", 0), 0);
    assert_int_equal(sb_crc32c(0, "a", 1), 0xC1D04330u);
    unsigned char z[32] = {0}, o[32], inc[32], dec[32];
    memset(o, 0xff, sizeof o);
    for (int i = 0; i < 32; i++) {
        inc[i] = (unsigned char)i;
        dec[i] = (unsigned char)(31 - i);
    }
    /* RFC 3720 (iSCSI) B.4 */
    assert_int_equal(sb_crc32c(0, z, 32), 0x8A9136AAu);
    assert_int_equal(sb_crc32c(0, o, 32), 0x62A8AB43u);
    assert_int_equal(sb_crc32c(0, inc, 32), 0x46DD794Eu);
    assert_int_equal(sb_crc32c(0, dec, 32), 0x113FDB5Cu);
    /* pieces chain */
    assert_int_equal(sb_crc32c(sb_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    /* the hardware path (when this CPU has one) and the tables agree on
     * every length 0..300 at every alignment 0..7, and chain the same */
    assert_int_equal(sb_crc32c_portable(0, "123456789", 9), 0xE3069283u);
    unsigned char buf[320];
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n <= 300; n++) {
            uint32_t a = sb_crc32c(0, buf + off, n), b = sb_crc32c_portable(0, buf + off, n);
            if (a != b)
                fail_msg("crc32c: %s path %08x, tables %08x (offset %zu, %zu bytes)",
                         sb_crc32c_hardware() ? "hardware" : "same", a, b, off, n);
            uint32_t c = sb_crc32c(sb_crc32c(0, buf + off, n / 3), buf + off + n / 3, n - n / 3);
            assert_int_equal(c, b);
        }
    print_message("crc32c: %s path\n", sb_crc32c_hardware() ? "SSE4.2 instruction" : "table");
}

/* ---- dataset ------------------------------------------------------------------------ */

typedef struct {
    sb_mesh mesh;
    sb_layout lay[2];
    sb_dataset_opts o;
} ds_setup;

/* mesh batch=B, model=M; samples (N, 3) and labels (N) sharded on batch */
static void ds_make(ds_setup *s, int b, int m, int64_t global)
{
    sb_error err = {0};
    const char *axes[2] = {"batch", "model"};
    int sizes[2] = {b, m};
    assert_int_equal(sb_mesh_make("data", 2, axes, sizes, &s->mesh, &err), 0);
    const char *sx[2] = {"batch", SB_UNSHARDED}, *sl[1] = {"batch"};
    assert_int_equal(sb_layout_make(&s->mesh, 2, sx, &s->lay[0], &err), 0);
    assert_int_equal(sb_layout_make(&s->mesh, 1, sl, &s->lay[1], &err), 0);
    s->o = (sb_dataset_opts){.mesh = &s->mesh, .batch_axis = "batch", .nlayouts = 2,
                             .layouts = s->lay, .global_batch = global, .seed = 5,
                             .drop_remainder = 1};
}

static void test_dataset_split(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_data_source *src;
    int64_t dims[1] = {3};
    assert_int_equal(sb_data_synthetic(22, 1, dims, 10, 9, &src, &err), 0);
    ds_setup s;
    ds_make(&s, 2, 2, 4); /* 4 ranks: replicas 0,0,1,1; 22 samples -> 5 batches, 2 dropped */
    int seen[2][22] = {{0}};
    for (int epoch = 0; epoch < 2; epoch++)
        for (int r = 0; r < 4; r++) {
            sb_dataset *d;
            s.o.prefetch = r % 2;
            assert_int_equal(sb_dataset_open(src, r, &s.o, &d, &err), 0);
            assert_int_equal(sb_dataset_per_replica_batch(d), 2);
            assert_int_equal(sb_dataset_batches_per_epoch(d), 5);
            float x[6];
            int32_t lab[2];
            int64_t idx[2], ep;
            /* skip to the epoch */
            for (int k = 0; k < 5 * epoch; k++)
                assert_int_equal(sb_dataset_next(d, x, lab, idx, &ep, &err), 0);
            for (int k = 0; k < 5; k++) {
                assert_int_equal(sb_dataset_next(d, x, lab, idx, &ep, &err), 0);
                assert_int_equal(ep, epoch);
                int64_t perm[22];
                sb_dataset_permutation(5, epoch, 22, perm);
                for (int j = 0; j < 2; j++) {
                    /* replica (r / 2) of batch k: perm[k*4 + (r/2)*2 + j] */
                    assert_int_equal(idx[j], perm[k * 4 + (r / 2) * 2 + j]);
                    if (r % 2 == 0)
                        seen[epoch][idx[j]]++;
                }
            }
            sb_dataset_close(d);
        }
    for (int epoch = 0; epoch < 2; epoch++) {
        int once = 0, never = 0;
        for (int i = 0; i < 22; i++) {
            assert_true(seen[epoch][i] <= 1);
            once += seen[epoch][i] == 1;
            never += seen[epoch][i] == 0;
        }
        assert_int_equal(once, 20);
        assert_int_equal(never, 2);
    }
    /* shuffles differ between epochs and seeds, and are permutations */
    int64_t p0[22], p1[22], p2[22], p0b[22];
    sb_dataset_permutation(5, 0, 22, p0);
    sb_dataset_permutation(5, 0, 22, p0b);
    sb_dataset_permutation(5, 1, 22, p1);
    sb_dataset_permutation(6, 0, 22, p2);
    assert_memory_equal(p0, p0b, sizeof p0);
    assert_memory_not_equal(p0, p1, sizeof p0);
    assert_memory_not_equal(p0, p2, sizeof p0);
    sb_dataset_permutation(0, 3, 22, p2);
    for (int i = 0; i < 22; i++)
        assert_int_equal(p2[i], i);
    sb_data_free(src);
}

static void expect_open_error(sb_data_source *src, const sb_dataset_opts *o, int rank,
                              const char *want)
{
    sb_dataset *d = NULL;
    sb_error err = {0};
    int rc = sb_dataset_open(src, rank, o, &d, &err);
    if (rc == 0 || !strstr(err.msg, want))
        fail_msg("dataset open: rc %d, message '%s', expected '%s'", rc, err.msg, want);
    assert_null(d);
}

static void test_dataset_errors(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_data_source *src;
    int64_t dims[1] = {3};
    assert_int_equal(sb_data_synthetic(22, 1, dims, 10, 9, &src, &err), 0);
    ds_setup s;
    ds_make(&s, 2, 2, 4);
    sb_dataset_opts o = s.o;
    o.nlayouts = 1;
    expect_open_error(src, &o, 0, "layouts and data structure do not match: 1 layouts");
    o = s.o;
    o.global_batch = 5;
    expect_open_error(src, &o, 0, "global batch size 5 is not divisible by the 2 replicas");
    o = s.o;
    o.per_replica_batch = 4;
    expect_open_error(src, &o, 0, "per-replica batch size mismatch");
    o = s.o;
    o.drop_remainder = 0;
    expect_open_error(src, &o, 0, "not a multiple of the global batch 4");
    o = s.o;
    o.batch_axis = "model";
    expect_open_error(src, &o, 0, "batch dim 'model' was named, but it is not the first sharded");
    o = s.o;
    o.batch_axis = "nope";
    expect_open_error(src, &o, 0, "batch dim 'nope' is not an axis");
    expect_open_error(src, &s.o, 7, "rank 7 is not a device");
    sb_layout bad[2] = {s.lay[0], s.lay[1]};
    const char *sx[1] = {"batch"};
    assert_int_equal(sb_layout_make(&s.mesh, 1, sx, &bad[0], &err), 0);
    o = s.o;
    o.layouts = bad;
    expect_open_error(src, &o, 0, "the samples layout has rank 1, the samples have rank 2");
    const char *sm[2] = {"batch", "model"};
    assert_int_equal(sb_layout_make(&s.mesh, 2, sm, &bad[0], &err), 0);
    expect_open_error(src, &o, 0, "shards dim 1 over 'model'; only the batch dim");
    o = s.o;
    o.global_batch = 24;
    expect_open_error(src, &o, 0, "22 samples hold no full global batch of 24");
    sb_data_free(src);
    /* non-static shapes */
    int64_t bad_dims[2] = {3, -1};
    assert_int_equal(sb_data_synthetic(22, 2, bad_dims, 10, 9, &src, &err), -1);
    assert_non_null(strstr(err.msg, "non-static shape: sample dim 1 has size -1"));
}

static void test_records(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_data_source *syn, *rec;
    int64_t dims[2] = {2, 3};
    assert_int_equal(sb_data_synthetic(12, 2, dims, 7, 4, &syn, &err), 0);
    char path[] = "/tmp/sb_records_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sb_data_write_records(path, syn, &err), 0);
    assert_int_equal(sb_data_open_records(path, &rec, &err), 0);
    assert_int_equal(sb_data_count(rec), 12);
    int64_t d2[SB_BOX_MAX_DIMS];
    assert_int_equal(sb_data_dims(rec, d2), 2);
    assert_int_equal(d2[1], 3);
    /* the same batches from the file as from the generator */
    ds_setup s;
    sb_error e2 = {0};
    const char *axes[1] = {"batch"};
    int n = 2;
    assert_int_equal(sb_mesh_make("d", 1, axes, &n, &s.mesh, &e2), 0);
    const char *sx[3] = {"batch", SB_UNSHARDED, SB_UNSHARDED}, *sl[1] = {"batch"};
    assert_int_equal(sb_layout_make(&s.mesh, 3, sx, &s.lay[0], &err), 0);
    assert_int_equal(sb_layout_make(&s.mesh, 1, sl, &s.lay[1], &err), 0);
    s.o = (sb_dataset_opts){.mesh = &s.mesh, .batch_axis = "batch", .nlayouts = 2,
                            .layouts = s.lay, .global_batch = 4, .seed = 11, .prefetch = 1};
    sb_dataset *da, *db;
    assert_int_equal(sb_dataset_open(syn, 1, &s.o, &da, &err), 0);
    assert_int_equal(sb_dataset_open(rec, 1, &s.o, &db, &err), 0);
    for (int k = 0; k < 7; k++) {
        float xa[12], xb[12];
        int32_t la[2], lb[2];
        assert_int_equal(sb_dataset_next(da, xa, la, NULL, NULL, &err), 0);
        assert_int_equal(sb_dataset_next(db, xb, lb, NULL, NULL, &err), 0);
        assert_memory_equal(xa, xb, sizeof xa);
        assert_memory_equal(la, lb, sizeof la);
        for (int j = 0; j < 2; j++)
            assert_true(la[j] >= 0 && la[j] < 7);
    }
    sb_dataset_close(da);
    sb_dataset_close(db);
    sb_data_free(rec);
    /* a flipped byte in a record: its checksum error names the file */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, -10, SEEK_END);
    int c = fgetc(f);
    fseek(f, -10, SEEK_END);
    fputc(c ^ 1, f);
    fclose(f);
    assert_int_equal(sb_data_open_records(path, &rec, &err), 0);
    s.o.seed = 0;
    s.o.global_batch = 12;
    assert_int_equal(sb_dataset_open(rec, 0, &s.o, &db, &err), 0);
    float x[36];
    int32_t l[6];
    /* rank 0 reads samples 0..5; rank 1 (6..11) holds the flipped record */
    assert_int_equal(sb_dataset_next(db, x, l, NULL, NULL, &err), 0);
    sb_dataset_close(db);
    assert_int_equal(sb_dataset_open(rec, 1, &s.o, &db, &err), 0);
    assert_int_equal(sb_dataset_next(db, x, l, NULL, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "checksum mismatch in record 11"));
    assert_non_null(strstr(err.msg, path));
    sb_dataset_close(db);
    sb_data_free(rec);
    /* truncated file */
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(sb_data_open_records(path, &rec, &err), -1);
    assert_non_null(strstr(err.msg, "is truncated"));
    assert_int_equal(truncate(path, 10), 0);
    assert_int_equal(sb_data_open_records(path, &rec, &err), -1);
    assert_non_null(strstr(err.msg, "not a shardbench record file"));
    unlink(path);
    sb_data_free(syn);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mesh_roundtrip),  cmocka_unit_test(test_mesh_errors),
        cmocka_unit_test(test_layout_roundtrip), cmocka_unit_test(test_layout_errors),
        cmocka_unit_test(test_crc32c),           cmocka_unit_test(test_dataset_split),
        cmocka_unit_test(test_dataset_errors),   cmocka_unit_test(test_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
