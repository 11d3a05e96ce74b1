/* survivors.h: the strategies a bench measures for one (model, P) (private
 * to measure/): read from prune's index, or added by the bench itself
 * (data parallel, random valid ones, the paper's Table II). */
#ifndef SB_MEASURE_SURVIVORS_H
#define SB_MEASURE_SURVIVORS_H

#include <limits.h>
#include <stdint.h>

#include "shardbench/measure.h"
#include "shardbench/results.h"
#include "shardbench/search.h"

typedef struct {
    char file[PATH_MAX];
    char kind[32];
    double cost, mem; /* NaN / 0 when not given */
    int64_t meas_id; /* its latest measurements row as a plain strategy (one
                      * that bench can price again: reprice), else 0 */
    int got;         /* this trial round's launch trained it: got holds its figures (run_round) */
    sb_measurement_record res;
    double other;    /* the other cores busy during the launch that trained it last (NaN:
                      * unknown, taken as free of other work) */
    int n_ok, n_clean; /* its trials ok in this pair; of those, free of other work */
} survivor;

/* Reads DIR/index.tsv (header file, kind, predicted_cost, predicted_mem_bytes). */
int survivors_read_index(const char *dir, survivor **out, int *n, sb_error *err);
/* Writes choice as DIR/bench-KIND-pP.strategy and appends it to the list. */
int survivors_add(const sb_problem *pb, const char *dir, const char *kind, const int *choice,
                  survivor **sv, int *n, sb_error *err);
/* The data-parallel strategy, unless prune gave it already. */
int survivors_add_data_parallel(const sb_problem *pb, const char *dir, survivor **sv, int *n,
                                sb_error *err);
/* --random N: N strategies whose every op takes a config drawn uniformly
 * (xorshift seeded by the seed, the model's name and P: the same strategies
 * in every run of the same bench), kinds rand1..randN; none at P = 1. */
int survivors_add_random(const sb_problem *pb, const char *dir, int count, uint64_t seed,
                         survivor **sv, int *n, sb_error *err);
/* The paper's Table II strategy (paper.h) for this model, sizes and P, when
 * the table has the model (bench --paper); a note when it does not. */
int survivors_add_paper(const sb_problem *pb, const char *dir, survivor **sv, int *n, sb_error *err);

#endif
