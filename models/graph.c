/* graph.c: what a parsed model offers: names of op kinds (from the builders'
 * rules, op_rules[] of ops/table.c), edges, the text of an iteration space,
 * freeing. Parsing: lang.c; loading by name or path: load.c. */
#define _GNU_SOURCE
#include "shardbench/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

const char *sb_op_kind_name(sb_op_kind k)
{
    return (unsigned)k < SB_OP_KIND_COUNT ? op_rules[k]->names[0] : "?";
}

void sb_model_free(sb_model *m)
{
    if (!m)
        return;
    free(m->params);
    free(m->ops);
    free(m->tensors);
    m->params = NULL;
    m->ops = NULL;
    m->tensors = NULL;
    m->nparams = m->nops = m->ntensors = 0;
}

int sb_model_edges(const sb_model *m, sb_edge **edges, int *nedges, sb_error *err)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        for (int k = 0; k < m->ops[i].nin; k++)
            n += m->tensors[m->ops[i].in[k].tensor].producer >= 0;
    sb_edge *e = sb_calloc((size_t)n, sizeof *e, err);
    if (!e)
        return -1;
    n = 0;
    for (int i = 0; i < m->nops; i++)
        for (int k = 0; k < m->ops[i].nin; k++) {
            const sb_tensor *t = &m->tensors[m->ops[i].in[k].tensor];
            if (t->producer < 0)
                continue;
            e[n++] = (sb_edge){.src = t->producer, .src_slot = t->producer_slot,
                               .dst = i, .dst_slot = k, .tensor = m->ops[i].in[k].tensor};
        }
    *edges = e;
    *nedges = n;
    return 0;
}

void sb_op_dims_str(const sb_op *op, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < op->ndims && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", op->dims[i].name);
}
