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

/* 1 when tk is the identifier `word`. */
int tok_is(const token *tk, const char *word);
/* 1 when tk is the punctuation c. */
int tok_punct(const token *tk, char c);
/* The token's text, cut to n - 1 characters. */
void tok_str(const token *tk, char *buf, size_t n);
/* The token as messages quote it ('x', end of line, ...), in buf or static. */
const char *tok_desc(const token *tk, char *buf, size_t n);

#endif
