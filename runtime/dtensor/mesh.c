/* mesh.c: DTensor-style meshes and layouts (parse, print, validate), the
 * conversion between a layout on a mesh and every rank's box, a barrier on
 * a mesh and the debug log. Not here: checkpoints (checkpoint.c), datasets
 * (dataset.c). String forms follow TF DTensor:
 *   mesh    `name|x=2,y=4|0,1,...,7|0,1,...,7[|device names]`
 *   layout  `sharding_specs:x,unsharded, mesh:<mesh>` */
#define _GNU_SOURCE
#include "shardbench/dtensor.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- debug log -------------------------------------------------------------- */

int sb_debug_enabled(void)
{
    const char *v = getenv("SHARDBENCH_LOG");
    return v && !strcmp(v, "debug");
}

void sb_debug(const char *fmt, ...)
{
    if (!sb_debug_enabled())
        return;
    int rank = -1, init = 0;
    MPI_Initialized(&init);
    if (init)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[shardbench rank %d] %s\n", rank, line);
}

/* ---- mesh ------------------------------------------------------------------ */

static int valid_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return 0;
    return 1;
}

int sb_mesh_axis(const sb_mesh *m, const char *axis)
{
    for (int a = 0; a < m->naxes; a++)
        if (!strcmp(m->axis[a], axis))
            return a;
    return -1;
}

/* Adds axis `name` of size `size`, checking the name and duplicates. */
static int mesh_add_axis(sb_mesh *m, const char *name, long size, sb_error *err)
{
    if (m->naxes == SB_MESH_MAX_AXES)
        return sb_fail(err, SB_EXIT_INPUT, "mesh: more than %d axes", SB_MESH_MAX_AXES);
    if (!valid_name(name) || strlen(name) >= SB_MESH_NAME_MAX || !strcmp(name, SB_UNSHARDED))
        return sb_fail(err, SB_EXIT_INPUT, "mesh: '%s' is not a valid axis name", name);
    if (sb_mesh_axis(m, name) >= 0)
        return sb_fail(err, SB_EXIT_INPUT, "mesh: axis '%s' is named twice", name);
    if (size < 1 || size > SB_MESH_MAX_DEVICES)
        return sb_fail(err, SB_EXIT_INPUT, "mesh: axis '%s' has size %ld (must be 1..%d)", name,
                       size, SB_MESH_MAX_DEVICES);
    snprintf(m->axis[m->naxes], SB_MESH_NAME_MAX, "%s", name);
    m->size[m->naxes++] = (int)size;
    return 0;
}

static int mesh_finish(sb_mesh *m, sb_error *err)
{
    long n = 1;
    for (int a = 0; a < m->naxes; a++) {
        n *= m->size[a];
        if (n > SB_MESH_MAX_DEVICES)
            return sb_fail(err, SB_EXIT_INPUT, "mesh: more than %d devices", SB_MESH_MAX_DEVICES);
    }
    m->ndevices = (int)n;
    return 0;
}

int sb_mesh_make(const char *name, int naxes, const char *const *axes, const int *sizes,
                 sb_mesh *m, sb_error *err)
{
    memset(m, 0, sizeof *m);
    if (name && (strlen(name) >= SB_MESH_NAME_MAX || strchr(name, '|')))
        return sb_fail(err, SB_EXIT_INPUT, "mesh: name '%s' is too long or has '|'", name);
    snprintf(m->name, sizeof m->name, "%s", name ? name : "");
    for (int a = 0; a < naxes; a++)
        if (mesh_add_axis(m, axes[a], sizes[a], err))
            return -1;
    if (mesh_finish(m, err))
        return -1;
    for (int k = 0; k < m->ndevices; k++)
        m->device[k] = k;
    return 0;
}

/* Splits s at '|' into at most nmax fields (copies into buf). */
static int split_fields(char *buf, char **f, int nmax)
{
    int n = 0;
    char *p = buf;
    f[n++] = p;
    for (; *p; p++)
        if (*p == '|') {
            *p = 0;
            if (n == nmax)
                return -1;
            f[n++] = p + 1;
        }
    return n;
}

static int parse_axes(sb_mesh *m, char *s, sb_error *err)
{
    if (!*s)
        return 0; /* a mesh with no axes: one device */
    char *save = NULL;
    for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return sb_fail(err, SB_EXIT_INPUT, "mesh: axis '%s' has no '=SIZE'", tok);
        *eq = 0;
        char *end;
        long v = strtol(eq + 1, &end, 10);
        if (*end || end == eq + 1)
            return sb_fail(err, SB_EXIT_INPUT, "mesh: axis '%s': size '%s' is not a number", tok,
                           eq + 1);
        if (mesh_add_axis(m, tok, v, err))
            return -1;
    }
    return 0;
}

static int parse_ids(const sb_mesh *m, char *s, int *ids, const char *what, sb_error *err)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || end == tok || v < 0 || v >= (1L << 30))
            return sb_fail(err, SB_EXIT_INPUT, "mesh: %s device id '%s' is not a number >= 0",
                           what, tok);
        if (n == m->ndevices)
            return sb_fail(err, SB_EXIT_INPUT, "mesh: more %s device ids than the %d devices "
                           "of the axes", what, m->ndevices);
        for (int k = 0; k < n; k++)
            if (ids[k] == v)
                return sb_fail(err, SB_EXIT_INPUT, "mesh: %s device id %ld is used twice", what, v);
        ids[n++] = (int)v;
    }
    if (n != m->ndevices)
        return sb_fail(err, SB_EXIT_INPUT, "mesh: %d %s device ids for %d devices of the axes", n,
                       what, m->ndevices);
    return 0;
}

int sb_mesh_parse(const char *s, sb_mesh *m, sb_error *err)
{
    memset(m, 0, sizeof *m);
    size_t len = strlen(s);
    char *buf = sb_malloc(len + 1, err);
    if (!buf)
        return -1;
    memcpy(buf, s, len + 1);
    char *f[6];
    int nf = split_fields(buf, f, 6), rc = -1;
    if (nf < 3) {
        sb_fail(err, SB_EXIT_INPUT, "mesh '%s': expected 'name|axis=size,...|device ids|...'", s);
        goto out;
    }
    if (strlen(f[0]) >= SB_MESH_NAME_MAX || (*f[0] && !valid_name(f[0]))) {
        sb_fail(err, SB_EXIT_INPUT, "mesh '%s': '%s' is not a valid mesh name", s, f[0]);
        goto out;
    }
    snprintf(m->name, sizeof m->name, "%s", f[0]);
    if (parse_axes(m, f[1], err) || mesh_finish(m, err)
        || parse_ids(m, f[2], m->device, "global", err))
        goto out;
    if (nf >= 4 && *f[3]) {
        /* local ids: a subset of the global ones (this process's devices) */
        char *save = NULL;
        for (char *tok = strtok_r(f[3], ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *end;
            long v = strtol(tok, &end, 10);
            int found = 0;
            for (int k = 0; !*end && k < m->ndevices; k++)
                found |= m->device[k] == v;
            if (!found) {
                sb_fail(err, SB_EXIT_INPUT, "mesh: local device id '%s' is not a global id", tok);
                goto out;
            }
        }
    }
    rc = 0;
out:
    if (rc && err && strncmp(err->msg, "mesh '", 6)) {
        char tmp[sizeof err->msg];
        snprintf(tmp, sizeof tmp, "%s", err->msg);
        snprintf(err->msg, sizeof err->msg, "mesh '%.200s': %.700s", s, tmp + 6);
    }
    free(buf);
    return rc;
}

/* appends to buf at *pos, tracking the length needed */
static void put(char *buf, size_t cap, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*pos < cap ? buf + *pos : NULL, *pos < cap ? cap - *pos : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *pos += (size_t)n;
}

static void mesh_put(const sb_mesh *m, char *buf, size_t cap, size_t *pos)
{
    put(buf, cap, pos, "%s|", m->name);
    for (int a = 0; a < m->naxes; a++)
        put(buf, cap, pos, "%s%s=%d", a ? "," : "", m->axis[a], m->size[a]);
    for (int pass = 0; pass < 2; pass++) {
        put(buf, cap, pos, "|");
        for (int k = 0; k < m->ndevices; k++)
            put(buf, cap, pos, "%s%d", k ? "," : "", m->device[k]);
    }
}

int sb_mesh_str(const sb_mesh *m, char *buf, size_t cap)
{
    size_t pos = 0;
    if (cap)
        buf[0] = 0;
    mesh_put(m, buf, cap, &pos);
    return (int)pos;
}

int sb_mesh_coords(const sb_mesh *m, int rank, int *coords)
{
    for (int k = 0; k < m->ndevices; k++) {
        if (m->device[k] != rank)
            continue;
        for (int a = m->naxes - 1; a >= 0; a--) {
            coords[a] = k % m->size[a];
            k /= m->size[a];
        }
        return 1;
    }
    return 0;
}

/* ---- layout ------------------------------------------------------------------ */

static int layout_set(sb_layout *l, int d, const char *spec, sb_error *err)
{
    if (d == SB_BOX_MAX_DIMS)
        return sb_fail(err, SB_EXIT_INPUT, "layout: more than %d dims", SB_BOX_MAX_DIMS);
    if (!strcmp(spec, SB_UNSHARDED)) {
        l->axis[d] = -1;
        return 0;
    }
    int a = sb_mesh_axis(&l->mesh, spec);
    if (a < 0)
        return sb_fail(err, SB_EXIT_INPUT, "layout: dim %d is sharded over '%s', which is not "
                       "an axis of mesh '%s'", d, spec, l->mesh.name);
    for (int e = 0; e < d; e++)
        if (l->axis[e] == a)
            return sb_fail(err, SB_EXIT_INPUT, "layout: mesh axis '%s' is used twice (dims %d "
                           "and %d)", spec, e, d);
    l->axis[d] = a;
    return 0;
}

int sb_layout_make(const sb_mesh *m, int nd, const char *const *specs, sb_layout *l,
                   sb_error *err)
{
    memset(l, 0, sizeof *l);
    l->mesh = *m;
    for (int d = 0; d < nd; d++)
        if (layout_set(l, d, specs[d], err))
            return -1;
    l->nd = nd;
    return 0;
}

int sb_layout_parse(const char *s, sb_layout *l, sb_error *err)
{
    static const char head[] = "sharding_specs:", sep[] = " mesh:";
    memset(l, 0, sizeof *l);
    if (strncmp(s, head, sizeof head - 1))
        return sb_fail(err, SB_EXIT_INPUT, "layout '%.200s': does not start with '%s'", s, head);
    const char *specs = s + sizeof head - 1, *ms = strstr(specs, sep);
    if (!ms)
        return sb_fail(err, SB_EXIT_INPUT, "layout '%.200s': no '%s' part", s, sep + 1);
    if (sb_mesh_parse(ms + sizeof sep - 1, &l->mesh, err))
        return -1;
    /* specs: "x,unsharded," (the list ends with a comma before " mesh:") */
    size_t n = (size_t)(ms - specs);
    char buf[1024];
    if (n >= sizeof buf)
        return sb_fail(err, SB_EXIT_INPUT, "layout '%.200s': sharding specs too long", s);
    memcpy(buf, specs, n);
    buf[n] = 0;
    int d = 0;
    char *p = buf;
    while (*p) {
        char *c = strchr(p, ',');
        if (!c)
            return sb_fail(err, SB_EXIT_INPUT, "layout '%.200s': spec '%s' is not followed by ','",
                           s, p);
        *c = 0;
        if (!*p)
            return sb_fail(err, SB_EXIT_INPUT, "layout '%.200s': empty sharding spec", s);
        if (layout_set(l, d, p, err))
            return -1;
        d++;
        p = c + 1;
    }
    l->nd = d;
    return 0;
}

int sb_layout_str(const sb_layout *l, char *buf, size_t cap)
{
    size_t pos = 0;
    if (cap)
        buf[0] = 0;
    put(buf, cap, &pos, "sharding_specs:");
    for (int d = 0; d < l->nd; d++)
        put(buf, cap, &pos, "%s,", l->axis[d] < 0 ? SB_UNSHARDED : l->mesh.axis[l->axis[d]]);
    put(buf, cap, &pos, " mesh:");
    mesh_put(&l->mesh, buf, cap, &pos);
    return (int)pos;
}

int sb_layout_boxes(const sb_layout *l, const int64_t *shape, int nranks, sb_box *boxes,
                    sb_error *err)
{
    const sb_mesh *m = &l->mesh;
    for (int d = 0; d < l->nd; d++) {
        if (shape[d] < 0)
            return sb_fail(err, SB_EXIT_INPUT, "layout: dim %d has size %lld", d,
                           (long long)shape[d]);
        if (l->axis[d] >= 0 && shape[d] % m->size[l->axis[d]])
            return sb_fail(err, SB_EXIT_INPUT, "layout: dim %d of size %lld is sharded over "
                           "mesh axis '%s' of size %d, which does not divide it", d,
                           (long long)shape[d], m->axis[l->axis[d]], m->size[l->axis[d]]);
    }
    for (int k = 0; k < m->ndevices; k++)
        if (m->device[k] >= nranks)
            return sb_fail(err, SB_EXIT_INPUT, "layout: mesh device %d is not one of the %d ranks",
                           m->device[k], nranks);
    for (int r = 0; r < nranks; r++) {
        int g[SB_MESH_MAX_AXES];
        sb_box *b = &boxes[r];
        memset(b, 0, sizeof *b);
        if (!sb_mesh_coords(m, r, g))
            continue;
        b->nd = l->nd;
        for (int d = 0; d < l->nd; d++) {
            int a = l->axis[d];
            int64_t n = a < 0 ? 1 : m->size[a], c = a < 0 ? 0 : g[a], len = shape[d] / n;
            b->lo[d] = c * len;
            b->hi[d] = (c + 1) * len;
        }
    }
    return 0;
}

/* ---- boxes -> layout --------------------------------------------------------- */

/* shard index tuple of a box: lo / extent per dim */
static void shard_index(const sb_box *b, int nd, int64_t *s)
{
    for (int d = 0; d < nd; d++)
        s[d] = b->lo[d] / (b->hi[d] - b->lo[d]);
}

/* Peels mesh axes from the fastest: at stride S, the dim whose shard index
 * moves between holder positions 0 and S is the next axis (none: a replica
 * axis), and its size is how many steps of S it keeps moving alone. */
static int peel_axes(int nd, const sb_box *hold, int q, sb_mesh *m, int *dim_of_axis,
                     sb_error *err)
{
    int rev_dim[SB_MESH_MAX_AXES], n = 0, nrep = 0;
    int64_t stride = 1;
    while (stride < q) {
        if (n == SB_MESH_MAX_AXES)
            return sb_fail(err, SB_EXIT_INPUT, "boxes need more than %d mesh axes",
                           SB_MESH_MAX_AXES);
        int64_t s0[SB_BOX_MAX_DIMS], s1[SB_BOX_MAX_DIMS];
        shard_index(&hold[0], nd, s0);
        shard_index(&hold[stride], nd, s1);
        int dim = -1;
        for (int d = 0; d < nd; d++)
            if (s1[d] != s0[d])
                dim = d;
        int64_t size = 1;
        while (stride * (size + 1) <= q) {
            int64_t si[SB_BOX_MAX_DIMS];
            shard_index(&hold[stride * size], nd, si);
            int ok = 1;
            for (int d = 0; d < nd; d++)
                ok &= d == dim ? si[d] == size : si[d] == s0[d];
            if (!ok)
                break;
            size++;
        }
        if (size == 1 || q % (stride * size))
            return sb_fail(err, SB_EXIT_INPUT, "boxes are not an even grid over the ranks");
        rev_dim[n++] = dim;
        m->size[SB_MESH_MAX_AXES - n] = (int)size;
        if (dim < 0)
            nrep++;
        stride *= size;
    }
    /* axes were found fastest first: reverse them */
    m->naxes = n;
    for (int a = 0; a < n; a++) {
        m->size[a] = m->size[SB_MESH_MAX_AXES - n + a];
        dim_of_axis[a] = rev_dim[n - 1 - a];
    }
    int r = nrep;
    for (int a = n - 1; a >= 0; a--) {
        if (dim_of_axis[a] < 0)
            snprintf(m->axis[a], SB_MESH_NAME_MAX, "r%d", --r);
        else
            snprintf(m->axis[a], SB_MESH_NAME_MAX, "d%d", dim_of_axis[a]);
    }
    return 0;
}

int sb_layout_from_boxes(int nd, const int64_t *shape, int nranks, const sb_box *boxes,
                         sb_layout *l, sb_error *err)
{
    memset(l, 0, sizeof *l);
    sb_box *hold = sb_calloc((size_t)(nranks ? nranks : 1), sizeof *hold, err);
    if (!hold)
        return -1;
    int q = 0, rc = -1;
    for (int r = 0; r < nranks; r++) {
        if (!boxes[r].nd)
            continue;
        for (int d = 0; d < nd; d++) {
            int64_t e = boxes[r].hi[d] - boxes[r].lo[d];
            if (boxes[r].nd != nd || e <= 0 || shape[d] % e || boxes[r].lo[d] % e) {
                sb_fail(err, SB_EXIT_INPUT, "rank %d's box is not a shard of an even grid", r);
                goto out;
            }
        }
        l->mesh.device[q] = r;
        hold[q++] = boxes[r];
    }
    if (q == 0) {
        sb_fail(err, SB_EXIT_INPUT, "no rank holds the tensor");
        goto out;
    }
    int dim_of_axis[SB_MESH_MAX_AXES];
    if (peel_axes(nd, hold, q, &l->mesh, dim_of_axis, err))
        goto out;
    l->mesh.ndevices = q;
    l->nd = nd;
    for (int d = 0; d < nd; d++)
        l->axis[d] = -1;
    for (int a = 0; a < l->mesh.naxes; a++)
        if (dim_of_axis[a] >= 0) {
            if (l->axis[dim_of_axis[a]] >= 0) {
                sb_fail(err, SB_EXIT_INPUT, "dim %d is split over two mesh axes", dim_of_axis[a]);
                goto out;
            }
            l->axis[dim_of_axis[a]] = a;
        }
    /* verify: the layout must give back exactly the boxes */
    sb_box *check = sb_calloc((size_t)nranks, sizeof *check, err);
    if (!check)
        goto out;
    rc = sb_layout_boxes(l, shape, nranks, check, err);
    for (int r = 0; !rc && r < nranks; r++)
        if (!sb_box_equal(&check[r], &boxes[r]) && (check[r].nd || boxes[r].nd))
            rc = sb_fail(err, SB_EXIT_INPUT, "boxes are not a layout on a mesh (rank %d)", r);
    free(check);
out:
    free(hold);
    return rc;
}

/* ---- barrier ------------------------------------------------------------------ */

int sb_barrier(MPI_Comm comm, const sb_mesh *m, const char *name, void (*sync)(void),
               sb_error *err)
{
    int size = 0;
    MPI_Comm_size(comm, &size);
    sb_debug("barrier '%s': enter (%d participants, mesh '%s' of %d devices)", name, size,
             m->name, m->ndevices);
    if (sync)
        sync();
    if (size != m->ndevices)
        return sb_fail(err, SB_EXIT_INPUT, "barrier '%s': %d participants, but mesh '%s' has %d "
                       "devices", name, size, m->name, m->ndevices);
    if (MPI_Barrier(comm) != MPI_SUCCESS)
        return sb_fail(err, SB_EXIT_INTERNAL, "barrier '%s': MPI_Barrier failed", name);
    sb_debug("barrier '%s': exit", name);
    return 0;
}
