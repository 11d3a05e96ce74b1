/* plots/style.c: the one order of series in every figure's legend and their
 * palette numbers (the colours and markers themselves: plots/terminal.gp).
 * A strategy kind keeps its place and colour in every figure of a run: the
 * run's kinds are numbered once, a figure's subset keeps those numbers. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "figs.h"
#include "shardbench/plots.h"

static const char *const baselines[] = {"dp", "data", "data-parallel", "data_parallel",
                                        "expert", "mcmc", "paper", "megatron"};
static const char *const searched[] = {"pase", "bf"};

static int index_in(const char *k, const char *const *list, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(k, list[i]))
            return i;
    return -1;
}

/* name = prefix + optional trailing decimal number (-1 when none) */
static long trailing_number(const char *s, size_t *prefix)
{
    size_t n = strlen(s), k = n;
    while (k > 0 && isdigit((unsigned char)s[k - 1]))
        k--;
    *prefix = k;
    if (k == n || n - k > 9)
        return (*prefix = n), -1;
    return strtol(s + k, NULL, 10);
}

int sb_kind_family(const char *kind)
{
    size_t pre;
    if (index_in(kind, baselines, 8) >= 0)
        return 1;
    long num = trailing_number(kind, &pre);
    if (num >= 0 && pre == 4 && !strncmp(kind, "rand", 4))
        return 3;
    return 2;
}

/* rank of a kind in the fixed order: baselines in their list's order, the
 * searched ones, candN, other names, randN */
static int rank_of(const char *k)
{
    size_t pre;
    int i = index_in(k, baselines, 8);
    if (i >= 0)
        return i;
    if ((i = index_in(k, searched, 2)) >= 0)
        return 10 + i;
    long num = trailing_number(k, &pre);
    if (num >= 0 && pre == 4 && !strncmp(k, "cand", 4))
        return 20;
    if (sb_kind_family(k) == 3)
        return 40;
    return 30;
}

int sb_kind_cmp(const char *a, const char *b)
{
    int ra = rank_of(a), rb = rank_of(b);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    size_t pa, pb;
    long na = trailing_number(a, &pa), nb = trailing_number(b, &pb);
    int c = strncmp(a, b, pa < pb ? pa : pb);
    if (c || pa != pb)
        return c ? c : (pa < pb ? -1 : 1);
    if (na != nb)
        return na < nb ? -1 : 1;
    return strcmp(a, b);
}

int sb_series_add(sb_series *s, const char *name, sb_error *err)
{
    char safe[64];
    sb_plot_safe_name(name, safe, sizeof safe);
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->name[i], safe))
            return 0;
    if (s->n >= SB_SERIES_MAX)
        return sb_fail(err, SB_EXIT_INPUT, "more than %d series in one figure (at '%s')",
                       SB_SERIES_MAX, safe);
    memcpy(s->name[s->n], safe, sizeof safe);
    s->color[s->n] = s->n + 1;
    s->n++;
    return 0;
}

void sb_series_sort(sb_series *s)
{
    for (int i = 1; i < s->n; i++) /* insertion sort: few series */
        for (int j = i; j > 0 && sb_kind_cmp(s->name[j - 1], s->name[j]) > 0; j--) {
            char t[64];
            memcpy(t, s->name[j], sizeof t);
            memcpy(s->name[j], s->name[j - 1], sizeof t);
            memcpy(s->name[j - 1], t, sizeof t);
        }
    for (int i = 0; i < s->n; i++)
        s->color[i] = i + 1;
}

int sb_series_color(const sb_series *s, const char *name)
{
    char safe[64];
    sb_plot_safe_name(name, safe, sizeof safe);
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->name[i], safe))
            return s->color[i];
    return 0;
}

void sb_series_within(sb_series *sub, const sb_series *s)
{
    sb_series_sort(sub);
    int extra = s->n;
    for (int i = 0; i < sub->n; i++) {
        int c = sb_series_color(s, sub->name[i]);
        sub->color[i] = c ? c : ++extra;
    }
}

int sb_series_words(const sb_series *s, char **names, char **colors, sb_error *err)
{
    size_t ln = 0, lc = 0;
    FILE *a = open_memstream(names, &ln), *b = open_memstream(colors, &lc);
    for (int i = 0; a && b && i < s->n; i++) {
        fprintf(a, "%s%s", i ? " " : "", s->name[i]);
        fprintf(b, "%s%d", i ? " " : "", s->color[i]);
    }
    int bad = !a || !b;
    if (a && fclose(a))
        bad = 1;
    if (b && fclose(b))
        bad = 1;
    if (bad) {
        if (a)
            free(*names);
        if (b)
            free(*colors);
        *names = *colors = NULL;
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    return 0;
}

char *sb_series_vars(const char *path, const char *key, const sb_series *s, const char *title,
                     const char *extra, sb_error *err)
{
    char *names = NULL, *colors = NULL, *vars = NULL;
    size_t vl = 0;
    if (sb_series_words(s, &names, &colors, err))
        return NULL;
    FILE *v = open_memstream(&vars, &vl);
    if (v) {
        fprintf(v, "datafile=");
        sb_plot_gp_str(v, path);
        fprintf(v, "; %s=", key);
        sb_plot_gp_str(v, names);
        fprintf(v, "; colors='%s'; ttl=", colors);
        sb_plot_gp_str(v, title);
        fputs(extra, v);
    }
    free(names);
    free(colors);
    if (!v || fclose(v)) {
        if (v)
            free(vars);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    return vars;
}
