/* plots/layers.c: a strategy's ops grouped into the rows of the paper's
 * Table II: an op repeated over consecutive layers with one config is one
 * row ("x.1 … x.6 / a / qkv"), consecutive ops alike are one row, as the
 * report's strategy table and the config heat map (fig_search.c) show
 * them. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "figs.h"

/* The layer of a name: its first '/'-separated segment of the form B.N (B
 * a name, N decimal), as pre (before the segment), base B, idx N, rest
 * (from the '/' after it). 0 when the name has none. */
typedef struct {
    int idx;
    size_t pre, seg_end, dot; /* offsets: segment start, its end, the dot */
} layer_of;

static int find_layer(const char *name, layer_of *l)
{
    size_t start = 0;
    for (;;) {
        size_t end = start + strcspn(name + start, "/");
        const char *dot = NULL;
        for (const char *c = name + start; c < name + end; c++)
            if (*c == '.')
                dot = c;
        if (dot && dot > name + start && dot + 1 < name + end && end - (size_t)(dot + 1 - name) <= 6) {
            int digits = 1;
            for (const char *c = dot + 1; c < name + end; c++)
                digits = digits && isdigit((unsigned char)*c);
            if (digits) {
                l->pre = start;
                l->seg_end = end;
                l->dot = (size_t)(dot - name);
                l->idx = atoi(dot + 1);
                return 1;
            }
        }
        if (!name[end])
            return 0;
        start = end + 1;
    }
}

typedef struct {
    const char *name;
    char key[600]; /* template|type|dims|cfg */
    layer_of l;
    int layered;
} op_key;

static void op_info(const sb_json *op, sb_layer_row *r, op_key *k)
{
    const sb_json *d = sb_json_get(op, "dims"), *cf = sb_json_get(op, "config");
    size_t u = 0, v = 0;
    r->dims[0] = r->cfg[0] = '\0';
    for (const sb_json *x = d ? d->child : NULL; x && u < sizeof r->dims; x = x->next) {
        const char *dn = sb_json_str(sb_json_get(x, "name"));
        u += (size_t)snprintf(r->dims + u, sizeof r->dims - u, "%s%s", u ? "," : "", dn ? dn : "?");
    }
    for (const sb_json *x = cf ? cf->child : NULL; x && v < sizeof r->cfg; x = x->next)
        v += (size_t)snprintf(r->cfg + v, sizeof r->cfg - v, "%s%g", v ? "," : "",
                              sb_json_num(x, 0));
    const char *type = sb_json_str(sb_json_get(op, "type"));
    snprintf(r->type, sizeof r->type, "%s", type ? type : "?");
    r->stage = (int)sb_json_num(sb_json_get(op, "stage"), 0);
    k->name = sb_json_str(sb_json_get(op, "name"));
    if (!k->name)
        k->name = "?";
    k->layered = find_layer(k->name, &k->l);
    char tmpl[256];
    if (k->layered) /* the name with its layer number taken out */
        snprintf(tmpl, sizeof tmpl, "%.*s#%s", (int)(k->l.dot + 1), k->name,
                 k->name + k->l.seg_end);
    else
        snprintf(tmpl, sizeof tmpl, "%s", k->name);
    snprintf(k->key, sizeof k->key, "%d|%.200s|%.39s|%.170s|%.170s", k->layered, tmpl, r->type,
             r->dims, r->cfg);
}

/* "x.1 … x.6 / a / qkv" from the first and last op names of a layer row */
static void layer_label(const char *first, const layer_of *l, int last_idx, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "%.*s … %.*s%d", (int)l->seg_end, first,
                                (int)(l->dot + 1 - l->pre), first + l->pre, last_idx);
    for (const char *c = first + l->seg_end; *c && k + 4 < n; c++) {
        if (*c == '/')
            k += (size_t)snprintf(out + k, n - k, " / ");
        else
            out[k++] = *c, out[k] = '\0';
    }
}

int sb_layer_rows(const sb_json *ops, sb_layer_row **rows_out, int *nout, sb_error *err)
{
    if (!ops || ops->type != SB_JSON_ARR)
        return sb_fail(err, SB_EXIT_INPUT, "the strategy has no \"ops\" array");
    int nops = ops->n, n = 0;
    sb_layer_row *rows = calloc((size_t)(nops ? nops : 1), sizeof *rows);
    op_key *keys = calloc((size_t)(nops ? nops : 1), sizeof *keys); /* of each row's first op */
    const char **last = calloc((size_t)(nops ? nops : 1), sizeof *last);
    int *last_idx = calloc((size_t)(nops ? nops : 1), sizeof *last_idx);
    if (!rows || !keys || !last || !last_idx) {
        free(rows), free(keys), free(last), free(last_idx);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    int prev_row = -1, i = 0;
    for (const sb_json *op = ops->child; op; op = op->next, i++) {
        sb_layer_row r = {.first = i, .count = 1};
        op_key k;
        op_info(op, &r, &k);
        int into = -1;
        if (k.layered) { /* the row of the same op one layer before */
            for (int j = n - 1; j >= 0 && into < 0; j--)
                if (rows[j].layered && last_idx[j] == k.l.idx - 1 && !strcmp(keys[j].key, k.key))
                    into = j;
        } else if (prev_row >= 0 && !rows[prev_row].layered && !strcmp(keys[prev_row].key, k.key)) {
            into = prev_row; /* consecutive ops alike */
        }
        if (into < 0) {
            into = n++;
            r.layered = k.layered;
            rows[into] = r;
            keys[into] = k;
        } else {
            rows[into].count++;
        }
        last[into] = k.name;
        last_idx[into] = k.l.idx;
        prev_row = into;
    }
    for (int j = 0; j < n; j++) {
        sb_layer_row *r = &rows[j];
        if (r->count == 1)
            snprintf(r->label, sizeof r->label, "%s", keys[j].name);
        else if (r->layered)
            layer_label(keys[j].name, &keys[j].l, last_idx[j], r->label, sizeof r->label);
        else
            snprintf(r->label, sizeof r->label, "%.80s .. %.80s (%d)", keys[j].name, last[j],
                     r->count);
    }
    free(keys), free(last), free(last_idx);
    *rows_out = rows;
    *nout = n;
    return 0;
}
