/* tests/model/test_lora.c — PEFT LoRA adapters (model/lora.h) on the tiny Qwen3
 * fixture: merging tests/fixtures/lora/adapter (and its use_rslora twin) gives
 * the weights torch computed in float64 as PEFT's merge does
 * (tools/make_lora_fixture.py), the weights it does not adapt untouched; and
 * every refused adapter — another PEFT method, r <= 0, DoRA, biases,
 * modules_to_save, shapes of another model, an embedding adapter, an A without
 * its B and a B without its A — fails with the file and the field named. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "model/model_io.h"
#include "testutil.h"

static void check_merge(const char *adapter, const char *merged) {
    Model m, base;
    LoraAdapter a;
    GrpoErr err = {{0}};
    CHECK(model_load(&m, "tests/fixtures/qwen3", &err) == 0 && model_load(&base, "tests/fixtures/qwen3", &err) == 0);
    T_CHECK(lora_load(&a, adapter, &m, &err) == 0, "%s: %s", adapter, err.msg);
    if (err.msg[0]) goto out;
    T_CHECK(a.n == 8 && a.r == 4, "%s: %d pairs, r %d", adapter, a.n, a.r);
    T_CHECK(lora_merge(&a, &m, &err) == 0, "%s", err.msg);
    StFile f;
    CHECK(st_open(&f, merged, &err) == 0);
    int adapted = 0;
    double worst = 0;
    for (int i = 0; i < m.table.n; i++) {
        const ParamEntry *e = &m.table.entries[i];
        const float *got = m.params + e->offset, *orig = base.params + e->offset;
        const StTensor *t = st_find(&f, e->name);
        if (!t) { /* not adapted: bit for bit the base */
            T_CHECK(!memcmp(got, orig, sizeof(float) * e->numel), "%s: %s changed", adapter, e->name);
            continue;
        }
        adapted++;
        double *want = malloc(sizeof(double) * e->numel);
        CHECK(st_read_f64(&f, t, want, &err) == 0);
        for (size_t k = 0; k < e->numel; k++) {
            double d = fabs(got[k] - want[k]) / (1e-3 + fabs(want[k]));
            if (d > worst) worst = d;
        }
        /* the merge really moved the weight (the fixture's B A is not tiny) */
        double moved = 0;
        for (size_t k = 0; k < e->numel; k++) moved = fmax(moved, fabs(want[k] - orig[k]));
        T_CHECK(moved > 1e-3, "%s: %s: the reference merge changes nothing", adapter, e->name);
        free(want);
    }
    T_CHECK(adapted == 8, "%s: %d adapted weights in the reference", adapter, adapted);
    T_CHECK(worst < 1e-5, "%s: merged weights vs torch float64: worst relative error %.3g", adapter, worst);
    st_close(&f);
    lora_free(&a);
out:
    model_free(&m);
    model_free(&base);
}

static char tmp[] = "/tmp/grpo-lora-XXXXXX";

/* A copy of the fixture adapter with edit applied to its config (a JSON
 * fragment merged in) and tensors optionally renamed/dropped by python. */
static const char *variant(const char *name, const char *config_edit, const char *tensor_edit) {
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 - '%s' <<'PY'\n"
             "import json, os, struct, sys\n"
             "d = sys.argv[1]; os.makedirs(d, exist_ok=True)\n"
             "c = json.load(open('tests/fixtures/lora/adapter/adapter_config.json')); c.update(json.loads('%s'))\n"
             "json.dump(c, open(d + '/adapter_config.json', 'w'))\n"
             "b = open('tests/fixtures/lora/adapter/adapter_model.safetensors', 'rb').read()\n"
             "n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); data = b[8 + n:]\n"
             "%s\n"
             "hj = json.dumps(h).encode(); hj += b' ' * (-len(hj) %% 8)\n"
             "open(d + '/adapter_model.safetensors', 'wb').write(struct.pack('<Q', len(hj)) + hj + data)\n"
             "PY",
             dir, config_edit, tensor_edit ? tensor_edit : "");
    CHECK(system(cmd) == 0);
    return dir;
}

static void expect_refused(const char *dir, const char *want) {
    Model m;
    LoraAdapter a;
    GrpoErr err = {{0}};
    CHECK(model_load(&m, "tests/fixtures/qwen3", &err) == 0);
    int rc = lora_load(&a, dir, &m, &err);
    T_CHECK(rc == -1 && strstr(err.msg, want) && strstr(err.msg, dir), "%s: rc %d, '%s' (want '%s')", dir, rc, err.msg,
            want);
    if (rc == 0) lora_free(&a);
    model_free(&m);
}

static void expect_loaded(const char *dir) {
    Model m;
    LoraAdapter a;
    GrpoErr err = {{0}};
    CHECK(model_load(&m, "tests/fixtures/qwen3", &err) == 0);
    int rc = lora_load(&a, dir, &m, &err);
    T_CHECK(rc == 0 && a.n == 8, "%s: rc %d, '%s'", dir, rc, err.msg);
    if (rc == 0) lora_free(&a);
    model_free(&m);
}

/* target_modules as PEFT matches it: names or their last dotted parts, a regular
 * expression over the whole name, null for q_proj v_proj; exclude_modules taken off */
static void test_targets(void) {
    expect_loaded(variant("suffix", "{\"target_modules\": [\"self_attn.q_proj\", \"v_proj\", \"mlp.gate_proj\", "
                                    "\"down_proj\", \"never_proj\"]}", NULL));
    expect_loaded(variant("regex", "{\"target_modules\": \".*[.](q|v|gate|down)_proj\"}", NULL));
    expect_loaded(variant("tasknull", "{\"task_type\": null}", NULL));
    expect_refused(variant("regex_part", "{\"target_modules\": \"q_proj|v_proj|gate_proj|down_proj\"}", NULL),
                   "holds tensors for model.layers.0.self_attn.q_proj, which target_modules");
    expect_refused(variant("foo", "{\"target_modules\": [\"foo_proj\"]}", NULL),
                   "which target_modules [\"foo_proj\"] does not name");
    expect_refused(variant("default", "{\"target_modules\": null}", NULL),
                   "holds tensors for model.layers.0.mlp.gate_proj, which target_modules null (PEFT's default");
    expect_refused(variant("k", "{\"target_modules\": [\"q_proj\", \"k_proj\", \"v_proj\", \"gate_proj\", "
                               "\"down_proj\"]}", NULL),
                   "names model.layers.0.self_attn.k_proj, which has no lora_A/lora_B tensors");
    expect_refused(variant("excl", "{\"exclude_modules\": \".*[.]1[.].*\"}", NULL),
                   "holds tensors for model.layers.1.self_attn.q_proj, which target_modules");
    expect_refused(variant("seqcls", "{\"task_type\": \"SEQ_CLS\"}", NULL),
                   "task_type \"SEQ_CLS\": expected \"CAUSAL_LM\" or null");
    expect_refused(variant("nan", "{}", "import math\n"
                                         "k = 'base_model.model.model.layers.1.mlp.down_proj.lora_B.weight'\n"
                                         "s = h[k]['data_offsets'][0]\n"
                                         "data = data[:s + 8] + struct.pack('<f', math.nan) + data[s + 12:]"),
                   "down_proj.lora_B.weight' holds a NaN or Inf (value 2 of");
    expect_refused(variant("alpha", "{\"lora_alpha\": 1e300}", NULL), "lora_alpha 1e+300 gives the scaling 2.5e+299");
}

static void test_refused(void) {
    const char *q0 = "base_model.model.model.layers.0.self_attn.q_proj";
    char edit[512];
    expect_refused(variant("ia3", "{\"peft_type\": \"IA3\"}", NULL), "adapter_config.json: peft_type must be \"LORA\"");
    expect_refused(variant("r0", "{\"r\": 0}", NULL), "adapter_config.json: r must be an integer in [1, 65536]");
    expect_refused(variant("dora", "{\"use_dora\": true}", NULL), "adapter_config.json: use_dora true is not supported");
    expect_refused(variant("bias", "{\"bias\": \"all\"}", NULL), "adapter_config.json: bias \"all\" is not supported");
    expect_refused(variant("save", "{\"modules_to_save\": [\"lm_head\"]}", NULL), "modules_to_save [\"lm_head\"] is not supported");
    expect_refused(variant("alpha", "{\"lora_alpha\": \"big\"}", NULL), "lora_alpha must be a number");
    /* r 8 in the config, tensors of r 4 */
    expect_refused(variant("r8", "{\"r\": 8}", NULL), "lora_A.weight' has shape [4, 32]; r 8 and");
    snprintf(edit, sizeof edit, "h['%s.lora_B.weight'.replace('q_proj', 'k_proj_x')] = h.pop('%s.lora_B.weight')", q0, q0);
    expect_refused(variant("noB", "{}", edit), "has no 'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight'");
    snprintf(edit, sizeof edit, "h['%s.lora_A.weight'.replace('q_proj', 'q_projx')] = h.pop('%s.lora_A.weight')", q0, q0);
    expect_refused(variant("noA", "{}", edit), "adapts 'model.layers.0.self_attn.q_projx'");
    snprintf(edit, sizeof edit,
             "h['base_model.model.model.embed_tokens.lora_A.weight'] = h.pop('%s.lora_A.weight'); "
             "h['base_model.model.model.embed_tokens.lora_B.weight'] = h.pop('%s.lora_B.weight')", q0, q0);
    expect_refused(variant("embed", "{}", edit), "which is not a linear layer of the model");
    snprintf(edit, sizeof edit, "h['something_else'] = h.pop('%s.lora_A.weight')", q0);
    expect_refused(variant("stranger", "{}", edit), "tensor 'something_else' is not a LoRA A or B matrix");
    /* an adapter of another model: the llama fixture's shapes differ */
    Model llama;
    LoraAdapter a;
    GrpoErr err = {{0}};
    CHECK(model_load(&llama, "tests/fixtures/llama", &err) == 0);
    int rc = lora_load(&a, "tests/fixtures/lora/adapter", &llama, &err);
    T_CHECK(rc == -1 && strstr(err.msg, "lora_B.weight' has shape [48, 4]; r 4 and model.layers.0.self_attn.q_proj.weight "
                                        "[32, 32] imply [32, 4]"),
            "another model's adapter: '%s'", err.msg);
    model_free(&llama);
    expect_refused(tmp, "adapter_config.json: cannot open");
}

int main(void) {
    check_merge("tests/fixtures/lora/adapter", "tests/fixtures/lora/merged.safetensors");
    check_merge("tests/fixtures/lora/adapter_rslora", "tests/fixtures/lora/merged_rslora.safetensors");
    CHECK(mkdtemp(tmp));
    test_refused();
    test_targets();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return t_summary("test_lora");
}
