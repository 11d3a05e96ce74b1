/* keys.c: the checked getters every architecture (arch.c) reads a
 * config's keys with: present or default, the JSON type, the range, the
 * key marked as read; a --set setting by its Hugging Face name; the notes
 * and the failure that names the key. Apart from read.c so that arch.c
 * calls down into them and read.c calls down into arch.c, no loop. */
#define _GNU_SOURCE
#include "hf_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hf_note(char *list, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(list);
    if (n + 3 >= cap)
        return;
    if (n)
        n += (size_t)snprintf(list + n, cap - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(list + n, cap - n, fmt, ap);
    va_end(ap);
}

int hf_fail(hf_reader *R, const char *key, const char *fmt, ...)
{
    char raw[512], what[4 * sizeof raw];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* one line: a config's string quoted here (an architecture, a model type) keeps
     * no newline of its own (sb_fail keeps newlines, for messages that list) */
    sb_escape_controls(raw, what, sizeof what, 0);
    if (key)
        return sb_fail(R->err, SB_EXIT_INPUT, "%s: key '%s': %s", R->path, key, what);
    return sb_fail(R->err, SB_EXIT_INPUT, "%s: %s", R->path, what);
}

static void mark(hf_reader *R, const char *key)
{
    for (int i = 0; i < R->nused; i++)
        if (strcmp(R->used[i], key) == 0)
            return;
    if (R->nused < HF_MAX_KEYS)
        R->used[R->nused++] = key;
}

json_t *hf_get(hf_reader *R, const char *key)
{
    mark(R, key);
    json_t *v = json_object_get(R->root, key);
    return v && !json_is_null(v) ? v : NULL;
}

static const char *type_word(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* transformers' attribute_map of GPT-2: the generic names --set also
 * takes for its keys */
static const char *const aliases[][2] = {
    {"hidden_size", "n_embd"},  {"num_hidden_layers", "n_layer"},
    {"num_attention_heads", "n_head"}, {"intermediate_size", "n_inner"},
    {"max_position_embeddings", "n_positions"},
};

/* name, or the key it stands for (GPT-2's n_embd for hidden_size) */
const char *hf_alias_of(const char *name)
{
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (strcmp(name, aliases[i][0]) == 0)
            return aliases[i][1];
    return name;
}

static int setting_is(const sb_setting *s, const char *name)
{
    return strcmp(s->name, name) == 0 || strcmp(hf_alias_of(s->name), name) == 0;
}

int64_t hf_setting(hf_reader *R, const char *name, int64_t def)
{
    for (int i = R->nsettings - 1; i >= 0; i--)
        if (setting_is(&R->settings[i], name)) {
            for (int j = 0; j < R->nsettings && j < 64; j++)
                if (setting_is(&R->settings[j], name))
                    R->info->settings_read |= (uint64_t)1 << j;
            return R->settings[i].value;
        }
    return def;
}

int hf_int(hf_reader *R, const char *key, int required, int64_t def, int64_t min, int64_t *out)
{
    json_t *v = hf_get(R, key);
    int64_t x = def;
    if (!v) {
        if (required)
            return hf_fail(R, key, "missing (an integer is needed)");
    } else {
        if (json_is_integer(v))
            x = (int64_t)json_integer_value(v);
        else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
                 fabs(json_real_value(v)) < 9.0e15)
            x = (int64_t)json_real_value(v);
        else
            return hf_fail(R, key, "expected an integer, found %s", type_word(v));
        if (x < min)
            return hf_fail(R, key, "%lld: must be at least %lld", (long long)x, (long long)min);
        if (x > ((int64_t)1 << 40))
            return hf_fail(R, key, "%lld: too large (at most 2^40)", (long long)x);
    }
    int64_t s = hf_setting(R, key, x);
    if (s != x && (s < min || s > ((int64_t)1 << 40)))
        return hf_fail(R, key, "--set %lld: must be in %lld..2^40", (long long)s, (long long)min);
    *out = s;
    return 0;
}

int hf_real(hf_reader *R, const char *key, double def, double *out)
{
    json_t *v = hf_get(R, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return hf_fail(R, key, "expected a number, found %s", type_word(v));
    *out = json_number_value(v);
    if (!isfinite(*out))
        return hf_fail(R, key, "not a finite number");
    return 0;
}

int hf_bool(hf_reader *R, const char *key, int def, int *out)
{
    json_t *v = hf_get(R, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return hf_fail(R, key, "expected true or false, found %s", type_word(v));
    *out = json_is_true(v);
    return 0;
}

int hf_str(hf_reader *R, const char *key, const char *def, const char **out)
{
    json_t *v = hf_get(R, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_string(v))
        return hf_fail(R, key, "expected a string, found %s", type_word(v));
    *out = json_string_value(v);
    return 0;
}

