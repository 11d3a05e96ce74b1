/* escape.c: text that reaches a terminal or a shell: control characters
 * escaped, words quoted for pasting. Apart from text.c because sb_fail
 * (common.c) escapes every message with it, while text.c's parsers report
 * through sb_fail: common.c -> escape.c, text.c -> common.c, no loop. */
#include "shardbench/common.h"

#include <stdio.h>
#include <string.h>

/* c as \xHH (or \n, \t, \r) into out[*k..n): control bytes and DEL. */
static void put_escaped(unsigned char c, char *out, size_t n, size_t *k)
{
    char e[8];
    if (c == '\n')
        snprintf(e, sizeof e, "\\n");
    else if (c == '\t')
        snprintf(e, sizeof e, "\\t");
    else if (c == '\r')
        snprintf(e, sizeof e, "\\r");
    else
        snprintf(e, sizeof e, "\\x%02x", c);
    size_t l = strlen(e);
    if (*k + l < n) {
        memcpy(out + *k, e, l);
        *k += l;
    }
}

static int is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

void sb_escape_controls(const char *s, char *out, size_t n, int keep_lines)
{
    size_t k = 0;
    if (!n)
        return;
    for (; *s && k + 1 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (is_control(c) && !(keep_lines && (c == '\n' || c == '\t')))
            put_escaped(c, out, n, &k);
        else
            out[k++] = (char)c;
    }
    out[k] = '\0';
}

int sb_has_controls(const char *s)
{
    for (; *s; s++)
        if (is_control((unsigned char)*s))
            return 1;
    return 0;
}

/* Bytes a POSIX shell takes literally in a bare word. */
static int shell_plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || (c && strchr("_-./+=:,@%", c)) || c >= 0x80;
}

void sb_shell_quote(const char *s, char *out, size_t n)
{
    size_t k = 0;
    int plain = *s != '\0', ctl = 0;
    for (const char *c = s; *c; c++) {
        plain &= shell_plain((unsigned char)*c);
        ctl |= is_control((unsigned char)*c);
    }
    if (!n)
        return;
    if (plain) {
        snprintf(out, n, "%s", s);
        return;
    }
    /* 'WORD' with ' as '\''; with a control byte $'WORD' (bash, zsh, ksh),
     * the bytes as \xHH, so that none reaches the terminal */
    const char *open = ctl ? "$'" : "'";
    for (const char *o = open; *o && k + 1 < n; o++)
        out[k++] = *o;
    for (; *s && k + 6 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (ctl && (c == '\'' || c == '\\')) {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (ctl && is_control(c)) {
            put_escaped(c, out, n, &k);
        } else if (c == '\'') {
            memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            out[k++] = (char)c;
        }
    }
    if (k + 1 < n)
        out[k++] = '\'';
    out[k] = '\0';
}
