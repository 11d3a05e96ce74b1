/* lex.h: tokens of the model-file format (internal to models/). */
#ifndef SB_MODELS_LEX_H
#define SB_MODELS_LEX_H

#include <stdint.h>
#include <stddef.h>

#include "shardbench/common.h"

typedef enum {
    TK_EOF = 0,
    TK_NL,      /* end of a statement (newline outside brackets, or ';') */
    TK_IDENT,
    TK_INT,
    TK_STRING,
    TK_PUNCT,   /* one of = , ( ) [ ] + - * / % : */
    TK_ARROW,   /* -> (inside strings only, kept for completeness) */
} tok_kind;

typedef struct {
    tok_kind kind;
    int line, col;
    int64_t ival;      /* TK_INT */
    char punct;        /* TK_PUNCT */
    const char *s;     /* TK_IDENT, TK_STRING: start in the source text */
    int len;           /* length of s */
} token;

typedef struct {
    token *t;
    int n;
} token_list;

/* Splits text into tokens; newlines inside () or [] are not statement ends.
 * Errors name path:line:col. */
int sb_lex(const char *text, size_t len, const char *path, token_list *out,
           sb_error *err);

#endif
