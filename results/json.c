/* results/json.c: the JSON reader of query.h (sb_json_*), over jansson.
 *
 * jansson parses; this file only turns its tree into the sb_json list form
 * and adds what printf-written JSON needs and jansson refuses: the bare
 * words nan, NaN, inf, Infinity (with an optional '-') as numbers. They are
 * rewritten, outside strings, into two-byte strings starting with NUL
 * (read with JSON_ALLOW_NUL) and turned back into numbers here. Nesting
 * deeper than SB_JSON_MAX_DEPTH is refused before jansson sees it. */
#define _GNU_SOURCE
#include "shardbench/query.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SB_JSON_MAX_DEPTH 200

/* A word of the non-standard numbers at s: its length and value, or 0. */
static size_t special_word(const char *s, char *tag)
{
    static const struct {
        const char *w;
        char tag;
    } words[] = {{"-Infinity", '-'}, {"Infinity", 'i'}, {"-inf", '-'}, {"inf", 'i'},
                 {"-nan", 'n'},      {"-NaN", 'n'},     {"nan", 'n'},  {"NaN", 'n'}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].w);
        if (!strncmp(s, words[i].w, n) && !isalnum((unsigned char)s[n])) {
            *tag = words[i].tag;
            return n;
        }
    }
    return 0;
}

/* The text with the special numbers rewritten (malloc'd); shift[k] is how
 * many bytes longer the rewritten text is than the original before its
 * byte k, to report offsets in the caller's text. Fails on deep nesting. */
static char *rewrite(const char *text, int **shift, sb_error *err)
{
    size_t n = strlen(text), cap = n * 3 + 1, o = 0;
    char *out = malloc(cap);
    int *sh = malloc((cap + 1) * sizeof *sh);
    if (!out || !sh) {
        free(out);
        free(sh);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading JSON");
        return NULL;
    }
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n;) {
        char c = text[i], tag;
        size_t w;
        if (in_str) {
            if (c == '\\' && text[i + 1]) {
                sh[o] = (int)(o - i), out[o++] = c, i++;
                c = text[i];
            } else if (c == '"') {
                in_str = 0;
            }
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > SB_JSON_MAX_DEPTH) {
                free(out);
                free(sh);
                sb_fail(err, SB_EXIT_INPUT, "bad JSON at offset %zu: nested too deeply", i);
                return NULL;
            }
        } else if (c == ']' || c == '}') {
            depth--;
        } else if ((w = special_word(text + i, &tag))) {
            /* "\u0000X": 8 bytes for w (3..9) */
            for (const char *r = "\"\\u0000"; *r; r++)
                sh[o] = (int)(o - i), out[o++] = *r;
            sh[o] = (int)(o - i), out[o++] = tag;
            sh[o] = (int)(o - i), out[o++] = '"';
            i += w;
            continue;
        }
        sh[o] = (int)(o - i);
        out[o++] = c;
        i++;
    }
    sh[o] = o ? sh[o - 1] : 0;
    out[o] = '\0';
    *shift = sh;
    return out;
}

static sb_json *convert(const json_t *v, sb_error *err)
{
    sb_json *j = calloc(1, sizeof *j);
    if (!j) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading JSON");
        return NULL;
    }
    sb_json **tail = &j->child;
    switch (json_typeof(v)) {
    case JSON_NULL: j->type = SB_JSON_NULL; break;
    case JSON_TRUE: j->type = SB_JSON_BOOL, j->num = 1; break;
    case JSON_FALSE: j->type = SB_JSON_BOOL; break;
    case JSON_INTEGER: j->type = SB_JSON_NUM, j->num = (double)json_integer_value(v); break;
    case JSON_REAL: j->type = SB_JSON_NUM, j->num = json_real_value(v); break;
    case JSON_STRING: {
        const char *s = json_string_value(v);
        if (json_string_length(v) == 2 && s[0] == '\0') { /* a rewritten nan or inf */
            j->type = SB_JSON_NUM;
            j->num = s[1] == 'n' ? NAN : s[1] == 'i' ? INFINITY : -INFINITY;
            break;
        }
        j->type = SB_JSON_STR;
        if (!(j->str = strdup(s)))
            goto oom;
        break;
    }
    case JSON_ARRAY: {
        j->type = SB_JSON_ARR;
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            if (!(*tail = convert(item, err)))
                goto fail;
            tail = &(*tail)->next;
            j->n++;
        }
        break;
    }
    case JSON_OBJECT: {
        j->type = SB_JSON_OBJ;
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)v, key, item) {
            if (!(*tail = convert(item, err)))
                goto fail;
            if (!((*tail)->key = strdup(key)))
                goto oom;
            tail = &(*tail)->next;
            j->n++;
        }
        break;
    }
    }
    return j;
oom:
    sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading JSON");
fail:
    sb_json_free(j);
    return NULL;
}

sb_json *sb_json_parse(const char *text, sb_error *err)
{
    if (!text)
        text = "";
    int *shift = NULL;
    char *t = rewrite(text, &shift, err);
    if (!t)
        return NULL;
    json_error_t je;
    json_t *v = json_loads(t, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
    sb_json *j = NULL;
    if (!v) {
        size_t pos = je.position > 0 ? (size_t)je.position : 0, len = strlen(t);
        if (pos > len)
            pos = len;
        sb_fail(err, SB_EXIT_INPUT, "bad JSON at offset %ld: %s", (long)pos - shift[pos],
                je.text);
    } else {
        j = convert(v, err);
        json_decref(v);
    }
    free(t);
    free(shift);
    return j;
}

void sb_json_free(sb_json *j)
{
    while (j) {
        sb_json *next = j->next;
        sb_json_free(j->child);
        free(j->str);
        free(j->key);
        free(j);
        j = next;
    }
}

const sb_json *sb_json_get(const sb_json *obj, const char *key)
{
    if (!obj || obj->type != SB_JSON_OBJ)
        return NULL;
    for (const sb_json *c = obj->child; c; c = c->next)
        if (c->key && !strcmp(c->key, key))
            return c;
    return NULL;
}

const sb_json *sb_json_at(const sb_json *arr, int i)
{
    if (!arr || (arr->type != SB_JSON_ARR && arr->type != SB_JSON_OBJ) || i < 0)
        return NULL;
    const sb_json *c = arr->child;
    while (c && i-- > 0)
        c = c->next;
    return c;
}

double sb_json_num(const sb_json *j, double def)
{
    return j && j->type == SB_JSON_NUM ? j->num : def;
}

const char *sb_json_str(const sb_json *j)
{
    return j && j->type == SB_JSON_STR ? j->str : NULL;
}
