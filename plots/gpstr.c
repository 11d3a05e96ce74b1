/* plots/gpstr.c: the strings gnuplot reads: quoted literals and safe file
 * names. Their own file because plot.c, style.c and the search figures all
 * write them, and style.c must not call back into plot.c. */
#include <stdio.h>

#include "figs.h"
#include "shardbench/plots.h"

/* A gnuplot string literal: single quotes, '' for a quote. */
void sb_plot_gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if (*s != '\n')
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* A safe file-name piece: letters, digits, '-', '_', '.'; others become '_'. */
void sb_plot_safe_name(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++)
        out[k++] = (char)((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
                                  (s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '_' ||
                                  s[0] == '.'
                              ? s[0]
                              : '_');
    out[k] = '\0';
}
