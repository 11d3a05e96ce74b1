/* tests/test_strategy_io.c: cmocka tests of the strategy file's model line
 * (strategy/strategy_io.c): sb_strategy_word on bare and quoted values, and
 * a strategy saved for a model whose name holds a blank, '#', '"', '\' and
 * a control character loads back against the same model and is refused by
 * another. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/pipesearch.h"
#include "shardbench/precision.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

/* rnnlm.model at batch 8: the model every test here saves strategies of. */
static void load_rnnlm8(sb_model *m)
{
    sb_setting set[1];
    sb_error err = {0};
    assert_int_equal(sb_setting_parse("batch=8", &set[0], &err), 0);
    if (sb_model_load(SB_SOURCE_DIR "/models/rnnlm.model", set, 1, m, &err))
        fail_msg("%s", err.msg);
}

static void test_word(void **state)
{
    (void)state;
    char out[64];
    const char *end;
    assert_int_equal(sb_strategy_word("  alexnet  # c", out, sizeof out, &end), 0);
    assert_string_equal(out, "alexnet");
    assert_string_equal(end, "  # c");
    assert_int_equal(sb_strategy_word("plain\"q", out, sizeof out, NULL), 0);
    assert_string_equal(out, "plain\"q"); /* a quote inside a bare word is kept */
    assert_int_equal(sb_strategy_word("\"my net#1\" # c", out, sizeof out, &end), 0);
    assert_string_equal(out, "my net#1");
    assert_string_equal(end, " # c");
    assert_int_equal(sb_strategy_word("\"a\\\"b\\\\c\\n\\t\\r\\x01\\x7f\"", out, sizeof out,
                                      NULL), 0);
    assert_string_equal(out, "a\"b\\c\n\t\r\x01\x7f");
    assert_int_equal(sb_strategy_word("\"\"", out, sizeof out, NULL), 0);
    assert_string_equal(out, "");
    assert_int_equal(sb_strategy_word("\"open", out, sizeof out, NULL), -1);
    assert_int_equal(sb_strategy_word("\"bad \\q\"", out, sizeof out, NULL), -1);
    assert_int_equal(sb_strategy_word("\"bad \\x4\"", out, sizeof out, NULL), -1);
    assert_int_equal(sb_strategy_word("\"0123456789\"", out, 5, NULL), -1);
    assert_int_equal(sb_strategy_word("0123456789", out, 5, NULL), -1);
}

/* A copy of rnnlm.model without its `model` line, so the file's base name
 * is the model's name. */
static void model_file(const char *path)
{
    FILE *in = fopen(SB_SOURCE_DIR "/models/rnnlm.model", "r"), *out = fopen(path, "w");
    assert_non_null(in);
    assert_non_null(out);
    char line[4096];
    while (fgets(line, sizeof line, in))
        if (strncmp(line, "model ", 6))
            fputs(line, out);
    fclose(in);
    fclose(out);
}

static void save_and_load(const char *dir, const char *name)
{
    char path[PATH_MAX], other[PATH_MAX], strat[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.model", dir, name);
    snprintf(other, sizeof other, "%s/%s-other.model", dir, name);
    snprintf(strat, sizeof strat, "%s/s.strategy", dir);
    model_file(path);
    model_file(other);
    sb_setting set[2];
    sb_error err = {0};
    assert_int_equal(sb_setting_parse("batch=8", &set[0], &err), 0);
    assert_int_equal(sb_setting_parse("vocab=64", &set[1], &err), 0);
    sb_model m, m2;
    if (sb_model_load(path, set, 2, &m, &err) || sb_model_load(other, set, 2, &m2, &err))
        fail_msg("%s", err.msg);
    /* a name from a file name is checked now (test_parse's
     * test_name_from_path); the strategy file must still carry any name
     * (databases of older builds hold them): set here */
    snprintf(m.name, sizeof m.name, "%s", name);
    snprintf(m2.name, sizeof m2.name, "%s-other", name);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb, pb2;
    assert_int_equal(sb_problem_build(&m, 2, &cp, &pb, &err), 0);
    assert_int_equal(sb_problem_build(&m2, 2, &cp, &pb2, &err), 0);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 64};
    sb_result r;
    assert_int_equal(sb_search(&pb, &so, &r, &err), 0);
    assert_int_equal(sb_result_save(strat, &pb, &r, "pase", &err), 0);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    assert_non_null(choice);
    if (sb_strategy_load_choice(strat, &pb, choice, &err))
        fail_msg("%s: %s", name, err.msg);
    assert_memory_equal(choice, r.choice, (size_t)m.nops * sizeof *choice);
    assert_int_equal(sb_strategy_load_choice(strat, &pb2, choice, &err), -1);
    assert_non_null(strstr(err.msg, "strategy is for model"));
    free(choice);
    sb_result_free(&r);
    sb_problem_free(&pb);
    sb_problem_free(&pb2);
    sb_model_free(&m);
    sb_model_free(&m2);
    unlink(path);
    unlink(other);
    unlink(strat);
}

static void test_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_strategy_io_XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const char *const names[] = {"plain", "my net#1", "plain\"q", "back\\slash",
                                        "tab\tbell\x07", "#lead", "\"quoted"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        save_and_load(dir, names[i]);
    rmdir(dir);
}

/* A strategy "file" that is a device, a FIFO or a directory is refused at
 * once with a message naming it: no endless read of /dev/zero, no wait on a
 * FIFO nobody writes (alarm: a hang fails the test instead). */
static void test_special_files(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_model m;
    load_rnnlm8(&m);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    assert_int_equal(sb_problem_build(&m, 2, &cp, &pb, &err), 0);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    assert_non_null(choice);

    char dir[] = "/tmp/sb_strategy_special_XXXXXX", fifo[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo.strategy", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *paths[] = {"/dev/zero", fifo, dir};
    const char *says[] = {"character device", "FIFO", "directory"};
    alarm(20);
    for (int i = 0; i < 3; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(sb_strategy_load_choice(paths[i], &pb, choice, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        if (!strstr(err.msg, paths[i]) || !strstr(err.msg, says[i]) ||
            !strstr(err.msg, "not a regular file"))
            fail_msg("%s: unclear message: %s", paths[i], err.msg);
    }
    alarm(0);
    unlink(fifo);
    rmdir(dir);
    free(choice);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Version 2: a pipeline, a ZeRO stage and recomputed ops are written and
 * read back; a plain strategy is still written as version 1; damaged
 * version-2 lines are refused naming the file and line; the index loader
 * (sb_strategy_load_choice, for commands that take no pipeline) refuses them. */
static void test_version2(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_model m;
    load_rnnlm8(&m);
    char dir[] = "/tmp/sb_strategy_v2_XXXXXX", path[PATH_MAX], bad[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/s.strategy", dir);
    snprintf(bad, sizeof bad, "%s/bad.strategy", dir);

    sb_strategy sf, back;
    assert_int_equal(sb_strategy_init(&sf, &m, 4), 0);
    for (int i = 0; i < m.nops; i++)
        for (int d = 0; d < m.ops[i].ndims; d++)
            sf.cfg[i * SB_MAX_DIMS + d] = 1;
    sf.cfg[0] = 2; /* op 0 splits its first dim over its stage's 2 devices */
    /* plain: version 1 */
    assert_int_equal(sb_strategy_save(path, &m, &sf, &err), 0);
    char *text;
    size_t len;
    assert_int_equal(sb_read_file(path, "strategy", 1 << 20, &text, &len, &err), 0);
    assert_non_null(strstr(text, "shardbench-strategy 1\n"));
    free(text);
    /* two stages of 2 devices, 4 micro-batches, 1f1b; zero 2; one op recomputed */
    assert_int_equal(sb_pipeline_even(&sf.pipe, &m, 4, 2, 4, SB_SCHEDULE_1F1B, &err), 0);
    sf.zero = 2;
    sf.recompute[2] = 1; /* logits: a dense (op 1 is the LSTM, never recomputed) */
    assert_int_equal(sb_strategy_save(path, &m, &sf, &err), 0);
    if (sb_strategy_load(path, &m, 4, &back, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(back.pipe.nstages, 2);
    assert_int_equal(back.pipe.microbatches, 4);
    assert_int_equal(back.pipe.schedule, SB_SCHEDULE_1F1B);
    assert_memory_equal(back.pipe.first_op, sf.pipe.first_op, 3 * sizeof(int));
    assert_memory_equal(back.pipe.devices, sf.pipe.devices, 2 * sizeof(int));
    assert_int_equal(back.zero, 2);
    assert_memory_equal(back.recompute, sf.recompute, (size_t)m.nops);
    assert_memory_equal(back.cfg, sf.cfg, (size_t)m.nops * SB_MAX_DIMS * sizeof(int));
    sb_strategy_free(&back);

    /* the index loader refuses what it cannot carry */
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    assert_int_equal(sb_problem_build(&m, 4, &cp, &pb, &err), 0);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    assert_non_null(choice);
    assert_int_equal(sb_strategy_load_choice(path, &pb, choice, &err), -1);
    assert_non_null(strstr(err.msg, "pipeline, ZeRO stage, recomputation or cyclic rank order"));

    /* damaged lines: each names the file and line */
    assert_int_equal(sb_read_file(path, "strategy", 1 << 20, &text, &len, &err), 0);
    struct { const char *from, *to, *says; } cases[] = {
        {"pipeline 2 4 1f1b", "pipeline 2 4 zigzag", "schedule 'zigzag' unknown"},
        {"pipeline 2 4 1f1b", "pipeline 0 4 1f1b", "not a valid count"},
        {"stage 1 2", "stage 1 3", "hold 5 devices in all, not p = 4"},
        {"stage 1 2", "stage 0 2", "numbered 0 .. STAGES-1"},
        {"zero 2", "zero 4", "expected 'zero 0..3'"},
        {"recompute ", "recompute nosuchop #", "expected 'recompute OP'"},
        {"pipeline 2 4 1f1b", "pipeline 2 3 1f1b", "microbatches 3: does not divide"},
        {"op ", "op ", ""},
    };
    for (size_t k = 0; k + 1 < sizeof cases / sizeof cases[0]; k++) {
        char *at = strstr(text, cases[k].from);
        assert_non_null(at);
        FILE *f = fopen(bad, "w");
        assert_non_null(f);
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(cases[k].to, f);
        fputs(at + strlen(cases[k].from), f);
        fclose(f);
        memset(&err, 0, sizeof err);
        assert_int_equal(sb_strategy_load(bad, &m, 4, &back, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        if (!strstr(err.msg, cases[k].says) || !strstr(err.msg, bad))
            fail_msg("case %zu: unclear message: %s", k, err.msg);
    }
    /* a config wider than its stage: op 0 split 4 ways on a 2-device stage */
    char *c0 = strstr(text, "op ");
    assert_non_null(c0);
    char *comma = strchr(c0, ' ');
    comma = strchr(comma + 1, ' ');
    comma = strchr(comma + 1, ' ');
    assert_int_equal(comma[1], '2');
    comma[1] = '4';
    write_text(bad, text);
    assert_int_equal(sb_strategy_load(bad, &m, 4, &back, &err), -1);
    if (!strstr(err.msg, "more than the 2 devices of its stage 0"))
        fail_msg("unclear message: %s", err.msg);
    free(text);
    free(choice);
    sb_problem_free(&pb);
    sb_strategy_free(&sf);
    sb_model_free(&m);
    unlink(path);
    unlink(bad);
    rmdir(dir);
}

/* Writes n bytes of text to path and expects sb_strategy_load to
 * refuse it with `says` and "path:line:" in the message. */
static void expect_refused(const sb_model *m, const char *path, const char *text, size_t n,
                           int line, const char *says)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
    sb_strategy back;
    sb_error err = {0};
    char where[PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%d: ", path, line);
    if (!sb_strategy_load(path, m, 4, &back, &err)) {
        sb_strategy_free(&back);
        fail_msg("expected '%s' at line %d, but the file loaded", says, line);
    }
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, says) || !strstr(err.msg, where))
        fail_msg("expected '%s%s', got: %s", where, says, err.msg);
}

/* Issue 39: each format version refuses the lines it does not define (a
 * version-1 header over pipeline, stage, zero and recompute lines used to
 * run as a plain strategy), every key given once is refused a second time
 * naming the first line, `recompute` of the loss is refused as --recompute
 * refuses it, a NUL byte inside a line and loose numbers are refused. */
static void test_lines_per_version(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_model m;
    load_rnnlm8(&m);
    char dir[] = "/tmp/sb_strategy_lines_XXXXXX", path[PATH_MAX], bad[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/s.strategy", dir);
    snprintf(bad, sizeof bad, "%s/bad.strategy", dir);
    sb_strategy sf;
    assert_int_equal(sb_strategy_init(&sf, &m, 4), 0);
    for (int i = 0; i < m.nops * SB_MAX_DIMS; i++)
        sf.cfg[i] = 1;
    assert_int_equal(sb_pipeline_even(&sf.pipe, &m, 4, 2, 4, SB_SCHEDULE_1F1B, &err), 0);
    sf.zero = 1;
    sf.recompute[2] = 1; /* logits: a dense (op 1 is the LSTM, never recomputed) */
    assert_int_equal(sb_strategy_save(path, &m, &sf, &err), 0);
    char *text;
    size_t len;
    assert_int_equal(sb_read_file(path, "strategy", 1 << 20, &text, &len, &err), 0);
    const char *loss = NULL;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_SOFTMAX_XENT)
            loss = m.ops[i].name;
    assert_non_null(loss);
    char *buf = malloc(len + 4096);
    assert_non_null(buf);
    struct {
        const char *after; /* a line is added after the first line starting so ("" : none) */
        const char *add, *says;
        int v1;            /* the header made version 1 */
    } cases[] = {
        {"", "", "'pipeline' is not a line of strategy format version 1", 1},
        {"zero", "bogus 3", "'bogus' is not a line of strategy format version 2", 0},
        {"zero", "zero 2", "'zero' given twice (first on line ", 0},
        {"stage 1", "pipeline 2 4 1f1b", "'pipeline' given twice (first on line ", 0},
        {"model", "model rnnlm", "'model' given twice (first on line ", 0},
        {"params", "params batch=8", "'params' given twice (first on line ", 0},
        {"p ", "p 4", "'p' given twice (first on line ", 0},
        {"algo", "algo dp", "'algo' given twice (first on line ", 0},
        {"cost", "cost 1", "'cost' given twice (first on line ", 0},
        {"zero", "shardbench-strategy 2", "'shardbench-strategy' is not a line", 0},
        {"zero", "recompute LOSS", "cannot be recomputed", 0},
        {"recompute", "recompute SAME", "given twice (first on line ", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        /* copy line by line, adding the case's line after its anchor */
        size_t o = 0;
        int line = 0, at = 0, added = 0, first_key = 0;
        char key[64] = "";
        sscanf(cases[k].add, "%63s", key);
        for (const char *l = text; *l;) {
            const char *e = strchr(l, '\n');
            size_t ll = e ? (size_t)(e - l) + 1 : strlen(l);
            line++;
            if (line == 1 && cases[k].v1) {
                o += (size_t)sprintf(buf + o, "shardbench-strategy 1\n");
            } else {
                memcpy(buf + o, l, ll);
                o += ll;
            }
            if (!first_key && !strncmp(l, key, strlen(key)) && l[strlen(key)] == ' ')
                first_key = line;
            if (cases[k].v1 && !at && !strncmp(l, "pipeline", 8))
                at = line;
            if (!added && cases[k].after[0] && !strncmp(l, cases[k].after, strlen(cases[k].after))) {
                char add[256];
                snprintf(add, sizeof add, "%s", cases[k].add);
                char *w = strstr(add, "LOSS");
                if (w)
                    snprintf(w, sizeof add - (size_t)(w - add), "%s", loss);
                w = strstr(add, "SAME");
                if (w)
                    snprintf(w, sizeof add - (size_t)(w - add), "%s", m.ops[2].name);
                line++;
                o += (size_t)sprintf(buf + o, "%s\n", add);
                at = line;
                added = 1;
            }
            l += ll;
        }
        char says[256];
        snprintf(says, sizeof says, "%s", cases[k].says);
        if (strstr(says, "first on line"))
            snprintf(says + strlen(says), sizeof says - strlen(says), "%d)", first_key);
        expect_refused(&m, bad, buf, o, at, says);
    }
    /* loose numbers and versions */
    struct {
        const char *from, *to, *says;
    } loose[] = {
        {"shardbench-strategy 2", "shardbench-strategy 2x", "format version '2x' not supported"},
        {"shardbench-strategy 2", "shardbench-strategy 2 3", "not supported"},
        {"\np 4", "\np 4x", "expected 'p DEVICES'"},
        {"\np 4", "\np 0x4", "expected 'p DEVICES'"},
        {"\ncost ", "\ncost 0x1p3 #", "expected 'cost NUMBER'"},
    };
    for (size_t k = 0; k < sizeof loose / sizeof loose[0]; k++) {
        char *hit = strstr(text, loose[k].from);
        assert_non_null(hit);
        size_t pre = (size_t)(hit - text), o = 0;
        memcpy(buf, text, pre);
        o = pre + (size_t)sprintf(buf + pre, "%s", loose[k].to);
        const char *rest = hit + strlen(loose[k].from);
        memcpy(buf + o, rest, strlen(rest));
        o += strlen(rest);
        int line = 1;
        for (const char *c = buf; c < buf + pre + (loose[k].from[0] == '\n'); c++)
            line += *c == '\n';
        expect_refused(&m, bad, buf, o, line, loose[k].says);
    }
    /* a NUL byte inside the zero line */
    char *z = strstr(text, "\nzero 1");
    assert_non_null(z);
    memcpy(buf, text, len);
    buf[z - text + 6] = '\0';
    int zl = 2;
    for (const char *c = text; c < z; c++)
        zl += *c == '\n';
    expect_refused(&m, bad, buf, len, zl, "a NUL byte in the line");
    /* and the file as written loads */
    sb_strategy back;
    if (sb_strategy_load(path, &m, 4, &back, &err))
        fail_msg("%s", err.msg);
    sb_strategy_free(&back);
    free(buf);
    free(text);
    sb_strategy_free(&sf);
    sb_model_free(&m);
    unlink(path);
    unlink(bad);
    rmdir(dir);
}

/* One type for every search's answer: the plain DP's (configs, recomputed
 * ops, precision as a machine priced it) and the full space's (pipeline,
 * ZeRO) give the strategy the files carry, and a precision line survives
 * the round trip while the index loader still takes it. */
static void test_from_searches(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_model m;
    load_rnnlm8(&m);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    assert_int_equal(sb_problem_build(&m, 4, &cp, &pb, &err), 0);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 256};
    sb_result r;
    assert_int_equal(sb_search(&pb, &so, &r, &err), 0);
    sb_strategy st, back;
    assert_int_equal(sb_strategy_from_result(&st, &pb, &r, "pase", &err), 0);
    assert_string_equal(st.algo, "pase");
    assert_true(st.cost == r.total_cost);
    for (int i = 0; i < m.nops; i++)
        assert_memory_equal(sb_strategy_config(&st, i),
                            pb.cfg[i].c + (size_t)r.choice[i] * (size_t)m.ops[i].ndims,
                            (size_t)m.ops[i].ndims * sizeof(int));
    assert_int_equal(sb_strategy_has_extras(&m, &st), 0);
    char dir[] = "/tmp/sb_strategy_type_XXXXXX", path[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/s.strategy", dir);
    /* a precision makes a version-2 file that stays plain: the index
     * loader takes it, and bench prices it again like any plain one */
    st.precision = SB_PREC_BF16;
    assert_int_equal(sb_strategy_has_extras(&m, &st), 0);
    assert_int_equal(sb_strategy_save(path, &m, &st, &err), 0);
    char *text;
    size_t len;
    assert_int_equal(sb_read_file(path, "strategy", 1 << 20, &text, &len, &err), 0);
    assert_non_null(strstr(text, "shardbench-strategy 2\n"));
    assert_non_null(strstr(text, "\nprecision bf16 "));
    free(text);
    if (sb_strategy_load(path, &m, 4, &back, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(back.precision, SB_PREC_BF16);
    assert_memory_equal(back.cfg, st.cfg, (size_t)m.nops * SB_MAX_DIMS * sizeof(int));
    sb_strategy_free(&back);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    assert_non_null(choice);
    assert_int_equal(sb_strategy_load_choice(path, &pb, choice, &err), 0);
    assert_memory_equal(choice, r.choice, (size_t)m.nops * sizeof(int));
    char *json = sb_strategy_json_str(&m, &st, "pase");
    assert_non_null(json);
    assert_non_null(strstr(json, "\"precision\":\"bf16\""));
    free(json);
    sb_strategy_free(&st);
    /* the full space's answer: its pipeline and ZeRO stage carried */
    sb_pipe_opts o;
    sb_pipe_opts_default(&o);
    o.stages = 2;
    o.microbatches = 2;
    sb_pipe_result pr;
    if (sb_pipe_search(&m, 4, &cp, &o, &pr, &err))
        fail_msg("pipe search: %s", err.msg);
    assert_int_equal(sb_strategy_from_pipe(&st, &m, 4, &pr, "full", 0, &err), 0);
    assert_int_equal(st.pipe.nstages, 2);
    assert_int_equal(st.pipe.microbatches, 2);
    assert_int_equal(st.zero, pr.zero);
    assert_memory_equal(st.cfg, pr.cfg, (size_t)m.nops * SB_MAX_DIMS * sizeof(int));
    assert_int_equal(sb_strategy_has_extras(&m, &st), 1);
    assert_int_equal(sb_strategy_save(path, &m, &st, &err), 0);
    if (sb_strategy_load(path, &m, 4, &back, &err))
        fail_msg("%s", err.msg);
    assert_memory_equal(back.pipe.first_op, st.pipe.first_op, 3 * sizeof(int));
    assert_int_equal(back.precision, 0);
    sb_strategy_free(&back);
    sb_strategy_free(&st);
    sb_pipe_result_free(&pr);
    unlink(path);
    rmdir(dir);
    free(choice);
    sb_result_free(&r);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_per_version),
        cmocka_unit_test(test_word),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_special_files),
        cmocka_unit_test(test_version2),
        cmocka_unit_test(test_from_searches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
