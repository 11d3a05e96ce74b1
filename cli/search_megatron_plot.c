/* cli/search_megatron_plot.c: what `search --algo megatron` adds to its
 * JSON for the figures of `plot --search` (and `--plot DIR`): the
 * configuration stage by stage (sb_mt_stage_of, sb_mt_chunk_of:
 * search/megatron_stages.c), the micro-batch count and schedule at the top
 * level, the device's memory. */
#include <jansson.h>

#include "cli.h"
#include "search_plot.h"

/* stage_details of a Megatron configuration: per pipeline rank {stage,
 * devices, layers, first_layer, last_layer (0 when interleaved: see its
 * chunks), forward_seconds, backward_seconds (per micro-batch, all its
 * chunks), inflight_microbatches, chunks: [{first_layer, last_layer,
 * forward_seconds, backward_seconds}] (VPP of them), memory_bytes:
 * {weights, gradients, optimizer, activations, buffers}} */
static json_t *mt_stages(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g)
{
    json_t *arr = json_array();
    for (int s = 0; arr && s < c->pp; s++) {
        sb_mt_stage st;
        sb_mt_stage_of(mm, c, g, s, &st);
        json_t *chunks = json_array();
        for (int k = 0; chunks && k < c->vpp; k++) {
            int first, n;
            double f, b;
            sb_mt_chunk_of(mm, c, g, s, k, &first, &n, &f, &b);
            json_array_append_new(chunks, json_pack("{s:i,s:i,s:o,s:o}", "first_layer", first,
                                                    "last_layer", first + n - 1,
                                                    "forward_seconds", cli_jreal(f),
                                                    "backward_seconds", cli_jreal(b)));
        }
        json_t *mem = json_pack("{s:o,s:o,s:o,s:o,s:o}", "weights", json_real(st.mem_weights),
                                "gradients", json_real(st.mem_grads), "optimizer",
                                json_real(st.mem_optimizer), "activations",
                                json_real(st.mem_activations), "buffers",
                                json_real(st.mem_buffers));
        json_t *o = json_pack(
            "{s:i,s:I,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:o}", "stage", s, "devices",
            (json_int_t)c->tp * c->cp * c->dp, "layers", st.layers, "first_layer",
            st.first_layer, "last_layer", c->vpp > 1 ? 0 : st.first_layer + st.layers - 1,
            "forward_seconds", cli_jreal(st.fwd_s), "backward_seconds", cli_jreal(st.bwd_s),
            "inflight_microbatches", cli_jreal(st.inflight), "chunks", chunks, "memory_bytes",
            mem);
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int cli_mt_details(json_t *j, const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g,
                   double device_bytes, sb_error *err)
{
    long M = mm->global_batch / ((long)c->dp * c->mbs);
    json_t *st = mt_stages(mm, c, g);
    if (!st || json_object_set_new(j, "stage_details", st) ||
        json_object_set_new(j, "microbatches", json_integer(M)) ||
        json_object_set_new(j, "schedule", json_string(c->vpp > 1 ? "interleaved-1f1b" : "1f1b")) ||
        json_object_set_new(j, "device_memory_bytes", json_real(device_bytes)))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    return 0;
}
