/* checkpoint.c: sharded checkpoints of an executor's weights (with its
 * step count) and the step folders of `run --checkpoint`. The format and
 * the collective save and restore: ckpt_format.c, ckpt_save.c,
 * ckpt_restore.c (runtime/README.md). Not here: other dtypes than f32,
 * async saves. */
#define _GNU_SOURCE
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/runtime.h"

/* ---- the executor's state: its weights, and Adam's two moments of each ------------------- */

/* Tensor i of the state is part i / nw (0: the weight, 1 and 2: Adam's m
 * and v, named "W#adam_m", "W#adam_v") of weight i % nw; a moment has its
 * weight's shape and boxes. */
typedef struct {
    int n, nw;
    char (*names)[SB_NAME_MAX + 16];
    int *nd;
    int64_t (*shape)[SB_BOX_MAX_DIMS];
    sb_box *boxes;   /* n * nranks */
    float **data;
} ex_weights;

static void exw_free(ex_weights *w)
{
    for (int i = 0; w->data && i < w->n; i++)
        free(w->data[i]);
    free(w->data);
    free(w->names);
    free(w->nd);
    free(w->shape);
    free(w->boxes);
}

static int exw_read(sb_executor *ex, const ex_weights *w, int i, sb_error *err)
{
    return sb_executor_state_read(ex, i % w->nw, i / w->nw, w->data[i], err);
}

static int exw_write(sb_executor *ex, const ex_weights *w, int i, sb_error *err)
{
    return sb_executor_state_write(ex, i % w->nw, i / w->nw, w->data[i], err);
}

/* Names, shapes, every rank's boxes and this rank's shards (read when
 * `read`) of every tensor of the state. */
static int exw_get(sb_executor *ex, ex_weights *w, int read, sb_error *err)
{
    int size;
    MPI_Comm_size(sb_executor_comm(ex), &size);
    memset(w, 0, sizeof *w);
    w->nw = sb_executor_nweights(ex);
    w->n = w->nw * (sb_executor_update(ex) == SB_UPDATE_ADAM ? 3 : 1);
    w->names = sb_calloc((size_t)w->n + 1, sizeof *w->names, err);
    w->nd = sb_calloc((size_t)w->n + 1, sizeof *w->nd, err);
    w->shape = sb_calloc((size_t)w->n + 1, sizeof *w->shape, err);
    w->boxes = sb_calloc((size_t)w->n * (size_t)size + 1, sizeof *w->boxes, err);
    w->data = sb_calloc((size_t)w->n + 1, sizeof *w->data, err);
    if (!w->names || !w->nd || !w->shape || !w->boxes || !w->data)
        return -1;
    static const char *const suffix[3] = {"", "#adam_m", "#adam_v"};
    for (int i = 0; i < w->n; i++) {
        int p = i % w->nw;
        snprintf(w->names[i], sizeof w->names[i], "%s%s", sb_executor_weight_name(ex, p, NULL),
                 suffix[i / w->nw]);
        w->nd[i] = sb_executor_weight_shape(ex, p, w->shape[i]);
        sb_executor_weight_boxes(ex, p, &w->boxes[(size_t)i * (size_t)size]);
        sb_box b;
        sb_executor_weight_box(ex, p, &b);
        int64_t v = b.nd ? sb_box_volume(&b) : 0;
        if (!(w->data[i] = sb_malloc((size_t)v * sizeof(float), err)))
            return -1;
        if (read && v && exw_read(ex, w, i, err))
            return -1;
    }
    return 0;
}

int sb_checkpoint_save_executor(sb_executor *ex, const char *prefix, sb_error *err)
{
    MPI_Comm comm = sb_executor_comm(ex);
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    /* the step's queued work is complete on every rank before any read */
    sb_mesh m;
    const char *axes[1] = {"ranks"};
    if (sb_mesh_make("executor", 1, axes, &size, &m, err)
        || sb_barrier(comm, &m, "checkpoint: save", sb_executor_backend(ex)->sync, err))
        return -1;
    ex_weights w;
    int rc = exw_get(ex, &w, 1, err);
    sb_ckpt_tensor *t = rc ? NULL : sb_calloc((size_t)w.n + 1, sizeof *t, err);
    if (sb_agree(comm, rc || !t ? -1 : 0, err, NULL)) {
        free(t);
        exw_free(&w);
        return -1;
    }
    for (int i = 0; i < w.n; i++) {
        t[i].name = w.names[i];
        t[i].nd = w.nd[i];
        t[i].shape = w.shape[i];
        t[i].boxes = &w.boxes[(size_t)i * (size_t)size];
        t[i].data = w.data[i];
    }
    sb_ckpt_save_opts o = {.step = sb_executor_steps_done(ex)};
    rc = sb_checkpoint_save(comm, prefix, t, w.n, &o, err);
    free(t);
    exw_free(&w);
    return rc;
}

/* A list of names in a message: the first few, then a count. */
typedef struct {
    int n;
    char text[400];
} name_list;

static void names_add(name_list *l, const char *fmt, const char *name, const char *extra)
{
    size_t k = strlen(l->text);
    if (++l->n <= 4)
        snprintf(l->text + k, sizeof l->text - k, fmt, l->n == 1 ? "" : *extra ? "; " : ", ",
                 name, extra);
    else if (l->n == 5)
        snprintf(l->text + k, sizeof l->text - k, "%s...", *extra ? "; " : ", ");
}

static void shape_text(int nd, const int64_t *s, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "(");
    for (int d = 0; d < nd && k < cap; d++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (k < cap)
        snprintf(out + k, cap - k, ")");
}

/* Accounts for every tensor of the checkpoint and every tensor of the
 * executor's state (local; the same verdict on every rank that reads the
 * same index): keep[i] says whether state tensor i is in the checkpoint with
 * its shape; *what describes every difference ("" when none). */
static int match_index(const char *prefix, const ex_weights *w, int *keep, char *what, size_t cap,
                       sb_error *err)
{
    ck_index x;
    if (ck_index_load(prefix, &x, err)) {
        ck_index_free(&x);
        return -1;
    }
    name_list extra = {0}, missing = {0}, shape = {0};
    for (int i = 0; i < w->n; i++) {
        const char *name = w->names[i];
        int nd = w->nd[i];
        const ck_tensor *t = NULL;
        for (int k = 0; k < x.ntensors && !t; k++)
            if (!strcmp(x.t[k].name, name))
                t = &x.t[k];
        int same = t && t->nd == nd;
        for (int d = 0; same && d < nd; d++)
            same = t->shape[d] == w->shape[i][d];
        keep[i] = same;
        if (!t) {
            names_add(&missing, "%s'%s'%s", name, "");
        } else if (!same) {
            char a[128], b[128], both[300];
            shape_text(t->nd, t->shape, a, sizeof a);
            shape_text(nd, w->shape[i], b, sizeof b);
            snprintf(both, sizeof both, " is %s in the checkpoint, %s in the model", a, b);
            names_add(&shape, "%s'%s'%s", name, both);
        }
    }
    for (int k = 0; k < x.ntensors; k++) {
        int found = 0;
        for (int i = 0; i < w->n && !found; i++)
            found = !strcmp(x.t[k].name, w->names[i]);
        if (!found)
            names_add(&extra, "%s'%s'%s", x.t[k].name, "");
    }
    ck_index_free(&x);
    size_t n = 0;
    what[0] = 0;
    if (extra.n)
        n += (size_t)snprintf(what + n, cap - n, "%d tensor%s of the checkpoint not in the model "
                              "(%s)", extra.n, extra.n == 1 ? "" : "s", extra.text);
    if (missing.n && n < cap)
        n += (size_t)snprintf(what + n, cap - n, "%s%d weight%s of the model not in the "
                              "checkpoint (%s)", n ? "; " : "", missing.n,
                              missing.n == 1 ? "" : "s", missing.text);
    if (shape.n && n < cap)
        snprintf(what + n, cap - n, "%s%d shape mismatch%s (%s)", n ? "; " : "", shape.n,
                 shape.n == 1 ? "" : "es", shape.text);
    return 0;
}

int sb_checkpoint_restore_executor(sb_executor *ex, const char *prefix, sb_error *err)
{
    return sb_checkpoint_restore_executor_ex(ex, prefix, 0, NULL, 0, err);
}

int sb_checkpoint_restore_executor_ex(sb_executor *ex, const char *prefix, int partial,
                                      char *skipped, size_t cap, sb_error *err)
{
    MPI_Comm comm = sb_executor_comm(ex);
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    if (skipped && cap)
        skipped[0] = 0;
    ex_weights w;
    char what[900] = "";
    int rc = exw_get(ex, &w, 0, err);
    sb_ckpt_target *g = rc ? NULL : sb_calloc((size_t)w.n + 1, sizeof *g, err);
    int *keep = rc ? NULL : sb_calloc((size_t)w.n + 1, sizeof *keep, err), *which = NULL;
    if (!rc && (!g || !keep || !(which = sb_calloc((size_t)w.n + 1, sizeof *which, err))))
        rc = -1;
    if (!rc)
        rc = match_index(prefix, &w, keep, what, sizeof what, err);
    if (!rc && what[0] && !partial)
        rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint '%s' does not match the model: %s "
                     "(--restore-partial restores only the weights both hold)", prefix, what);
    if (sb_agree(comm, rc, err, NULL)) {
        free(g);
        free(keep);
        free(which);
        exw_free(&w);
        return -1;
    }
    int ng = 0;
    for (int i = 0; i < w.n; i++) {
        if (!keep[i])
            continue;
        which[ng] = i;
        g[ng].name = w.names[i];
        g[ng].nd = w.nd[i];
        g[ng].shape = w.shape[i];
        g[ng].box = w.boxes[(size_t)i * (size_t)size + (size_t)rank];
        g[ng].data = w.data[i];
        ng++;
    }
    int64_t step = 0;
    /* w.data is scratch: the executor's weights change only after all agree */
    rc = ck_restore_impl(comm, prefix, g, ng, 1, &step, err);
    if (!rc && (step < 0 || step > 1000000000))
        rc = sb_fail(err, SB_EXIT_INPUT, "checkpoint '%s': step %lld is out of range", prefix,
                     (long long)step);
    for (int j = 0; !rc && j < ng; j++)
        if (g[j].box.nd && sb_box_volume(&g[j].box))
            rc = exw_write(ex, &w, which[j], err);
    if (!rc)
        sb_executor_set_steps_done(ex, (int)step); /* inputs and labels continue from there */
    if (!rc && skipped && cap)
        snprintf(skipped, cap, "%s", what);
    free(g);
    free(keep);
    free(which);
    exw_free(&w);
    return rc;
}

/* ---- step folders ------------------------------------------------------------------------ */

#define STEP_FMT "step-%06lld"

int sb_checkpoint_step_dir(const char *dir, int64_t step, char *out, size_t cap, sb_error *err)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/" STEP_FMT, dir, (long long)step) >= (int)sizeof path - 16)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint folder '%s' is too long", dir);
    /* mkdir -p */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return sb_fail(err, SB_EXIT_INPUT, "cannot create folder '%s': %s", path,
                           strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return sb_fail(err, SB_EXIT_INPUT, "cannot create folder '%s': %s", path, strerror(errno));
    snprintf(out, cap, "%s/ckpt", path);
    return 0;
}

/* Step numbers of DIR's step-NNNNNN folders, sorted ascending; complete[i]
 * says whether it has an index. */
static int list_steps(const char *dir, int64_t **steps, int **complete, int *n, sb_error *err)
{
    *steps = NULL;
    *complete = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return sb_fail(err, SB_EXIT_INPUT, "checkpoint folder '%s': %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long v;
        char tail;
        if (sscanf(e->d_name, "step-%lld%c", &v, &tail) != 1 || v < 0 || strlen(e->d_name) < 11)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *s2 = realloc(*steps, (size_t)cap * sizeof **steps);
            if (s2)
                *steps = s2;
            int *c2 = realloc(*complete, (size_t)cap * sizeof **complete);
            if (c2)
                *complete = c2;
            if (!s2 || !c2) {
                closedir(d);
                free(*steps);
                free(*complete);
                *steps = NULL;
                *complete = NULL;
                *n = 0;
                return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            }
        }
        char p[4096];
        snprintf(p, sizeof p, "%s/%s/ckpt", dir, e->d_name);
        (*steps)[*n] = v;
        (*complete)[*n] = sb_checkpoint_exists(p);
        (*n)++;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort: few folders */
        for (int j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
            int c = (*complete)[j];
            (*complete)[j] = (*complete)[j - 1];
            (*complete)[j - 1] = c;
        }
    return 0;
}

int sb_checkpoint_find(const char *dir, char *prefix, size_t cap, sb_error *err)
{
    char p[4096];
    if (sb_checkpoint_exists(dir)) {
        snprintf(prefix, cap, "%s", dir);
        return 0;
    }
    snprintf(p, sizeof p, "%s/ckpt", dir);
    if (sb_checkpoint_exists(p)) {
        snprintf(prefix, cap, "%s", p);
        return 0;
    }
    int64_t *steps;
    int *complete, n;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sb_fail(err, SB_EXIT_INPUT, "no checkpoint at '%s' (no '%s.index', and no folder "
                       "of that name)", dir, dir);
    if (list_steps(dir, &steps, &complete, &n, err))
        return -1;
    int best = -1;
    for (int i = 0; i < n; i++)
        if (complete[i])
            best = i;
    if (best >= 0)
        snprintf(prefix, cap, "%s/" STEP_FMT "/ckpt", dir, (long long)steps[best]);
    free(steps);
    free(complete);
    if (best < 0)
        return sb_fail(err, SB_EXIT_INPUT, "no checkpoint in '%s' (no ckpt.index and no "
                       "step-NNNNNN folder with one)", dir);
    return 0;
}

/* Removes DIR/step-N's checkpoint files (ckpt.*) and the folder. */
static int remove_step(const char *dir, int64_t step, sb_error *err)
{
    char sd[4096], p[8192];
    snprintf(sd, sizeof sd, "%s/" STEP_FMT, dir, (long long)step);
    /* the index first: a half-removed checkpoint no longer exists */
    snprintf(p, sizeof p, "%s/ckpt.index", sd);
    unlink(p);
    DIR *d = opendir(sd);
    if (!d)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot open '%s': %s", sd, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "ckpt.", 5)) {
            snprintf(p, sizeof p, "%s/%s", sd, e->d_name);
            unlink(p);
        }
    closedir(d);
    if (rmdir(sd) != 0)
        return sb_fail(err, SB_EXIT_INTERNAL, "cannot remove old checkpoint folder '%s': %s", sd,
                       strerror(errno));
    return 0;
}

int sb_checkpoint_prune(const char *dir, int keep, sb_error *err)
{
    if (keep <= 0)
        return 0;
    int64_t *steps;
    int *complete, n, rc = 0;
    if (list_steps(dir, &steps, &complete, &n, err))
        return -1;
    int kept = 0, oldest = n;
    for (int i = n - 1; i >= 0 && kept < keep; i--)
        if (complete[i]) {
            kept++;
            oldest = i;
        }
    if (kept == keep)
        for (int i = 0; !rc && i < oldest; i++)
            rc = remove_step(dir, steps[i], err);
    free(steps);
    free(complete);
    return rc;
}
