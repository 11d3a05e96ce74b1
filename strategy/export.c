/* export.c: a strategy as the layouts other systems read: TF DTensor layout
 * strings, PyTorch DeviceMesh + placements, JAX Mesh + PartitionSpec, and
 * Mesh-TensorFlow mesh shapes + layout rules; and readers for the DTensor
 * and Mesh-TF forms (round trips). Each op runs on its own mesh: one axis
 * per split iteration dim (x, y, z, w, v, u, t, s in dim order) over
 * devices 0..q-1, row-major, as the runtime places it. Where a tensor's
 * producer and consumer layouts differ, a relayout line says how. Not a
 * code generator: the output is text for a person or a script to apply. */
#include "shardbench/candidates.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char axis_name[SB_MAX_DIMS] = {'x', 'y', 'z', 'w', 'v', 'u', 't', 's'};

int sb_export_format_parse(const char *s, sb_export_format *out, sb_error *err)
{
    static const char *const names[] = {"dtensor", "torch", "jax", "mtf"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (sb_export_format)i;
            return 0;
        }
    return sb_fail(err, SB_EXIT_INPUT, "--to: '%s' is not dtensor, torch, jax or mtf", s);
}

/* The op's mesh: axis a <- iteration dim dim_of[a]. */
typedef struct {
    int naxes, q;
    int dim_of[SB_MAX_DIMS];
    int axis_of_dim[SB_MAX_DIMS]; /* -1: dim not split */
    int size[SB_MAX_DIMS];
} op_mesh;

static void mesh_of(const sb_op *op, const int *c, op_mesh *mm)
{
    memset(mm, 0, sizeof *mm);
    mm->q = 1;
    for (int d = 0; d < op->ndims; d++) {
        mm->axis_of_dim[d] = -1;
        if (c[d] > 1) {
            mm->axis_of_dim[d] = mm->naxes;
            mm->dim_of[mm->naxes] = d;
            mm->size[mm->naxes++] = c[d];
            mm->q *= c[d];
        }
    }
}

/* Text that grows as it is written (a mesh of p devices lists 2p ids):
 * start with {0}, read buf (NULL when nothing was written), free buf. */
typedef struct {
    char *buf;
    size_t n, used;
} sink;

static void put(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sink *s, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k > 0 && s->used + (size_t)k + 1 > s->n) {
        size_t nn = 2 * (s->used + (size_t)k + 1);
        char *nb = realloc(s->buf, nn);
        if (!nb) { /* out of memory: the text stays as it is */
            va_end(ap2);
            return;
        }
        s->buf = nb;
        s->n = nn;
    }
    if (k > 0) {
        vsnprintf(s->buf + s->used, s->n - s->used, fmt, ap2);
        s->used += (size_t)k;
    }
    va_end(ap2);
}

static void dtensor_mesh(sink *s, const op_mesh *mm)
{
    put(s, "|");
    if (mm->naxes == 0)
        put(s, "x=1");
    for (int a = 0; a < mm->naxes; a++)
        put(s, "%s%c=%d", a ? "," : "", axis_name[a], mm->size[a]);
    for (int rep = 0; rep < 2; rep++) {
        put(s, "|");
        for (int r = 0; r < mm->q; r++)
            put(s, "%s%d", r ? "," : "", r);
    }
}

/* Per tensor dim of an operand: the mesh axes it is sharded over (a bit
 * mask; the flat side of flatten/unflatten takes every axis). */
static void operand_axes(const sb_op *op, const sb_operand *o, int nd, const op_mesh *mm,
                         uint32_t *axes)
{
    for (int j = 0; j < nd; j++) {
        int mp = o->map[j];
        axes[j] = 0;
        if (mp >= 0 && mm->axis_of_dim[mp] >= 0)
            axes[j] = 1u << mm->axis_of_dim[mp];
        else if (mp == SB_MAP_ALL)
            axes[j] = (1u << mm->naxes) - 1;
    }
    (void)op;
}

static int popcount(uint32_t x) { return __builtin_popcount(x); }

static void axes_list(sink *s, uint32_t mask, const char *quote, const char *sep)
{
    int first = 1;
    for (int a = 0; a < SB_MAX_DIMS; a++)
        if (mask & (1u << a)) {
            put(s, "%s%s%c%s", first ? "" : sep, quote, axis_name[a], quote);
            first = 0;
        }
}

/* One tensor's layout in the chosen format. */
static void layout_text(sink *s, sb_export_format fmt, const op_mesh *mm, const uint32_t *axes,
                        int nd)
{
    switch (fmt) {
    case SB_EXPORT_DTENSOR:
        put(s, "sharding_specs:");
        for (int j = 0; j < nd; j++) {
            if (j)
                put(s, ",");
            if (popcount(axes[j]) > 1) {
                put(s, "(");
                axes_list(s, axes[j], "", "*");
                put(s, ")");
            } else if (axes[j]) {
                axes_list(s, axes[j], "", "");
            } else {
                put(s, "unsharded");
            }
        }
        put(s, ", mesh:");
        dtensor_mesh(s, mm);
        break;
    case SB_EXPORT_TORCH:
        put(s, "[");
        if (mm->naxes == 0)
            put(s, "Replicate()");
        for (int a = 0; a < mm->naxes; a++) {
            int dim = -1;
            for (int j = 0; j < nd; j++)
                if (axes[j] & (1u << a))
                    dim = j;
            put(s, "%s", a ? ", " : "");
            if (dim >= 0)
                put(s, "Shard(%d)", dim);
            else
                put(s, "Replicate()");
        }
        put(s, "]");
        break;
    case SB_EXPORT_JAX:
        put(s, "PartitionSpec(");
        for (int j = 0; j < nd; j++) {
            put(s, "%s", j ? ", " : "");
            if (popcount(axes[j]) > 1) {
                put(s, "(");
                axes_list(s, axes[j], "'", ", ");
                put(s, ")");
            } else if (axes[j]) {
                axes_list(s, axes[j], "'", "");
            } else {
                put(s, "None");
            }
        }
        put(s, ")");
        break;
    case SB_EXPORT_MTF: break;
    }
}

static void mesh_header(FILE *f, sb_export_format fmt, const op_mesh *mm)
{
    switch (fmt) {
    case SB_EXPORT_DTENSOR: {
        sink s = {0};
        dtensor_mesh(&s, mm);
        fprintf(f, "  mesh %s\n", s.buf ? s.buf : "");
        free(s.buf);
        break;
    }
    case SB_EXPORT_TORCH:
        fprintf(f, "  mesh init_device_mesh(\"cuda\", (");
        for (int a = 0; a < mm->naxes; a++)
            fprintf(f, "%d,", mm->size[a]);
        if (!mm->naxes)
            fprintf(f, "1,");
        fprintf(f, "), mesh_dim_names=(");
        for (int a = 0; a < mm->naxes; a++)
            fprintf(f, "\"%c\",", axis_name[a]);
        if (!mm->naxes)
            fprintf(f, "\"x\",");
        fprintf(f, "))  # devices 0..%d\n", mm->q - 1);
        break;
    case SB_EXPORT_JAX:
        fprintf(f, "  mesh Mesh(np.array(jax.devices()[:%d]).reshape(", mm->q);
        for (int a = 0; a < mm->naxes; a++)
            fprintf(f, "%s%d", a ? ", " : "", mm->size[a]);
        if (!mm->naxes)
            fprintf(f, "1");
        fprintf(f, "%s), (", mm->naxes == 1 ? "," : "");
        for (int a = 0; a < mm->naxes; a++)
            fprintf(f, "'%c', ", axis_name[a]);
        if (!mm->naxes)
            fprintf(f, "'x', ");
        fprintf(f, "))\n");
        break;
    case SB_EXPORT_MTF: break;
    }
}

/* Mesh-TF: mesh_shape "x:4;y:2" and layout "batch:x;units:y" per op. */
static void mtf_op(FILE *f, const sb_op *op, const op_mesh *mm)
{
    fprintf(f, "  mesh_shape \"");
    for (int a = 0; a < mm->naxes; a++)
        fprintf(f, "%s%c:%d", a ? ";" : "", axis_name[a], mm->size[a]);
    fprintf(f, "\"\n  layout \"");
    for (int a = 0; a < mm->naxes; a++)
        fprintf(f, "%s%s:%c", a ? ";" : "", op->dims[mm->dim_of[a]].name, axis_name[a]);
    fprintf(f, "\"\n");
}

static const char *const role_word[] = {"in", "out", "weight", "tied"};

/* The table a tied weight (`tie`) copies ("x0.table"), or NULL: written
 * once, as the embedding's weight; the copy is its reader's layout of it. */
static const char *tied_table(const sb_model *m, int tensor, char *buf, size_t n)
{
    for (int i = 0; i < m->ntied && i < 4; i++)
        if (m->tied[i] == tensor && m->tied_to[i] >= 0) {
            snprintf(buf, n, "%s.table", m->ops[m->tied_to[i]].name);
            return buf;
        }
    return NULL;
}

static void operand_line(FILE *f, const sb_model *m, const sb_op *op, const sb_operand *o, int role,
                         const op_mesh *mm, sb_export_format fmt)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    uint32_t axes[SB_MAX_DIMS];
    operand_axes(op, o, t->ndims, mm, axes);
    sink s = {0};
    layout_text(&s, fmt, mm, axes, t->ndims);
    char tb[2 * SB_NAME_MAX];
    const char *tied = tied_table(m, o->tensor, tb, sizeof tb);
    if (role == 0 && t->kind == SB_TENSOR_WEIGHT)
        role = tied ? 3 : 2;
    fprintf(f, "  %-6s %s[", role_word[role], t->name);
    for (int j = 0; j < t->ndims; j++)
        fprintf(f, "%s%s=%lld", j ? "," : "", t->dims[j].name, (long long)t->dims[j].size);
    fprintf(f, "] %s", s.buf ? s.buf : "");
    if (tied)
        fprintf(f, " (= %s transposed, relaid into this layout each step)", tied);
    fprintf(f, "\n");
    free(s.buf);
}

/* One line per distinct layout of the op's own weights (sb_op.weights);
 * weights of one layout share the line: "norm.gamma,.beta[...]". */
static void implicit_lines(FILE *f, const sb_op *op, const op_mesh *mm, sb_export_format fmt)
{
    for (int w = 0; w < op->nweights;) {
        const sb_weight *wt = &op->weights[w];
        int end = w + 1;
        while (end < op->nweights && op->weights[end].ndims == wt->ndims
               && memcmp(op->weights[end].map, wt->map, sizeof wt->map) == 0)
            end++;
        fprintf(f, "  %-6s %s", "weight", op->name);
        for (int k = w; k < end; k++)
            fprintf(f, "%s%s", k > w ? "," : "", op->weights[k].suffix);
        fputc('[', f);
        uint32_t axes[SB_MAX_DIMS];
        for (int j = 0; j < wt->ndims; j++) {
            int mp = wt->map[j];
            axes[j] = mp >= 0 && mm->axis_of_dim[mp] >= 0 ? 1u << mm->axis_of_dim[mp] : 0;
            if (mp >= 0)
                fprintf(f, "%s%s=%lld", j ? "," : "", op->dims[mp].name, (long long)op->dims[mp].size);
            else
                fprintf(f, "%s%lld", j ? "," : "", (long long)wt->size[j]);
        }
        sink s = {0};
        layout_text(&s, fmt, mm, axes, wt->ndims);
        fprintf(f, "] %s\n", s.buf ? s.buf : "");
        free(s.buf);
        w = end;
    }
}

/* "4,1 on 8" : split counts per tensor dim and the devices of the op */
static void short_layout(char *buf, size_t n, const int *lay, int nd, int q)
{
    size_t used = 0;
    for (int j = 0; j < nd && used < n; j++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", j ? "," : "", lay[j]);
    if (used < n)
        snprintf(buf + used, n - used, " on %d devices", q);
}

/* Edge k under a strategy: its ops, their configs, the tensor, its layout
 * at the producer (ls) and at the consumer (ld), and the words a consumer
 * device receives (the cost model's edge formula). */
typedef struct {
    const sb_op *a, *b;
    const int *ca, *cb;
    const sb_tensor *t;
    int ls[SB_MAX_DIMS], ld[SB_MAX_DIMS];
    double words;
} edge_view;

static void edge_view_of(const sb_problem *pb, const int *choice, int k, edge_view *v)
{
    const sb_model *m = pb->m;
    const sb_edge *e = &pb->edges[k];
    v->a = &m->ops[e->src];
    v->b = &m->ops[e->dst];
    v->ca = pb->cfg[e->src].c + (size_t)choice[e->src] * (size_t)v->a->ndims;
    v->cb = pb->cfg[e->dst].c + (size_t)choice[e->dst] * (size_t)v->b->ndims;
    v->t = &m->tensors[e->tensor];
    sb_operand_layout(v->a, &v->a->out[e->src_slot], v->t->ndims, v->ca, v->ls);
    sb_operand_layout(v->b, &v->b->in[e->dst_slot], v->t->ndims, v->cb, v->ld);
    v->words = sb_edge_cost(&pb->cp, v->t, v->ls, v->ld) / sb_words_to_flops(&pb->cp, 2.0);
}

static void relayouts(FILE *f, const sb_problem *pb, const int *choice)
{
    int n = 0;
    for (int k = 0; k < pb->nedges; k++) {
        edge_view v;
        edge_view_of(pb, choice, k, &v);
        op_mesh ma, mb;
        mesh_of(v.a, v.ca, &ma);
        mesh_of(v.b, v.cb, &mb);
        if (!memcmp(v.ls, v.ld, (size_t)v.t->ndims * sizeof(int)) && ma.q == mb.q)
            continue;
        char s1[256], s2[256];
        short_layout(s1, sizeof s1, v.ls, v.t->ndims, ma.q);
        short_layout(s2, sizeof s2, v.ld, v.t->ndims, mb.q);
        fprintf(f, "relayout %s: %s (%s) -> %s (%s); %.6g words per device received\n", v.t->name,
                v.a->name, s1, v.b->name, s2, v.words);
        n++;
    }
    fprintf(f, "# %d of %d edges change layout or mesh\n", n, pb->nedges);
}

int sb_strategy_export(FILE *f, const sb_problem *pb, const int *choice, sb_export_format fmt,
                       sb_error *err)
{
    static const char *const what[] = {"TF DTensor layouts (sharding_specs, mesh |axes|global ids|local ids|)",
                                       "PyTorch DTensor: DeviceMesh and placements per tensor",
                                       "JAX: Mesh and PartitionSpec per tensor",
                                       "Mesh-TensorFlow: mesh_shape and layout rules per op"};
    const sb_model *m = pb->m;
    char params[4096];
    sb_params_str(m, params, sizeof params);
    fprintf(f, "# shardbench export: %s\n# model %s  params %s  p %d  cost %.17g\n", what[fmt],
            m->name, params, pb->p, sb_strategy_cost(pb, choice));
    fprintf(f, "# each op runs on its own mesh over devices 0..q-1 (axes x, y, z, ... = its split "
               "dims in order)\n");
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        const int *c = pb->cfg[i].c + (size_t)choice[i] * (size_t)op->ndims;
        op_mesh mm;
        mesh_of(op, c, &mm);
        char cfg[256];
        sb_config_str(c, op->ndims, cfg, sizeof cfg);
        fprintf(f, "op %s %s config %s\n", op->name, sb_op_kind_name(op->kind), cfg);
        if (fmt == SB_EXPORT_MTF) {
            mtf_op(f, op, &mm);
            continue;
        }
        mesh_header(f, fmt, &mm);
        for (int k = 0; k < op->nin; k++)
            operand_line(f, m, op, &op->in[k], 0, &mm, fmt);
        implicit_lines(f, op, &mm, fmt);
        for (int k = 0; k < op->nout; k++)
            operand_line(f, m, op, &op->out[k], 1, &mm, fmt);
    }
    relayouts(f, pb, choice);
    if (ferror(f))
        return sb_fail(err, SB_EXIT_INTERNAL, "export: write failed: %s", strerror(errno));
    return 0;
}

/* ---- readers ---------------------------------------------------------------------- */

/* "|x=4,y=2|..." -> axis names and sizes; returns the axis count or -1. */
static int parse_mesh_axes(const char *s, char *names, int *sizes, int max, sb_error *err)
{
    const char *p = strchr(s, '|');
    if (!p)
        return sb_fail(err, SB_EXIT_INPUT, "layout '%s': no mesh '|axes|...'", s);
    p++;
    int n = 0;
    while (*p && *p != '|') {
        char name;
        int size, used = 0;
        if (sscanf(p, "%c=%d%n", &name, &size, &used) != 2 || size < 1 || n == max)
            return sb_fail(err, SB_EXIT_INPUT, "layout '%s': bad mesh axis at '%.20s'", s, p);
        names[n] = name;
        sizes[n++] = size;
        p += used;
        if (*p == ',')
            p++;
    }
    if (*p != '|')
        return sb_fail(err, SB_EXIT_INPUT, "layout '%s': unterminated mesh axes", s);
    return n;
}

static int axis_size(const char *names, const int *sizes, int n, char a)
{
    for (int i = 0; i < n; i++)
        if (names[i] == a)
            return sizes[i];
    return -1;
}

int sb_dtensor_layout_parse(const char *s, int *splits, int max, sb_error *err)
{
    static const char head[] = "sharding_specs:";
    if (strncmp(s, head, sizeof head - 1))
        return sb_fail(err, SB_EXIT_INPUT, "layout '%s': does not start with '%s'", s, head);
    const char *mesh = strstr(s, " mesh:");
    if (!mesh)
        return sb_fail(err, SB_EXIT_INPUT, "layout '%s': no ' mesh:'", s);
    char names[SB_MAX_DIMS];
    int sizes[SB_MAX_DIMS];
    int na = parse_mesh_axes(mesh, names, sizes, SB_MAX_DIMS, err);
    if (na < 0)
        return -1;
    const char *p = s + sizeof head - 1;
    int nd = 0;
    while (p < mesh) {
        const char *end = strchr(p, ',');
        if (!end || end > mesh)
            return sb_fail(err, SB_EXIT_INPUT, "layout '%s': sharding_specs not ended by ','", s);
        size_t len = (size_t)(end - p);
        if (nd == max)
            return sb_fail(err, SB_EXIT_INPUT, "layout '%s': more than %d dims", s, max);
        int split = 1;
        if (len == 9 && !strncmp(p, "unsharded", 9)) {
            split = 1;
        } else if (len == 1 || (len >= 3 && p[0] == '(' && p[len - 1] == ')')) {
            for (size_t k = len == 1 ? 0 : 1; k < (len == 1 ? 1 : len - 1); k += 2) {
                int sz = axis_size(names, sizes, na, p[k]);
                if (sz < 0 || (len > 1 && k + 1 < len - 1 && p[k + 1] != '*'))
                    return sb_fail(err, SB_EXIT_INPUT, "layout '%s': unknown mesh axis in '%.*s'", s,
                                   (int)len, p);
                split *= sz;
            }
        } else {
            return sb_fail(err, SB_EXIT_INPUT, "layout '%s': bad sharding spec '%.*s'", s, (int)len, p);
        }
        splits[nd++] = split;
        p = end + 1;
    }
    return nd;
}

int sb_mtf_rules_parse(const char *rules, const char *mesh, char (*names)[SB_NAME_MAX], int *splits,
                       int max, sb_error *err)
{
    char an[SB_MAX_DIMS][SB_NAME_MAX];
    int as[SB_MAX_DIMS], na = 0;
    const char *p = mesh;
    while (*p) {
        const char *colon = strchr(p, ':'), *end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        if (!colon || colon > end || na == SB_MAX_DIMS)
            return sb_fail(err, SB_EXIT_INPUT, "mesh shape '%s': expected NAME:SIZE;...", mesh);
        snprintf(an[na], SB_NAME_MAX, "%.*s", (int)(colon - p), p);
        char *num_end;
        errno = 0;
        long v = strtol(colon + 1, &num_end, 10);
        if (errno || num_end != end || v < 1 || v > 65536)
            return sb_fail(err, SB_EXIT_INPUT, "mesh shape '%s': bad size for '%s'", mesh, an[na]);
        as[na++] = (int)v;
        p = *end ? end + 1 : end;
    }
    int n = 0;
    p = rules;
    while (*p) {
        const char *colon = strchr(p, ':'), *end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        if (!colon || colon > end || n == max)
            return sb_fail(err, SB_EXIT_INPUT, "layout rules '%s': expected DIM:AXIS;...", rules);
        snprintf(names[n], SB_NAME_MAX, "%.*s", (int)(colon - p), p);
        char axis[SB_NAME_MAX];
        snprintf(axis, sizeof axis, "%.*s", (int)(end - colon - 1), colon + 1);
        splits[n] = -1;
        for (int a = 0; a < na; a++)
            if (!strcmp(an[a], axis))
                splits[n] = as[a];
        if (splits[n] < 0)
            return sb_fail(err, SB_EXIT_INPUT, "layout rules '%s': axis '%s' is not in mesh '%s'",
                           rules, axis, mesh);
        n++;
        p = *end ? end + 1 : end;
    }
    return n;
}

/* ---- programs: JSON and Python for JAX and PyTorch DTensor --------------------------- */

/* One device mesh of the program: the op's axes over all p devices, with a
 * leading replica axis "r" of p/q when the op runs on q < p devices (its
 * q shards then sit on devices 0..q-1, row-major, as the runtime places
 * them, and devices q..p-1 hold copies). -1 replicas: q does not divide p,
 * not expressible over one device set. */
typedef struct {
    int replicas, naxes;
    int size[SB_MAX_DIMS];
} prog_mesh;

static int prog_mesh_index(prog_mesh *ms, int *n, const op_mesh *mm, int p)
{
    prog_mesh pm = {0};
    pm.replicas = p % mm->q ? -1 : p / mm->q;
    pm.naxes = mm->naxes;
    memcpy(pm.size, mm->size, sizeof pm.size);
    if (pm.replicas < 0) /* everything replicated over one axis of p */
        pm.naxes = 0, memset(pm.size, 0, sizeof pm.size);
    for (int i = 0; i < *n; i++)
        if (!memcmp(&ms[i], &pm, sizeof pm))
            return i;
    ms[*n] = pm;
    return (*n)++;
}

static json_t *spec_json(const uint32_t *axes, int nd, int expressible)
{
    json_t *a = json_array();
    for (int j = 0; j < nd; j++) {
        if (!expressible || !axes[j]) {
            json_array_append_new(a, json_null());
        } else if (popcount(axes[j]) == 1) {
            char s[2] = {axis_name[__builtin_ctz(axes[j])], 0};
            json_array_append_new(a, json_string(s));
        } else {
            json_t *t = json_array();
            for (int k = 0; k < SB_MAX_DIMS; k++)
                if (axes[j] & (1u << k)) {
                    char s[2] = {axis_name[k], 0};
                    json_array_append_new(t, json_string(s));
                }
            json_array_append_new(a, t);
        }
    }
    return a;
}

/* PyTorch placements over the program mesh's axes ("r" first when present). */
static json_t *placements_json(const uint32_t *axes, int nd, const op_mesh *mm, int replicas)
{
    json_t *a = json_array();
    if (replicas < 0) {
        json_array_append_new(a, json_string("Replicate()"));
        return a;
    }
    if (replicas > 1)
        json_array_append_new(a, json_string("Replicate()"));
    for (int ax = 0; ax < mm->naxes; ax++) {
        int dim = -1;
        for (int j = 0; j < nd; j++)
            if (axes[j] & (1u << ax))
                dim = j;
        char s[32];
        if (dim >= 0)
            snprintf(s, sizeof s, "Shard(%d)", dim);
        else
            snprintf(s, sizeof s, "Replicate()");
        json_array_append_new(a, json_string(s));
    }
    if (json_array_size(a) == 0)
        json_array_append_new(a, json_string("Replicate()"));
    return a;
}

static json_t *int_array(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* Predicted communication of op i under config c, in words per device:
 * the vertex cost's part that scales with the FLOP-per-word ratio (latency
 * off), found from the cost at two peak rates. */
static double predicted_comm_words(const sb_problem *pb, const sb_op *op, const int *c)
{
    sb_cost_params a = pb->cp, b = pb->cp;
    a.latency_us = b.latency_us = 0;
    b.tflops = a.tflops * 2.0;
    double ka = sb_words_to_flops(&a, 1.0), kb = sb_words_to_flops(&b, 1.0);
    double w = (sb_op_cost(pb->m, op, c, &b) - sb_op_cost(pb->m, op, c, &a)) / (kb - ka);
    return w > 1e-9 ? w : 0.0;
}

static double fan_in_scale(const sb_op *op)
{
    double fan = 1;
    for (int i = 0; i < op->ndims; i++)
        if (op->role[i] == SB_ROLE_K)
            fan *= (double)op->dims[i].size;
    return 1.0 / sqrt(fan > 0 ? fan : 1);
}

static const char *const tensor_kind_word[] = {"activation", "input", "weight"};

static json_t *operand_json(const sb_model *m, const sb_op *op, const sb_operand *o,
                            const op_mesh *mm, int replicas, int torch)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    uint32_t axes[SB_MAX_DIMS];
    operand_axes(op, o, t->ndims, mm, axes);
    json_t *j = json_object();
    json_object_set_new(j, "tensor", json_string(t->name));
    json_object_set_new(j, "map", int_array(o->map, t->ndims));
    json_object_set_new(j, "spec", spec_json(axes, t->ndims, replicas > 0));
    if (torch)
        json_object_set_new(j, "placements", placements_json(axes, t->ndims, mm, replicas));
    return j;
}

/* A parallelize_module style for op i when it is one of the patterns
 * PyTorch names, else NULL: column/row-wise linear (dense, or a 2-D weight
 * einsum), sequence-parallel norm, vocab-parallel embedding. */
static const char *torch_style(const sb_model *m, const sb_op *op, const op_mesh *mm)
{
    if (mm->naxes != 1)
        return NULL;
    int d = mm->dim_of[0];
    const char *dn = op->dims[d].name;
    switch (op->kind) {
    case SB_OP_DENSE:
    case SB_OP_EINSUM: {
        int w2 = op->kind == SB_OP_DENSE;
        for (int k = 0; k < op->nin; k++)
            if (m->tensors[op->in[k].tensor].kind == SB_TENSOR_WEIGHT
                && m->tensors[op->in[k].tensor].ndims == 2)
                w2 = 1;
        if (!w2)
            return NULL;
        if (op->role[d] == SB_ROLE_N)
            return "ColwiseParallel()";
        if (op->role[d] == SB_ROLE_K)
            return "RowwiseParallel()";
        return NULL;
    }
    case SB_OP_NORM:
    case SB_OP_RMSNORM:
        return !op->batchnorm && (!strcmp(dn, "seq") || !strcmp(dn, "sequence"))
                   ? "SequenceParallel()"
                   : NULL;
    case SB_OP_EMBEDDING: return op->role[d] == SB_ROLE_K ? "RowwiseParallel()" : NULL;
    default: return NULL;
    }
}

/* tensors: name -> {kind, dims, shape, producer} */
static json_t *tensors_json(const sb_model *m)
{
    json_t *tensors = json_object();
    for (int t = 0; t < m->ntensors; t++) {
        const sb_tensor *ts = &m->tensors[t];
        json_t *j = json_object(), *dn = json_array(), *sh = json_array();
        for (int d = 0; d < ts->ndims; d++) {
            json_array_append_new(dn, json_string(ts->dims[d].name));
            json_array_append_new(sh, json_integer(ts->dims[d].size));
        }
        json_object_set_new(j, "kind", json_string(tensor_kind_word[ts->kind]));
        json_object_set_new(j, "dims", dn);
        json_object_set_new(j, "shape", sh);
        json_object_set_new(j, "producer",
                            ts->producer >= 0 ? json_string(m->ops[ts->producer].name) : json_null());
        json_object_set_new(tensors, ts->name, j);
    }
    return tensors;
}

/* What program_json gathers while it walks the ops. */
typedef struct {
    const sb_problem *pb;
    int torch;
    json_t *tensors, *weights, *acts, *notes, *plan;
    prog_mesh *ms;
    int nmesh;
} prog;

/* The op's attributes and dims: {name, kind, config, mesh, devices, dims, ...} */
static json_t *op_head_json(const sb_op *op, const int *c, const op_mesh *mm, int mi)
{
    json_t *j = json_object(), *dims = json_array();
    json_object_set_new(j, "name", json_string(op->name));
    json_object_set_new(j, "kind", json_string(sb_op_kind_name(op->kind)));
    json_object_set_new(j, "config", int_array(c, op->ndims));
    json_object_set_new(j, "mesh", json_integer(mi));
    json_object_set_new(j, "devices", json_integer(mm->q));
    for (int d = 0; d < op->ndims; d++) {
        json_t *dj = json_object();
        json_object_set_new(dj, "name", json_string(op->dims[d].name));
        json_object_set_new(dj, "size", json_integer(op->dims[d].size));
        json_object_set_new(dj, "role", json_integer(op->role[d]));
        json_object_set_new(dj, "axis",
                            mm->axis_of_dim[d] >= 0
                                ? json_string((char[2]){axis_name[mm->axis_of_dim[d]], 0})
                                : json_null());
        json_array_append_new(dims, dj);
    }
    json_object_set_new(j, "dims", dims);
    json_object_set_new(j, "pw", json_integer(op->pw));
    json_object_set_new(j, "axis", json_integer(op->axis));
    json_object_set_new(j, "kernel", int_array(op->kernel, 2));
    json_object_set_new(j, "stride", int_array(op->stride, 2));
    json_object_set_new(j, "pad", int_array(op->pad, 2));
    if (op->kind == SB_OP_CONV && (op->groups > 1 || op->dilation[0] > 1 || op->dilation[1] > 1)) {
        /* only where they are not the plain conv's, so plain programs read as before */
        json_object_set_new(j, "dilation", int_array(op->dilation, 2));
        json_object_set_new(j, "groups", json_integer(op->groups));
    }
    json_object_set_new(j, "batchnorm", json_integer(op->batchnorm));
    json_object_set_new(j, "pool_avg", json_integer(op->pool_avg));
    json_object_set_new(j, "perm", int_array(op->perm, op->kind == SB_OP_TRANSPOSE ? op->ndims : 0));
    /* softmax's causal mask: the iteration dim of the query index (null: none);
     * rope: the dim of the positions and the base of the angles */
    json_object_set_new(j, "causal", op->causal >= 0 ? json_integer(op->causal) : json_null());
    json_object_set_new(j, "seq", op->kind == SB_OP_ROPE ? json_integer(op->pos_axis) : json_null());
    json_object_set_new(j, "theta", op->kind == SB_OP_ROPE ? json_real(op->theta) : json_null());
    json_object_set_new(j, "fn", op->kind == SB_OP_ACT ? json_string(sb_act_fn_name(op->fn)) : json_null());
    json_object_set_new(j, "cap", op->kind == SB_OP_SOFTCAP ? json_real(op->cap) : json_null());
    json_object_set_new(j, "topk", json_integer(op->topk));
    json_object_set_new(j, "moe_aux", json_real(op->moe_aux));
    return j;
}

/* The op's inputs; a weight operand also goes into P->weights. */
static json_t *op_inputs_json(prog *P, const sb_op *op, const op_mesh *mm, int mi, int reps)
{
    const sb_model *m = P->pb->m;
    json_t *in = json_array();
    for (int k = 0; k < op->nin; k++) {
        const sb_tensor *t = &m->tensors[op->in[k].tensor];
        json_t *oj = operand_json(m, op, &op->in[k], mm, reps, P->torch);
        json_array_append_new(in, oj);
        char tb[2 * SB_NAME_MAX];
        const char *tied = tied_table(m, op->in[k].tensor, tb, sizeof tb);
        if (tied) /* not a weight of its own: the table, transposed */
            json_object_set_new(oj, "tied_to", json_string(tied));
        if (t->kind != SB_TENSOR_WEIGHT || tied)
            continue;
        json_t *w = json_object();
        json_object_set_new(w, "op", json_string(op->name));
        json_object_set_new(w, "mesh", json_integer(mi));
        json_object_set_new(w, "shape",
                            json_deep_copy(json_object_get(json_object_get(P->tensors, t->name), "shape")));
        json_object_set_new(w, "spec", json_deep_copy(json_object_get(oj, "spec")));
        if (P->torch)
            json_object_set_new(w, "placements", json_deep_copy(json_object_get(oj, "placements")));
        json_object_set_new(w, "init_scale", json_real(fan_in_scale(op)));
        json_object_set_new(w, "init_offset", json_real(0));
        json_object_set_new(P->weights, t->name, w);
    }
    return in;
}

/* The op's own weights (sb_op.weights), also put into P->weights. */
static json_t *op_weights_json(prog *P, const sb_op *op, const op_mesh *mm, int mi, int reps)
{
    json_t *ws = json_array();
    for (int w = 0; w < op->nweights; w++) {
        const sb_weight *wt = &op->weights[w];
        uint32_t axes[SB_MAX_DIMS];
        int sz[SB_MAX_DIMS];
        for (int d = 0; d < wt->ndims; d++) {
            int mp = wt->map[d];
            axes[d] = mp >= 0 && mm->axis_of_dim[mp] >= 0 ? 1u << mm->axis_of_dim[mp] : 0;
            sz[d] = (int)wt->size[d];
        }
        char name[2 * SB_NAME_MAX];
        snprintf(name, sizeof name, "%s%s", op->name, wt->suffix);
        json_t *wj = json_object();
        json_object_set_new(wj, "name", json_string(name));
        json_object_set_new(wj, "op", json_string(op->name));
        json_object_set_new(wj, "mesh", json_integer(mi));
        json_object_set_new(wj, "map", int_array(wt->map, wt->ndims));
        json_object_set_new(wj, "shape", int_array(sz, wt->ndims));
        json_object_set_new(wj, "spec", spec_json(axes, wt->ndims, reps > 0));
        if (P->torch)
            json_object_set_new(wj, "placements", placements_json(axes, wt->ndims, mm, reps));
        json_object_set_new(wj, "init_scale", json_real(wt->init_scale));
        json_object_set_new(wj, "init_offset", json_real(wt->init_offset));
        json_array_append_new(ws, json_deep_copy(wj));
        json_object_set_new(P->weights, name, wj);
    }
    return ws;
}

/* The op's outputs, also put into P->acts. */
static json_t *op_outputs_json(prog *P, const sb_op *op, const op_mesh *mm, int mi, int reps)
{
    const sb_model *m = P->pb->m;
    json_t *out = json_array();
    for (int k = 0; k < op->nout; k++) {
        json_t *oj = operand_json(m, op, &op->out[k], mm, reps, P->torch);
        json_t *a = json_object();
        json_object_set_new(a, "op", json_string(op->name));
        json_object_set_new(a, "mesh", json_integer(mi));
        json_object_set_new(a, "spec", json_deep_copy(json_object_get(oj, "spec")));
        if (P->torch)
            json_object_set_new(a, "placements", json_deep_copy(json_object_get(oj, "placements")));
        json_object_set_new(P->acts, m->tensors[op->out[k].tensor].name, a);
        json_array_append_new(out, oj);
    }
    return out;
}

/* One op: its head, operands and weights; notes and the torch plan. */
static json_t *op_json(prog *P, int i, const int *choice)
{
    const sb_problem *pb = P->pb;
    const sb_op *op = &pb->m->ops[i];
    const int *c = pb->cfg[i].c + (size_t)choice[i] * (size_t)op->ndims;
    op_mesh mm;
    mesh_of(op, c, &mm);
    int mi = prog_mesh_index(P->ms, &P->nmesh, &mm, pb->p);
    int reps = P->ms[mi].replicas;
    json_t *j = op_head_json(op, c, &mm, mi);
    json_object_set_new(j, "predicted_comm_words", json_real(predicted_comm_words(pb, op, c)));
    json_object_set_new(j, "in", op_inputs_json(P, op, &mm, mi, reps));
    json_object_set_new(j, "weights", op_weights_json(P, op, &mm, mi, reps));
    json_object_set_new(j, "out", op_outputs_json(P, op, &mm, mi, reps));
    if (reps < 0) {
        char s[512];
        snprintf(s, sizeof s,
                 "op %s runs on %d devices, which does not divide %d: its tensors are "
                 "exported replicated", op->name, mm.q, pb->p);
        json_array_append_new(P->notes, json_string(s));
    }
    const char *style = P->torch ? torch_style(pb->m, op, &mm) : NULL;
    if (style)
        json_object_set_new(P->plan, op->name, json_string(style));
    return j;
}

/* The one device mesh: p's prime factors, ascending, axes d0, d1, ... */
static int prime_factors(int p, int *fac)
{
    int nfac = 0;
    for (int v = p, d = 2; v > 1 && nfac < 32;)
        if (v % d == 0)
            fac[nfac++] = d, v /= d;
        else
            d++;
    if (!nfac)
        fac[nfac++] = 1;
    return nfac;
}

static json_t *global_mesh_json(const int *fac, int nfac)
{
    json_t *gm = json_object(), *gshape = json_array(), *gnames = json_array();
    for (int k = 0; k < nfac; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "d%d", k);
        json_array_append_new(gshape, json_integer(fac[k]));
        json_array_append_new(gnames, json_string(nm));
    }
    json_object_set_new(gm, "shape", gshape);
    json_object_set_new(gm, "axis_names", gnames);
    return gm;
}

/* A program mesh whose axis sizes are products of consecutive factors
 * (always so for p a power of 2) is the device mesh with axes merged: the
 * device axes of each of its axes; else NULL (it keeps its own Mesh). */
static json_t *global_axes_json(json_t *shape, const int *fac, int nfac)
{
    json_t *ga = json_array();
    int f = 0;
    for (size_t a = 0; a < json_array_size(shape) && ga; a++) {
        long want = (long)json_integer_value(json_array_get(shape, a)), got = 1;
        json_t *g = json_array();
        while (got < want && f < nfac) {
            got *= fac[f];
            char nm[16];
            snprintf(nm, sizeof nm, "d%d", f++);
            json_array_append_new(g, json_string(nm));
        }
        if (want == 1 && got == 1 && f < nfac && fac[f] == 1) /* p = 1 */
            json_array_append_new(g, json_string("d0")), f++;
        if (got != want) {
            json_decref(g);
            json_decref(ga);
            ga = NULL;
        } else {
            json_array_append_new(ga, g);
        }
    }
    if (ga && f != nfac && !(nfac == 1 && fac[0] == 1)) {
        json_decref(ga);
        ga = NULL;
    }
    return ga;
}

/* The program meshes, in the order the ops first used them. */
static json_t *meshes_json(prog *P, const int *fac, int nfac)
{
    int p = P->pb->p;
    json_t *meshes = json_array();
    for (int i = 0; i < P->nmesh; i++) {
        const prog_mesh *pm = &P->ms[i];
        json_t *mj = json_object(), *shape = json_array(), *names = json_array();
        if (pm->replicas != 1) {
            json_array_append_new(shape, json_integer(pm->replicas < 0 ? p : pm->replicas));
            json_array_append_new(names, json_string("r"));
        }
        for (int a = 0; a < pm->naxes; a++) {
            json_array_append_new(shape, json_integer(pm->size[a]));
            json_array_append_new(names, json_string((char[2]){axis_name[a], 0}));
        }
        if (!json_array_size(shape)) { /* one device: a 1-axis mesh of p = 1 */
            json_array_append_new(shape, json_integer(1));
            json_array_append_new(names, json_string("r"));
        }
        json_object_set_new(mj, "shape", shape);
        json_object_set_new(mj, "axis_names", names);
        json_t *ga = global_axes_json(shape, fac, nfac);
        json_object_set_new(mj, "global_axes", ga ? ga : json_null());
        if (!ga) {
            char s[256];
            snprintf(s, sizeof s,
                     "mesh %d is not the device mesh with axes merged: it keeps its own Mesh over "
                     "the same devices, and XLA reshards between the two", i);
            json_array_append_new(P->notes, json_string(s));
        }
        json_object_set_new(mj, "devices", json_integer(pm->replicas < 0 ? p : p / pm->replicas));
        json_object_set_new(mj, "replicas", json_integer(pm->replicas < 0 ? p : pm->replicas));
        json_array_append_new(meshes, mj);
        if (pm->replicas > 1) {
            char s[256];
            snprintf(s, sizeof s,
                     "mesh %d: the op runs on devices 0..%d only; here devices %d..%d hold copies "
                     "(axis 'r') and compute the same shards", i, p / pm->replicas - 1,
                     p / pm->replicas, p - 1);
            json_array_append_new(P->notes, json_string(s));
        }
    }
    return meshes;
}

/* One entry per edge whose layouts differ: the words a consumer receives. */
static json_t *relayouts_json(const sb_problem *pb, const int *choice)
{
    json_t *rel = json_array();
    for (int k = 0; k < pb->nedges; k++) {
        edge_view v;
        edge_view_of(pb, choice, k, &v);
        if (v.words <= 0)
            continue;
        json_t *r = json_object();
        json_object_set_new(r, "tensor", json_string(v.t->name));
        json_object_set_new(r, "from", json_string(v.a->name));
        json_object_set_new(r, "to", json_string(v.b->name));
        json_object_set_new(r, "from_layout", int_array(v.ls, v.t->ndims));
        json_object_set_new(r, "to_layout", int_array(v.ld, v.t->ndims));
        json_object_set_new(r, "predicted_words", json_real(v.words));
        json_array_append_new(rel, r);
    }
    return rel;
}

/* The whole program form (docs/export.md); NULL when out of memory. */
static json_t *program_json(const sb_problem *pb, const int *choice, int torch)
{
    const sb_model *m = pb->m;
    prog P = {.pb = pb, .torch = torch};
    P.ms = calloc((size_t)m->nops + 1, sizeof *P.ms);
    if (!P.ms)
        return NULL;
    json_t *root = json_object(), *ops = json_array();
    P.weights = json_object();
    P.acts = json_object();
    P.notes = json_array();
    P.plan = json_object();
    P.tensors = tensors_json(m);
    char params[4096];
    sb_params_str(m, params, sizeof params);
    json_object_set_new(root, "format", json_string(torch ? "shardbench-torch-1" : "shardbench-jax-1"));
    json_object_set_new(root, "model", json_string(m->name));
    json_object_set_new(root, "params", json_string(params));
    json_object_set_new(root, "p", json_integer(pb->p));
    json_object_set_new(root, "cost", json_real(sb_strategy_cost(pb, choice)));
    json_object_set_new(root, "word_bytes_runtime", json_integer(4));
    for (int i = 0; i < m->nops; i++)
        json_array_append_new(ops, op_json(&P, i, choice));
    int fac[32];
    int nfac = prime_factors(pb->p, fac);
    json_object_set_new(root, "global_mesh", global_mesh_json(fac, nfac));
    json_t *meshes = meshes_json(&P, fac, nfac);
    free(P.ms);
    json_object_set_new(root, "meshes", meshes);
    json_object_set_new(root, "tensors", P.tensors);
    json_object_set_new(root, "ops", ops);
    json_object_set_new(root, "weights", P.weights);
    json_object_set_new(root, "activations", P.acts);
    json_object_set_new(root, "relayouts", relayouts_json(pb, choice));
    if (torch)
        json_object_set_new(root, "parallelize_plan", P.plan);
    else
        json_decref(P.plan);
    json_object_set_new(root, "not_expressed", P.notes);
    return root;
}

static const char jax_template[] =
    "\"\"\"shardbench export for JAX (@HEAD@).\n"
    "\n"
    "Meshes over jax.devices()[:P], a NamedSharding per weight and per\n"
    "activation named by the model's tensor names, and constrain(), which\n"
    "applies jax.lax.with_sharding_constraint at an op boundary.\n"
    "\n"
    "Every op mesh reshapes the same P devices row-major. Where its axes are\n"
    "merges of consecutive axes of one device mesh (P's prime factors: always\n"
    "so for P a power of 2) its shardings are on that one mesh (device_mesh);\n"
    "else on its own Mesh over the same devices, and NOT_EXPRESSED says so.\n"
    "An op on q < P devices gets a leading axis 'r' of P/q: its shards sit on\n"
    "devices 0..q-1 as in shardbench, and the other devices hold copies (JAX\n"
    "runs every device in an SPMD program).\n"
    "Where a tensor's producer and consumer layouts differ, constraining it\n"
    "to the producer's sharding and then to the consumer's makes XLA reshard\n"
    "it there, explicitly. NOT_EXPRESSED lists what this file could not say.\n"
    "\"\"\"\n"
    "import json\n"
    "\n"
    "import numpy as np\n"
    "import jax\n"
    "from jax.sharding import Mesh, NamedSharding, PartitionSpec\n"
    "\n"
    "DATA = json.loads(r'''@JSON@''')\n"
    "P = DATA[\"p\"]\n"
    "OPS = {op[\"name\"]: op for op in DATA[\"ops\"]}\n"
    "NOT_EXPRESSED = DATA[\"not_expressed\"]\n"
    "_meshes = []\n"
    "_device_mesh = []\n"
    "\n"
    "\n"
    "def spec(s):\n"
    "    \"\"\"A PartitionSpec from the JSON form: None, \"x\" or [\"x\", \"y\"] per dim.\"\"\"\n"
    "    return PartitionSpec(*[tuple(a) if isinstance(a, list) else a for a in s])\n"
    "\n"
    "\n"
    "def meshes(devices=None):\n"
    "    \"\"\"One Mesh per distinct op mesh, over the first P devices.\"\"\"\n"
    "    if devices is not None or not _meshes:\n"
    "        devs = list(jax.devices() if devices is None else devices)\n"
    "        if len(devs) < P:\n"
    "            raise RuntimeError(\"this strategy needs %d devices, JAX has %d\" % (P, len(devs)))\n"
    "        flat = np.array(devs[:P], dtype=object)\n"
    "        _meshes[:] = [Mesh(flat.reshape(m[\"shape\"]), tuple(m[\"axis_names\"]))\n"
    "                      for m in DATA[\"meshes\"]]\n"
    "    return _meshes\n"
    "\n"
    "\n"
    "def device_mesh(devices=None):\n"
    "    \"\"\"The one device mesh: P's prime factors as axes d0, d1, ...\"\"\"\n"
    "    if devices is not None or not _device_mesh:\n"
    "        devs = list(jax.devices() if devices is None else devices)\n"
    "        if len(devs) < P:\n"
    "            raise RuntimeError(\"this strategy needs %d devices, JAX has %d\" % (P, len(devs)))\n"
    "        g = DATA[\"global_mesh\"]\n"
    "        _device_mesh[:] = [Mesh(np.array(devs[:P], dtype=object).reshape(g[\"shape\"]),\n"
    "                                tuple(g[\"axis_names\"]))]\n"
    "    return _device_mesh[0]\n"
    "\n"
    "\n"
    "def sharding(mesh, s):\n"
    "    \"\"\"NamedSharding of spec s on program mesh `mesh`: on the device mesh,\n"
    "    each axis replaced by the device axes it merges, where it is one;\n"
    "    else on the program mesh's own Mesh.\"\"\"\n"
    "    m = DATA[\"meshes\"][mesh]\n"
    "    if m[\"global_axes\"] is None:\n"
    "        return NamedSharding(meshes()[mesh], spec(s))\n"
    "    merged = dict(zip(m[\"axis_names\"], m[\"global_axes\"]))\n"
    "    out = []\n"
    "    for a in s:\n"
    "        axes = [] if a is None else a if isinstance(a, list) else [a]\n"
    "        g = tuple(d for x in axes for d in merged[x])\n"
    "        out.append(g if g else None)\n"
    "    return NamedSharding(device_mesh(), PartitionSpec(*out))\n"
    "\n"
    "\n"
    "def weight_shardings():\n"
    "    \"\"\"{weight name: NamedSharding} as its op holds it.\"\"\"\n"
    "    return {n: sharding(w[\"mesh\"], w[\"spec\"]) for n, w in DATA[\"weights\"].items()}\n"
    "\n"
    "\n"
    "def activation_shardings():\n"
    "    \"\"\"{tensor name: NamedSharding} of each op output as its producer makes it.\"\"\"\n"
    "    return {n: sharding(a[\"mesh\"], a[\"spec\"]) for n, a in DATA[\"activations\"].items()}\n"
    "\n"
    "\n"
    "def operand_sharding(op, role, k=0):\n"
    "    \"\"\"Sharding of op's input k (role \"in\") or output k (role \"out\").\"\"\"\n"
    "    o = OPS[op]\n"
    "    return sharding(o[\"mesh\"], o[role][k][\"spec\"])\n"
    "\n"
    "\n"
    "def constrain(x, op, role, k=0):\n"
    "    \"\"\"x constrained to op's layout of its input or output k.\"\"\"\n"
    "    return jax.lax.with_sharding_constraint(x, operand_sharding(op, role, k))\n";

static const char torch_template[] =
    "\"\"\"shardbench export for PyTorch DTensor, torch >= 2.4 (@HEAD@).\n"
    "\n"
    "Meshes (init_device_mesh over all P ranks), placements per weight and per\n"
    "activation named by the model's tensor names, distribute_weights() and a\n"
    "parallelize_module plan for the ops it recognises (column/row-wise\n"
    "linear, sequence-parallel norm, vocab-parallel embedding); the JSON in\n"
    "DATA says the rest. An op on q < P ranks gets a leading mesh axis 'r' of\n"
    "P/q: its shards sit on ranks 0..q-1 and the other ranks hold copies.\n"
    "The plan is keyed by op name: a module whose submodules carry the op\n"
    "names (get_submodule) takes it as it is. NOT_EXPRESSED lists what this\n"
    "file could not say.\n"
    "\"\"\"\n"
    "import json\n"
    "\n"
    "import torch\n"
    "from torch.distributed.device_mesh import init_device_mesh\n"
    "try:\n"
    "    from torch.distributed.tensor import Replicate, Shard, distribute_tensor\n"
    "except ImportError:  # torch 2.4: not public yet\n"
    "    from torch.distributed._tensor import Replicate, Shard, distribute_tensor\n"
    "from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,\n"
    "                                               SequenceParallel, parallelize_module)\n"
    "\n"
    "DATA = json.loads(r'''@JSON@''')\n"
    "P = DATA[\"p\"]\n"
    "OPS = {op[\"name\"]: op for op in DATA[\"ops\"]}\n"
    "NOT_EXPRESSED = DATA[\"not_expressed\"]\n"
    "PLAN = DATA[\"parallelize_plan\"]\n"
    "_STYLES = {\"ColwiseParallel()\": ColwiseParallel, \"RowwiseParallel()\": RowwiseParallel,\n"
    "           \"SequenceParallel()\": SequenceParallel}\n"
    "_meshes = []\n"
    "\n"
    "\n"
    "def placement(s):\n"
    "    return Replicate() if s == \"Replicate()\" else Shard(int(s[len(\"Shard(\"):-1]))\n"
    "\n"
    "\n"
    "def meshes(device_type=\"cuda\"):\n"
    "    if not _meshes:\n"
    "        _meshes[:] = [init_device_mesh(device_type, tuple(m[\"shape\"]),\n"
    "                                       mesh_dim_names=tuple(m[\"axis_names\"]))\n"
    "                      for m in DATA[\"meshes\"]]\n"
    "    return _meshes\n"
    "\n"
    "\n"
    "def weight_placements():\n"
    "    \"\"\"{weight name: (mesh index, [Placement per mesh axis])}\"\"\"\n"
    "    return {n: (w[\"mesh\"], [placement(s) for s in w[\"placements\"]])\n"
    "            for n, w in DATA[\"weights\"].items()}\n"
    "\n"
    "\n"
    "def activation_placements():\n"
    "    return {n: (a[\"mesh\"], [placement(s) for s in a[\"placements\"]])\n"
    "            for n, a in DATA[\"activations\"].items()}\n"
    "\n"
    "\n"
    "def distribute_weights(params, device_type=\"cuda\"):\n"
    "    \"\"\"{name: full torch.Tensor} -> {name: DTensor} laid out as exported.\"\"\"\n"
    "    ms = meshes(device_type)\n"
    "    out = {}\n"
    "    for n, (mi, pl) in weight_placements().items():\n"
    "        if n in params:\n"
    "            out[n] = distribute_tensor(params[n], ms[mi], pl)\n"
    "    return out\n"
    "\n"
    "\n"
    "def parallelize(module, device_type=\"cuda\"):\n"
    "    \"\"\"Applies PLAN to the submodules named like the ops.\"\"\"\n"
    "    ms = meshes(device_type)\n"
    "    for name, style in PLAN.items():\n"
    "        op = OPS[name]\n"
    "        axis = [d[\"axis\"] for d in op[\"dims\"] if d[\"axis\"]][0]\n"
    "        parallelize_module(module.get_submodule(name), ms[op[\"mesh\"]][axis], _STYLES[style]())\n"
    "    return module\n";

int sb_export_form_parse(const char *s, sb_export_form *out, sb_error *err)
{
    static const char *const names[] = {"text", "py", "json"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (sb_export_form)i;
            return 0;
        }
    return sb_fail(err, SB_EXIT_INPUT, "--format: '%s' is not text, py or json", s);
}

/* The template with @HEAD@ and @JSON@ filled in. In the Python literal
 * r'''...''' a quote is written \u0027 (JSON reads it back), so the text
 * cannot end the literal early. */
static int write_py(FILE *f, const char *tmpl, const char *head, const char *json)
{
    for (const char *t = tmpl; *t;) {
        if (!strncmp(t, "@HEAD@", 6)) {
            fputs(head, f);
            t += 6;
        } else if (!strncmp(t, "@JSON@", 6)) {
            for (const char *j = json; *j; j++)
                if (*j == '\'')
                    fputs("\\u0027", f);
                else
                    fputc(*j, f);
            t += 6;
        } else {
            fputc(*t++, f);
        }
    }
    fputc('\n', f);
    return 0;
}

int sb_strategy_export_as(FILE *f, const sb_problem *pb, const int *choice, sb_export_format fmt,
                          sb_export_form form, sb_error *err)
{
    if (form == SB_EXPORT_TEXT)
        return sb_strategy_export(f, pb, choice, fmt, err);
    if (fmt != SB_EXPORT_JAX && fmt != SB_EXPORT_TORCH)
        return sb_fail(err, SB_EXIT_INPUT, "--format py and json are for --to jax and torch");
    json_t *root = program_json(pb, choice, fmt == SB_EXPORT_TORCH);
    char *text = root ? json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(root);
    if (!text)
        return sb_fail(err, SB_EXIT_INTERNAL, "export: out of memory");
    if (form == SB_EXPORT_JSON) {
        fputs(text, f);
        fputc('\n', f);
    } else {
        char head[4400], params[4096];
        sb_params_str(pb->m, params, sizeof params);
        for (char *s = params; *s; s++) /* nothing that ends the docstring */
            if (*s == '"' || *s == '\\')
                *s = '_';
        snprintf(head, sizeof head, "model %.200s, params %s, p %d", pb->m->name, params, pb->p);
        for (char *s = head; *s; s++)
            if (*s == '"' || *s == '\\')
                *s = '_';
        write_py(f, fmt == SB_EXPORT_TORCH ? torch_template : jax_template, head, text);
    }
    free(text);
    if (ferror(f))
        return sb_fail(err, SB_EXIT_INTERNAL, "export: write failed: %s", strerror(errno));
    return 0;
}
