/* plan.h: grids, boxes and groups derived from a strategy (internal to
 * runtime/). See plan.c. */
#ifndef SB_RUNTIME_PLAN_H
#define SB_RUNTIME_PLAN_H

#include "shardbench/model.h"
#include "shardbench/relayout.h"

int plan_coords(const int *c, int nd, int r, int *g);
int plan_grid_size(const int *c, int nd);
void plan_iter_box(const sb_op *op, const int *c, const int *g, int64_t *lo, int64_t *hi);
void plan_window(int64_t olo, int64_t ohi, int stride, int pad, int64_t r0, int64_t r1, int dil,
                 int64_t n, int64_t *lo, int64_t *hi);
void plan_operand_box(const sb_model *m, const sb_op *op, const sb_operand *o, const int *c,
                      const int *g, int is_input, sb_box *box);
int plan_group_color(const int *c, int nd, int r, uint32_t free_mask);
int plan_group_size(const int *c, int nd, uint32_t free_mask);

#endif
