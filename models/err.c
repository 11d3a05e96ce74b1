/* err.c: the faults of the model language: an error at a token
 * ("path:line:col: what", SB_EXIT_INPUT) and the check for a punctuation
 * mark. The bottom of the parser: lang.c, expr.c, names.c and the op
 * builders of ops/ call it; it calls only lex.c. */
#define _GNU_SOURCE
#include "lang.h"

#include <stdarg.h>
#include <stdio.h>

int lang_err(parser *P, const token *tk, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sb_fail(P->err, SB_EXIT_INPUT, "%s:%d:%d: %s", P->path, tk->line, tk->col, msg);
}

int lang_expect_punct(parser *P, int *pos, char c)
{
    char d[96];
    if (!tok_punct(&P->t[*pos], c))
        return lang_err(P, &P->t[*pos], "expected '%c', found %s", c, tok_desc(&P->t[*pos], d, sizeof d));
    (*pos)++;
    return 0;
}
