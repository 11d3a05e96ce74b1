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

/* Text sink with a running length (truncates at the end of buf). */
typedef struct {
    char *buf;
    size_t n, used;
} sink;

static void put(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sink *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (s->used < s->n) {
        int k = vsnprintf(s->buf + s->used, s->n - s->used, fmt, ap);
        if (k > 0)
            s->used += (size_t)k;
    }
    va_end(ap);
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
        char buf[4096];
        sink s = {buf, sizeof buf, 0};
        dtensor_mesh(&s, mm);
        fprintf(f, "  mesh %s\n", buf);
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

static const char *const role_word[] = {"in", "out", "weight"};

static void operand_line(FILE *f, const sb_model *m, const sb_op *op, const sb_operand *o, int role,
                         const op_mesh *mm, sb_export_format fmt)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    uint32_t axes[SB_MAX_DIMS];
    operand_axes(op, o, t->ndims, mm, axes);
    char buf[8192];
    sink s = {buf, sizeof buf, 0};
    layout_text(&s, fmt, mm, axes, t->ndims);
    if (role == 0 && t->kind == SB_TENSOR_WEIGHT)
        role = 2;
    fprintf(f, "  %-6s %s[", role_word[role], t->name);
    for (int j = 0; j < t->ndims; j++)
        fprintf(f, "%s%s=%lld", j ? "," : "", t->dims[j].name, (long long)t->dims[j].size);
    fprintf(f, "] %s\n", buf);
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
        char buf[8192];
        sink s = {buf, sizeof buf, 0};
        layout_text(&s, fmt, mm, axes, wt->ndims);
        fprintf(f, "] %s\n", buf);
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

static void relayouts(FILE *f, const sb_problem *pb, const int *choice)
{
    const sb_model *m = pb->m;
    int n = 0;
    for (int k = 0; k < pb->nedges; k++) {
        const sb_edge *e = &pb->edges[k];
        const sb_op *a = &m->ops[e->src], *b = &m->ops[e->dst];
        const int *ca = pb->cfg[e->src].c + (size_t)choice[e->src] * (size_t)a->ndims;
        const int *cb = pb->cfg[e->dst].c + (size_t)choice[e->dst] * (size_t)b->ndims;
        const sb_tensor *t = &m->tensors[e->tensor];
        int ls[SB_MAX_DIMS], ld[SB_MAX_DIMS];
        sb_operand_layout(a, &a->out[e->src_slot], t->ndims, ca, ls);
        sb_operand_layout(b, &b->in[e->dst_slot], t->ndims, cb, ld);
        op_mesh ma, mb;
        mesh_of(a, ca, &ma);
        mesh_of(b, cb, &mb);
        if (!memcmp(ls, ld, (size_t)t->ndims * sizeof(int)) && ma.q == mb.q)
            continue;
        char s1[256], s2[256];
        short_layout(s1, sizeof s1, ls, t->ndims, ma.q);
        short_layout(s2, sizeof s2, ld, t->ndims, mb.q);
        double words = sb_edge_cost(&pb->cp, t, ls, ld) / sb_words_to_flops(&pb->cp, 2.0);
        fprintf(f, "relayout %s: %s (%s) -> %s (%s); %.6g words per device received\n", t->name,
                a->name, s1, b->name, s2, words);
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
