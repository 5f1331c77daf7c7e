/* tests/gpu/test_gpu_train_tools.c — multi-turn rollouts (tool calls) through `grpo
 * train` on the GPU: the rollouts decode on the device (train_model_gen_device) and
 * the tool loop (tools/tool_loop.c) appends each call's answer to its completion, so
 * the device generator must decode the appended ids (its eos and the tool's turn, one
 * slot's rows) exactly as the host generator does. On the GPU where there is one, on
 * the tests' emulated GPU otherwise (cmd_train run in-process: its gpu_open finds it).
 *
 * The model: tests/fixtures/qwen2's shape (2 layers, C 32) on the byte tokenizer with
 * 260 ids and an untied head, made by `grpo init`, then made a tool caller by
 * tests/cli/tool_model.py (as tests/cli/test_tool_train.sh does): after a newline it
 * writes a whole <tool_call> token with probability 1/2, after the call <|im_end|>;
 * the calc tool answers 42 and the turn appended is 55 ids. tool_model.py makes the
 * network a bigram table (attention outputs zeroed), blind to the appended ids: its
 * attention is put back here (init's output projections x 8, q and k x 10), so the
 * tokens sampled after a turn hang on the turn's ids and their order (without it a
 * device dropping the turn's ids passed every check). Each group's completions are
 * 4, of up to 64 ids (room for one turn and up to 6 of the model's tokens after it),
 * 2 steps at test_gpu_train's step sizes (adam_epsilon 1: a well-conditioned update,
 * whose errors the bound below sees). About a minute on the emulator.
 *
 * Checks, each GPU run against the --use_cpu true --bf16 true run (bf16 products and
 * the same Philox streams on both sides):
 * - the GPU run trains on the device: nothing on stderr under --quiet, and a run
 *   without --quiet says in its plan "generation on the GPU" (and not "trains on the
 *   CPU": under --quiet that line is not written);
 * - completions.jsonl the same bytes (ids, tool_spans, rewards, advantages), holding
 *   at least one tool span (a turn fired: the check cannot pass vacuously), and the
 *   calc tool called as many times (each run's calls logged by the tool);
 * - the weights' moves from the initial ones within test_gpu_train's bound: per tensor
 *   |gpu - cpu| <= 5e-2 max|cpu| + 2e-2 |cpu| per element, 2e-2 in norm (figures
 *   printed); the metrics' keys line by line equal;
 * - tool_workers 0 (the calls inside the decode batch) against the default 4 workers
 *   (the waits overlapped with the other rows' decoding), both on the device: the same
 *   completions and model bytes;
 * - LoRA (--use_peft true, r 4 on every linear layer): completions.jsonl the CPU bf16
 *   run's bytes with tool spans, the calls counted alike. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "gpu/ops.h"
#include "model/model_io.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 47
#include "gpu_test.h"
#include "gpu_test_cli.h"

enum { MAXOUT = 1 << 16 };
static char tmp[256], errs[GPU_TEST_ERRS];

static void write_file(const char *name, const char *text) { gpu_test_write(tmp, name, text); }

/* The tool-calling model in tmp/m, the prompts, the tool's schema and the tool: a
 * calculator that logs each request to the file its argument names. */
static void make_inputs(void) {
    write_file("cfg.json",
               "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 32, "
               "\"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
               "\"num_key_value_heads\": 2, \"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-06, "
               "\"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"max_position_embeddings\": 512, "
               "\"vocab_size\": 260, \"bos_token_id\": null, \"eos_token_id\": 258, \"initializer_range\": 0.02, "
               "\"torch_dtype\": \"float32\"}\n");
    T_CHECK(!gpu_test_run(tmp, errs, cmd_init, "init --config %s/cfg.json --tokenizer assets/byte-tokenizer --seed 1 --output_dir %s/m",
                 tmp, tmp), "init: %s", errs);
    /* tool_model.py zeroes every attention output projection (a bigram table: the next
     * token hangs on the current one alone), which would make the appended ids
     * invisible to the tokens after them; init's projections put back, x 8, make the
     * random tokens hang on the whole context, the tool's turn included, and q and k
     * x 10 make the attention's scores O(1) (init's are ~1e-2: near a plain mean of the
     * context, blind to the order of its ids) */
    write_file("attn.py", "import json, struct, sys\n"
                          "def load(p):\n"
                          "    raw = bytearray(open(p, 'rb').read())\n"
                          "    n = struct.unpack('<Q', raw[:8])[0]\n"
                          "    return raw, json.loads(raw[8:8 + n]), 8 + n\n"
                          "raw0, h0, b0 = load(sys.argv[1]); raw, h, b = load(sys.argv[2])\n"
                          "for k, v in h.items():\n"
                          "    if k.endswith('o_proj.weight'):\n"
                          "        (a, e), (a0, e0) = v['data_offsets'], h0[k]['data_offsets']\n"
                          "        w = struct.unpack('<%df' % ((e - a) // 4), raw0[b0 + a0:b0 + e0])\n"
                          "        raw[b + a:b + e] = struct.pack('<%df' % len(w), *[8 * x for x in w])\n"
                          "    if k.endswith('q_proj.weight') or k.endswith('k_proj.weight'):\n"
                          "        a, e = v['data_offsets']\n"
                          "        w = struct.unpack('<%df' % ((e - a) // 4), raw[b + a:b + e])\n"
                          "        raw[b + a:b + e] = struct.pack('<%df' % len(w), *[10 * x for x in w])\n"
                          "open(sys.argv[2], 'wb').write(raw)\n");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -r '%s/m' '%s/m0' && python3 tests/cli/tool_model.py '%s/m' 0.5 > /dev/null && "
             "python3 '%s/attn.py' '%s/m0/model.safetensors' '%s/m/model.safetensors'", tmp, tmp, tmp, tmp, tmp, tmp);
    T_CHECK(!system(cmd), "%s failed", cmd);
    write_file("d.jsonl", "{\"prompt\": [{\"role\": \"user\", \"content\": \"what is 6*7?\"}]}\n"
                          "{\"prompt\": [{\"role\": \"user\", \"content\": \"and 7*6?\"}]}\n");
    /* the schema short: it is in every prompt, which the emulated GPU prefills a token a step */
    write_file("tools.json", "[{\"type\": \"function\", \"function\": {\"name\": \"calc\"}}]\n");
    write_file("calc.py", "import json, sys\n"
                          "for line in sys.stdin:\n"
                          "    open(sys.argv[1], 'a').write(line)\n"
                          "    req = json.loads(line)\n"
                          "    print(json.dumps({'content': str(eval(req['arguments']['expression'], "
                          "{'__builtins__': {}}))}), flush=True)\n");
}

/* tmp/calc_NAME.sh: the tool command of run NAME, logging its calls to tmp/NAME.log. */
static void write_tool(const char *name) {
    char file[64];
    snprintf(file, sizeof file, "calc_%s.sh", name);
    gpu_test_write_command(tmp, file, "calc.py", name);
}

#define TRAIN "train --model %s/m --dataset %s/d.jsonl --reward_funcs reward_len --num_generations 4 " \
              "--per_device_train_batch_size 4 --max_completion_length 64 --max_steps 2 --learning_rate 5e-2 " \
              "--adam_epsilon 1 --logging_steps 1 --log_completions true --tools %s/tools.json " \
              "--max_tool_calling_iterations 2 --tool_command %s/calc_%s.sh --output_dir %s/%s %s"
#define CPU " --use_cpu true --bf16 true"

/* cmd_train on TRAIN with run NAME's own tool and output directory, options opts. */
static int train(const char *name, const char *opts) {
    write_tool(name);
    return gpu_test_run(tmp, errs, cmd_train, TRAIN, tmp, tmp, tmp, tmp, name, tmp, name, opts);
}

/* ---- comparisons ---- */

/* Lines of tmp/NAME.log: the calls the run's tool answered. */
static int tool_calls(const char *name) {
    char path[400], line[4096];
    snprintf(path, sizeof path, "%s/%s.log", tmp, name);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n++;
    if (f) fclose(f);
    return n;
}

/* The tool spans ([start, end) pairs) in DIR/completions.jsonl, every completion's. */
static int tool_spans(const char *dir) { return gpu_test_turn_spans(tmp, dir, NULL); }

static int same_file(const char *a, const char *b) {
    char pa[400], pb[400];
    snprintf(pa, sizeof pa, "%s/%s", tmp, a), snprintf(pb, sizeof pb, "%s/%s", tmp, b);
    return gpu_test_same_file(pa, pb);
}

/* The rollouts of two runs the same bytes, with tool turns, and the tool called alike. */
static void check_rollouts(const char *what, const char *a, const char *b) {
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/completions.jsonl", a), snprintf(pb, sizeof pb, "%s/completions.jsonl", b);
    int same = same_file(pa, pb), spans_a = tool_spans(a), spans_b = tool_spans(b);
    int calls_a = tool_calls(a), calls_b = tool_calls(b);
    T_CHECK(same, "%s: completions.jsonl differs (%s against %s)", what, b, a);
    T_CHECK(spans_a > 0 && spans_b == spans_a, "%s: %d tool spans in %s, %d in %s (a turn must fire)", what, spans_a, a,
            spans_b, b);
    T_CHECK(calls_a > 0 && calls_b == calls_a, "%s: the tool called %d times by %s, %d by %s", what, calls_a, a,
            calls_b, b);
    if (same)
        printf("  %s: completions.jsonl the same bytes, %d tool spans; the tool called %d and %d times\n", what,
               spans_b, calls_a, calls_b);
}

/* What training moved, GPU against CPU, per tensor, in test_gpu_train's bound; a
 * tensor the CPU did not move (the bound then 0) must stay put on the GPU too. Most
 * must move, or the bound says little. */
static void check_moved(const char *what, const char *cpu_dir, const char *gpu_dir) {
    int n, moved = gpu_test_check_moved(tmp, what, "m", cpu_dir, gpu_dir, 0, &n);
    T_CHECK(moved > n / 2, "%s: the CPU moved %d of %d tensors", what, moved, n);
}

/* ---- the runs ---- */

static void check_full(void) {
    static char ka[MAXOUT], kb[MAXOUT];
    printf("grpo train --tools, full fine-tuning\n");
    T_CHECK(!train("t_cpu", "--quiet" CPU), "cpu: %s", errs);
    T_CHECK(!train("t_gpu", "--quiet"), "gpu: %s", errs);
    T_CHECK(!errs[0], "the GPU run (--quiet) said something (it trains on the device): %s", errs);
    check_rollouts("rollouts with tool turns decoded on the GPU against the CPU's bf16", "t_cpu", "t_gpu");
    check_moved("grpo train --tools", "t_cpu", "t_gpu");
    gpu_test_metric_keys(tmp, "t_cpu", ka, sizeof ka), gpu_test_metric_keys(tmp, "t_gpu", kb, sizeof kb);
    T_CHECK(ka[0] && !strcmp(ka, kb), "metrics.jsonl keys differ:\n cpu %s\n gpu %s", ka, kb);
    /* the calls inside the decode batch, not overlapped: the same samples, the same update */
    T_CHECK(!train("w0_gpu", "--tool_workers 0"), "gpu, tool_workers 0: %s", errs);
    const char *plan = strstr(errs, "generation on the GPU");
    T_CHECK(plan && !strstr(errs, "trains on the CPU"), "the plan does not say the GPU generates: %s", errs);
    if (plan) printf("  the plan: ...%.*s\n", (int)strcspn(plan, "\n"), plan);
    check_rollouts("tool_workers 0 against 4 on the GPU", "t_gpu", "w0_gpu");
    int same = same_file("t_gpu/model.safetensors", "w0_gpu/model.safetensors");
    T_CHECK(same, "tool_workers 0 against 4 on the GPU: the models differ");
    if (same) printf("  tool_workers 0 against 4 on the GPU: the same model bytes\n");
}

static void check_lora(void) {
    const char *lora = "--quiet --use_peft true --lora_r 4 --lora_alpha 8 --lora_dropout 0 "
                       "--lora_target_modules all-linear";
    char opts[400];
    printf("grpo train --tools --use_peft true\n");
    snprintf(opts, sizeof opts, "%s" CPU, lora);
    T_CHECK(!train("l_cpu", opts), "lora, cpu: %s", errs);
    T_CHECK(!train("l_gpu", lora), "lora, gpu: %s", errs);
    T_CHECK(!errs[0], "the GPU LoRA run (--quiet) said something (it trains on the device): %s", errs);
    check_rollouts("LoRA rollouts with tool turns on the GPU against the CPU's bf16", "l_cpu", "l_gpu");
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    gpu_close(&dev); /* the commands open their own */
    check_full();
    check_lora();
}

int main(void) {
    /* a name of its own: not under a glob another test's clean-up may sweep (/tmp/test_gpu_train*) */
    snprintf(tmp, sizeof tmp, "/tmp/grpo_gpu_tools_XXXXXX");
    T_CHECK(mkdtemp(tmp) != NULL, "mkdtemp %s", tmp);
    make_inputs();
    int rc = gpu_test_main("test_gpu_train_tools", check_all);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) printf("could not remove %s\n", tmp);
    return rc;
}
