/* lex.c: turns model-file text into tokens, and the helpers that compare
 * and print them. Not a parser: see lang.c. */
#include "lex.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(token_list *tl, int *cap, token tk, sb_error *err)
{
    if (tl->n == *cap) {
        int nc = *cap ? *cap * 2 : 256;
        token *nt = sb_realloc(tl->t, (size_t)nc * sizeof *nt, err);
        if (!nt)
            return -1;
        tl->t = nt;
        *cap = nc;
    }
    tl->t[tl->n++] = tk;
    return 0;
}

int sb_lex(const char *text, size_t len, const char *path, token_list *out,
           sb_error *err)
{
    token_list tl = {0};
    int cap = 0, line = 1, col = 1, depth = 0;
    size_t i = 0;
    while (i < len) {
        char c = text[i];
        token tk = {.line = line, .col = col};
        if (c == '\n') {
            if (depth == 0) {
                tk.kind = TK_NL;
                if (push(&tl, &cap, tk, err))
                    goto fail;
            }
            i++, line++, col = 1;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            i++, col++;
            continue;
        }
        if (c == '#') {
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        if (c == '\\' && i + 1 < len && text[i + 1] == '\n') {
            i += 2, line++, col = 1; /* explicit line continuation */
            continue;
        }
        if (c == ';') {
            tk.kind = TK_NL;
            if (push(&tl, &cap, tk, err))
                goto fail;
            i++, col++;
            continue;
        }
        if (isalpha((unsigned char)c) || c == '_') {
            size_t j = i;
            while (j < len && (isalnum((unsigned char)text[j]) || text[j] == '_'))
                j++;
            tk.kind = TK_IDENT;
            tk.s = text + i;
            tk.len = (int)(j - i);
            if (tk.len >= 90) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: name too long (%d characters, at most 89)",
                        path, line, col, tk.len);
                goto fail;
            }
            col += (int)(j - i);
            i = j;
            if (push(&tl, &cap, tk, err))
                goto fail;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            int64_t v = 0;
            size_t j = i;
            while (j < len && isdigit((unsigned char)text[j])) {
                int dig = text[j] - '0';
                if (v > (INT64_MAX - dig) / 10) { /* up to 2^63 - 1 exactly */
                    sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: integer too large", path, line, col);
                    goto fail;
                }
                v = v * 10 + dig;
                j++;
            }
            if (j < len && (isalpha((unsigned char)text[j]) || text[j] == '_')) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: expected a number, found '%.*s'",
                        path, line, col, (int)(j - i + 1), text + i);
                goto fail;
            }
            tk.kind = TK_INT;
            tk.ival = v;
            col += (int)(j - i);
            i = j;
            if (push(&tl, &cap, tk, err))
                goto fail;
            continue;
        }
        if (c == '"') {
            size_t j = i + 1;
            while (j < len && text[j] != '"' && text[j] != '\n')
                j++;
            if (j >= len || text[j] != '"') {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: unterminated string", path, line, col);
                goto fail;
            }
            tk.kind = TK_STRING;
            tk.s = text + i + 1;
            tk.len = (int)(j - i - 1);
            col += (int)(j - i + 1);
            i = j + 1;
            if (push(&tl, &cap, tk, err))
                goto fail;
            continue;
        }
        if (strchr("=,()[]+-*/%:", c) && c != '\0') {
            if (c == '(' || c == '[')
                depth++;
            if (c == ')' || c == ']') {
                if (depth == 0) {
                    sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: unmatched '%c'", path, line, col, c);
                    goto fail;
                }
                depth--;
            }
            tk.kind = TK_PUNCT;
            tk.punct = c;
            if (push(&tl, &cap, tk, err))
                goto fail;
            i++, col++;
            continue;
        }
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
            sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: unexpected character '%c'", path, line, col, c);
        else
            sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: unexpected byte 0x%02x", path, line, col,
                    (unsigned char)c);
        goto fail;
    }
    if (depth != 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: unclosed '(' or '[' at end of file", path, line, col);
        goto fail;
    }
    token nl = {.kind = TK_NL, .line = line, .col = col};
    token eof = {.kind = TK_EOF, .line = line, .col = col};
    if (push(&tl, &cap, nl, err) || push(&tl, &cap, eof, err))
        goto fail;
    *out = tl;
    return 0;
fail:
    free(tl.t);
    return -1;
}

/* ---- tokens as words ------------------------------------------------------ */

int tok_is(const token *tk, const char *word)
{
    return tk->kind == TK_IDENT && (int)strlen(word) == tk->len
           && memcmp(tk->s, word, (size_t)tk->len) == 0;
}

int tok_punct(const token *tk, char c)
{
    return tk->kind == TK_PUNCT && tk->punct == c;
}

void tok_str(const token *tk, char *buf, size_t n)
{
    int l = tk->len < (int)n - 1 ? tk->len : (int)n - 1;
    memcpy(buf, tk->s, (size_t)l);
    buf[l] = '\0';
}

const char *tok_desc(const token *tk, char *buf, size_t n)
{
    switch (tk->kind) {
    case TK_EOF: return "end of file";
    case TK_NL: return "end of line";
    case TK_INT: snprintf(buf, n, "'%lld'", (long long)tk->ival); return buf;
    case TK_PUNCT: snprintf(buf, n, "'%c'", tk->punct); return buf;
    case TK_STRING: snprintf(buf, n, "\"%.*s\"", tk->len > 40 ? 40 : tk->len, tk->s); return buf;
    default: snprintf(buf, n, "'%.*s'", tk->len > 60 ? 60 : tk->len, tk->s); return buf;
    }
}
