/* fuzz_onnx.c: libFuzzer target for the ONNX importer.
 *
 * Each input is converted as an ONNX file (sb_onnx_to_text). A failure must
 * carry an error that names the file; a success must give text that
 * sb_model_parse reads (the importer's contract: what it writes parses), and
 * when the graph is small the search problem is built for p = 4. Everything
 * is freed, so LeakSanitizer sees every leak. Seed corpus: tests/data/onnx.
 * Run with scripts/fuzz.sh or build-fuzz/tests/fuzz_onnx DIR; not a unit
 * test. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/onnx.h"
#include "shardbench/search.h"

#define PATH "fuzz.onnx"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    sb_error err = {0};
    if (sb_onnx_to_text(data, size, PATH, NULL, &text, &len, NULL, &err)) {
        if (err.code == 0 || !strstr(err.msg, PATH) || text) {
            fprintf(stderr, "fuzz_onnx: failure without a proper error (code %d, msg '%s')\n", err.code,
                    err.msg);
            abort();
        }
        return 0;
    }
    if (!text || strlen(text) != len) {
        fprintf(stderr, "fuzz_onnx: success without text, or a wrong length\n");
        abort();
    }
    sb_model m;
    if (sb_model_parse(text, len, PATH, NULL, 0, &m, &err)) {
        fprintf(stderr, "fuzz_onnx: the imported text does not parse: %s\n--- text ---\n%s\n", err.msg, text);
        abort();
    }
    if (m.nops < 100) {
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        sb_problem pb;
        if (sb_problem_build(&m, 4, &cp, &pb, &err) == 0)
            sb_problem_free(&pb);
    }
    sb_model_free(&m);
    free(text);
    return 0;
}
