/* fuzz_hf.c: libFuzzer target for the Hugging Face config reader
 * (models/hf/). Each input is read as a config.json (sb_hf_text_from_json,
 * jansson with duplicate keys refused); a refusal must carry a message and
 * exit status 2; an accepted config's model text must parse (a text the
 * reader writes and the parser refuses is a bug of the writer) unless the
 * parser refuses a size (a dim over its limits), and its parameter count
 * must be positive. Seeds: tests/data/hf/SUBDIR/config.json. Run with
 * scripts/fuzz.sh; not a unit test. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/hf.h"
#include "shardbench/model.h"

static void check_refusal(const sb_error *err, const char *what)
{
    if (err->code != SB_EXIT_INPUT || err->msg[0] == '\0') {
        fprintf(stderr, "fuzz_hf: %s refused with code %d, message '%s'\n", what, err->code,
                err->msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sb_error err = {0};
    char *text = NULL;
    size_t len = 0;
    sb_hf_info info;
    if (sb_hf_text_from_json((const char *)data, size, "fuzz.json", NULL, 0, &text, &len, &info,
                             &err)) {
        check_refusal(&err, "the reader");
        return 0;
    }
    sb_model m;
    memset(&err, 0, sizeof err);
    if (sb_hf_parse_text(text, len, &info, NULL, 0, &m, &err)) {
        check_refusal(&err, "the parser");
        /* only a size beyond the parser's limits may refuse a written text */
        static const char *const limits[] = {"integer overflow", "too large", "too many ops",
                                             "too many tensors", "statements run",
                                             "is not divisible", "non-positive size"};
        int limit = 0;
        for (size_t i = 0; i < sizeof limits / sizeof *limits; i++)
            limit |= strstr(err.msg, limits[i]) != NULL;
        if (!limit) {
            fprintf(stderr, "fuzz_hf: the written text is refused: %s\n%s\n", err.msg, text);
            abort();
        }
        free(text);
        return 0;
    }
    free(text);
    int64_t active, total = sb_model_param_count(&m, &active);
    if (total <= 0 || active <= 0 || active > total) {
        fprintf(stderr, "fuzz_hf: parameter count %lld, active %lld\n", (long long)total,
                (long long)active);
        abort();
    }
    sb_model_free(&m);
    return 0;
}
