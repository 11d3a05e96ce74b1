/* tests/unit/test_hf.c: cmocka tests of the Hugging Face config reader
 * (models/hf/) and of sb_model_param_count (models/params.c).
 *
 * Every config of tests/data/hf loads through `hf:` (the sb_model_load
 * hook) and counts the parameters and active parameters that expected.tsv
 * gives (refcount.py: transformers' modules listed from the published
 * architectures, independent of the reader); the settings take the config's
 * keys and change the count as the formula says; the notes name what is
 * approximated and ignored; bad configs (not JSON, duplicate keys, a string
 * where a number goes, negative and zero sizes, heads not dividing hidden,
 * kv heads not dividing heads, an unknown architecture, an unknown
 * rope_scaling type, a folder without config.json) fail with SB_EXIT_INPUT
 * naming the key; `tie` refuses what is not an embedding's table, and a
 * tied head's copy holds no optimizer state, is never ZeRO-sliced, and
 * costs its two relayouts a step (cost/memory.c, cost/terms.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/cost.h"
#include "shardbench/hf.h"
#include "shardbench/memory.h"
#include "shardbench/model.h"

static void hf_path(char *buf, size_t n, const char *name)
{
    int len = snprintf(buf, n, "hf:%s/tests/data/hf/%s", SB_SOURCE_DIR, name);
    assert_true(len > 0 && (size_t)len < n);
}

/* Every row of expected.tsv: the model loads and counts what it says. */
static void test_counts(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/hf/expected.tsv", SB_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512], name[128];
    long long want, want_active;
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        assert_int_equal(sscanf(line, "%127s %lld %lld", name, &want, &want_active), 3);
        char m_path[1100];
        hf_path(m_path, sizeof m_path, name);
        sb_model m;
        sb_error err = {0};
        if (sb_model_load(m_path, NULL, 0, &m, &err))
            fail_msg("%s: %s", name, err.msg);
        int64_t active, total = sb_model_param_count(&m, &active);
        if (total != want || active != want_active)
            fail_msg("%s: %lld parameters (%lld active), transformers gives %lld (%lld)", name,
                     (long long)total, (long long)active, want, want_active);
        sb_model_free(&m);
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, 15);
}

static int64_t count_with(const char *name, const sb_setting *set, int nset)
{
    char p[1100];
    hf_path(p, sizeof p, name);
    sb_model m;
    sb_error err = {0};
    if (sb_model_load(p, set, nset, &m, &err))
        fail_msg("%s: %s", name, err.msg);
    int64_t n = sb_model_param_count(&m, NULL);
    sb_model_free(&m);
    return n;
}

/* --set takes the config's keys (GPT-2's own n_layer ...): Llama-3.2-1B at
 * 2 layers is the embedding (tied) + 2 layers + the final norm. */
static void test_settings(void **state)
{
    (void)state;
    sb_setting s[2] = {{"num_hidden_layers", 2}, {"seq", 128}};
    int64_t layer = 2048LL * 2048 * 2 + 2048LL * 512 * 2 + 3LL * 2048 * 8192 + 2 * 2048;
    assert_int_equal(count_with("llama-3.2-1b", s, 2), 128256LL * 2048 + 2 * layer + 2048);
    sb_setting g[1] = {{"n_layer", 1}};
    int64_t gl = 4 * 768 + 768LL * 2304 + 2304 + 768LL * 768 + 768 + 2 * 768LL * 3072 + 3072 + 768;
    assert_int_equal(count_with("gpt2", g, 1), 50257LL * 768 + 1024LL * 768 + gl + 2 * 768);
    sb_setting ga[1] = {{"num_hidden_layers", 1}}; /* transformers' attribute_map */
    assert_int_equal(count_with("gpt2", ga, 1), 50257LL * 768 + 1024LL * 768 + gl + 2 * 768);
}

/* A config held in memory: 0 or the error's message. */
static int from_json(const char *json, sb_error *err, sb_hf_info *info)
{
    char *text = NULL;
    size_t len;
    int rc = sb_hf_text_from_json(json, strlen(json), "cfg.json", NULL, 0, &text, &len, info, err);
    free(text);
    return rc;
}

#define LLAMA_HEAD "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, "
#define LLAMA_REST "\"num_hidden_layers\": 2, \"intermediate_size\": 64"

static void expect_refused(const char *json, const char *phrase)
{
    sb_error err = {0};
    assert_int_equal(from_json(json, &err, NULL), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, phrase) || !strstr(err.msg, "cfg.json"))
        fail_msg("expected '%s' and the file in the message, got: %s", phrase, err.msg);
}

static void test_bad_configs(void **state)
{
    (void)state;
    expect_refused("{\"hidden_size\": 1", "not a JSON config");
    expect_refused("[1, 2]", "not a JSON object");
    expect_refused(LLAMA_HEAD "\"hidden_size\": 32, \"hidden_size\": 64}", "duplicate");
    expect_refused(LLAMA_HEAD "\"hidden_size\": \"4096\", \"num_attention_heads\": 4, " LLAMA_REST "}",
                   "key 'hidden_size': expected an integer, found a string");
    expect_refused(LLAMA_HEAD "\"hidden_size\": -32, \"num_attention_heads\": 4, " LLAMA_REST "}",
                   "key 'hidden_size': -32: must be at least 1");
    expect_refused(LLAMA_HEAD "\"hidden_size\": 32, \"num_attention_heads\": 0, " LLAMA_REST "}",
                   "key 'num_attention_heads'");
    expect_refused(LLAMA_HEAD "\"hidden_size\": 30, \"num_attention_heads\": 4, " LLAMA_REST "}",
                   "key 'num_attention_heads': 4 does not divide hidden_size 30");
    expect_refused(LLAMA_HEAD "\"hidden_size\": 32, \"num_attention_heads\": 4, "
                   "\"num_key_value_heads\": 3, " LLAMA_REST "}",
                   "key 'num_key_value_heads': 3 does not divide");
    expect_refused(LLAMA_HEAD "\"hidden_size\": 32, \"num_attention_heads\": 4, " LLAMA_REST ", "
                   "\"rope_scaling\": {\"rope_type\": \"longrope\"}}",
                   "key 'rope_scaling': type 'longrope' is not modelled");
    expect_refused(LLAMA_HEAD "\"hidden_size\": 32, \"num_attention_heads\": 4, " LLAMA_REST ", "
                   "\"hidden_act\": \"relu\"}", "key 'hidden_act': 'relu'");
    expect_refused(LLAMA_HEAD "\"hidden_size\": 32, \"num_attention_heads\": 4}",
                   "key 'num_hidden_layers': missing");
    expect_refused("{\"architectures\": [\"BertForMaskedLM\"], \"model_type\": \"bert\", "
                   "\"hidden_size\": 32}", "architecture 'BertForMaskedLM' (model_type bert)");
    expect_refused("{\"hidden_size\": 32}", "keys read: architectures, model_type");
    expect_refused("{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"gpt2\"}",
                   "key 'model_type': 'gpt2' but architectures says LlamaForCausalLM");
    expect_refused("{\"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 10, \"n_embd\": "
                   "30, \"n_layer\": 1, \"n_head\": 4}", "key 'n_head': 4 does not divide n_embd 30");
    expect_refused("{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"vocab_size\": 10, "
                   "\"hidden_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, "
                   "\"intermediate_size\": 8, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2, "
                   "\"moe_intermediate_size\": 8, \"kv_lora_rank\": 8, \"qk_nope_head_dim\": 4, "
                   "\"qk_rope_head_dim\": 4, \"v_head_dim\": 4, \"attention_bias\": true}",
                   "key 'attention_bias': true");
    sb_model m;
    sb_error err = {0};
    assert_int_equal(sb_model_load("hf:/nonexistent/x", NULL, 0, &m, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    memset(&err, 0, sizeof err);
    char dir[1024];
    snprintf(dir, sizeof dir, "hf:%s/tests/data", SB_SOURCE_DIR);
    assert_int_equal(sb_model_load(dir, NULL, 0, &m, &err), -1);
    assert_non_null(strstr(err.msg, "without a config.json"));
}

/* The notes: what is approximated (Mistral's window at seq 8192, not at
 * seq 4096) and the keys not read, each once. */
static void test_notes(void **state)
{
    (void)state;
    char p[1100];
    hf_path(p, sizeof p, "mistral-7b-v0.1");
    sb_hf_info info;
    sb_error err = {0};
    char *text;
    size_t len;
    assert_int_equal(sb_hf_to_text(p, NULL, 0, &text, &len, &info, &err), 0);
    free(text);
    assert_non_null(strstr(info.approx, "sliding_window=4096 < seq=8192"));
    assert_string_equal(info.ignored, "bos_token_id; eos_token_id; initializer_range; "
                                      "torch_dtype; transformers_version; use_cache");
    assert_non_null(strstr(info.defaults, "seq=8192, batch=512"));
    sb_setting s = {"seq", 4096};
    assert_int_equal(sb_hf_to_text(p, &s, 1, &text, &len, &info, &err), 0);
    free(text);
    assert_null(strstr(info.approx, "sliding_window"));
    assert_non_null(strstr(info.defaults, "seq=4096, batch=1024"));
}

/* The model's softcap ops: count and their caps (at most two distinct). */
static int softcaps(const char *json, const sb_setting *set, int nset, double *caps)
{
    char *text = NULL;
    size_t len;
    sb_hf_info info;
    sb_error err = {0};
    sb_model m;
    if (sb_hf_text_from_json(json, strlen(json), "cfg.json", set, nset, &text, &len, &info, &err)
        || sb_hf_parse_text(text, len, &info, set, nset, &m, &err))
        fail_msg("%s", err.msg);
    free(text);
    int n = 0;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_SOFTCAP) {
            caps[n > 0] = m.ops[i].cap;
            n++;
        }
    sb_model_free(&m);
    return n;
}

#define GEMMA2 "{\"architectures\": [\"Gemma2ForCausalLM\"], \"vocab_size\": 64, \"hidden_size\": " \
               "32, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": " \
               "48, \"head_dim\": 8, \"sliding_window\": 4, \"max_position_embeddings\": 16"

/* Gemma 2's soft-caps: one softcap on each layer's scores and one on the
 * head's logits, at the config's values, Gemma2Config's 50 and 30 when
 * absent, none when null; --set replaces them (0 drops one); a cap that is
 * not a positive whole number is refused naming the key. */
static void test_gemma2_softcap(void **state)
{
    (void)state;
    double caps[2];
    assert_int_equal(softcaps(GEMMA2 ", \"attn_logit_softcapping\": 20.0, "
                              "\"final_logit_softcapping\": 10}", NULL, 0, caps), 3);
    assert_true(caps[0] == 20.0 && caps[1] == 10.0); /* a layer's first, the head's last */
    assert_int_equal(softcaps(GEMMA2 "}", NULL, 0, caps), 3);
    assert_true(caps[0] == 50.0 && caps[1] == 30.0);
    assert_int_equal(softcaps(GEMMA2 ", \"attn_logit_softcapping\": null, "
                              "\"final_logit_softcapping\": null}", NULL, 0, caps), 0);
    sb_setting set[2] = {{"attn_logit_softcapping", 3}, {"final_logit_softcapping", 0}};
    assert_int_equal(softcaps(GEMMA2 "}", set, 2, caps), 2);
    assert_true(caps[0] == 3.0 && caps[1] == 3.0);
    expect_refused(GEMMA2 ", \"attn_logit_softcapping\": 50.5}",
                   "key 'attn_logit_softcapping': 50.5: a soft-cap must be a whole number");
    expect_refused(GEMMA2 ", \"final_logit_softcapping\": -30}",
                   "key 'final_logit_softcapping': -30");
    expect_refused(GEMMA2 ", \"final_logit_softcapping\": \"30\"}",
                   "key 'final_logit_softcapping': expected a number, found a string");
    sb_hf_info info;
    sb_error err = {0};
    assert_int_equal(from_json(GEMMA2 "}", &err, &info), 0);
    assert_null(strstr(info.approx, "soft-capping"));
}

static void expect_parse_error(const char *text, const char *phrase)
{
    sb_model m;
    sb_error err = {0};
    assert_int_equal(sb_model_parse(text, strlen(text), "t.model", NULL, 0, &m, &err), -1);
    if (!strstr(err.msg, phrase))
        fail_msg("expected '%s', got: %s", phrase, err.msg);
}

/* `tie W = E`: once per weight, only an embedding's table transposed. */
static void test_tie(void **state)
{
    (void)state;
    const char *base = "input t[b=2, s=3]\nx = embedding(t, vocab=10, size=4, dim=e)\n";
    char text[512];
    snprintf(text, sizeof text, "%sweight w[e=4, v=10]\ntie w = x\n"
             "l = einsum(\"b s e, e v -> b s v\", x, w)\nloss = softmax_xent(l)\n", base);
    sb_model m;
    sb_error err = {0};
    assert_int_equal(sb_model_parse(text, strlen(text), "t.model", NULL, 0, &m, &err), 0);
    assert_int_equal(sb_model_param_count(&m, NULL), 40);
    /* the head's copy (op 1, dims b s v e) under data parallelism over b:
     * its 40 values whole under ZeRO 3, no Adam state, its gradient
     * sliced 2 ways (reduce-scattered in rows) under ZeRO 2 and 3, whole
     * under ZeRO 1; the same head untied has the state and is sliced */
    const int dp[4] = {2, 1, 1, 1};
    sb_mem tied, own;
    sb_op_memory_zero(&m, &m.ops[1], dp, SB_OPTIM_ADAM, 3, &tied);
    assert_true(tied.optimizer == 0.0);
    assert_true(tied.weights == 40.0 * 4 && tied.weight_grads == 20.0 * 4);
    sb_op_memory_zero(&m, &m.ops[1], dp, SB_OPTIM_ADAM, 2, &tied);
    assert_true(tied.weights == 40.0 * 4 && tied.weight_grads == 20.0 * 4);
    sb_op_memory_zero(&m, &m.ops[1], dp, SB_OPTIM_ADAM, 1, &tied);
    assert_true(tied.weights == 40.0 * 4 && tied.weight_grads == 40.0 * 4);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    assert_true(sb_tied_cost(&m, &m.ops[1], dp, &cp) > 0.0);
    cp.wgrad_free = 1;
    assert_true(sb_tied_cost(&m, &m.ops[1], dp, &cp) == 0.0);
    sb_model_free(&m);
    snprintf(text, sizeof text, "%sweight w[e=4, v=10]\n"
             "l = einsum(\"b s e, e v -> b s v\", x, w)\nloss = softmax_xent(l)\n", base);
    assert_int_equal(sb_model_parse(text, strlen(text), "t.model", NULL, 0, &m, &err), 0);
    assert_int_equal(sb_model_param_count(&m, NULL), 80);
    sb_op_memory_zero(&m, &m.ops[1], dp, SB_OPTIM_ADAM, 3, &own);
    assert_true(own.optimizer > 0.0 && own.weights == 20.0 * 4);
    cp.wgrad_free = 0;
    assert_true(sb_tied_cost(&m, &m.ops[1], dp, &cp) == 0.0);
    sb_model_free(&m);
    snprintf(text, sizeof text, "%sweight w[e=4, v=9]\ntie w = x\n", base);
    expect_parse_error(text, "must be [4, 10]");
    snprintf(text, sizeof text, "%sweight w[e=4, v=10]\ntie x = w\n", base);
    expect_parse_error(text, "'x' is not a declared weight");
    snprintf(text, sizeof text, "%sweight w[e=4, v=10]\ntie w = x\ntie w = x\n", base);
    expect_parse_error(text, "tied already");
    snprintf(text, sizeof text, "%sweight w[e=4, v=10]\ny = add(x, x)\ntie w = y\n", base);
    expect_parse_error(text, "not the output of an embedding");
}

int main(void)
{
    setenv("SHARDBENCH_HF_QUIET", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),      cmocka_unit_test(test_settings),
        cmocka_unit_test(test_bad_configs), cmocka_unit_test(test_notes),
        cmocka_unit_test(test_tie),         cmocka_unit_test(test_gemma2_softcap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
