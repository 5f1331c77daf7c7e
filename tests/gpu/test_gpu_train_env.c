/* tests/gpu/test_gpu_train_env.c — multi-turn rollouts with an environment
 * (environment_command, docs/environment-protocol.md) through `grpo train` on the GPU:
 * the rollouts decode on the device (train_model_gen_device) and the environment loop
 * (env/env_loop.c) appends its user turn to a completion whose turn ended, so the
 * device generator must decode the appended ids exactly as the host generator does;
 * the environment's reward reaches the loss through environment_reward. On the GPU
 * where there is one, on the tests' emulated GPU otherwise (cmd_train run in-process:
 * its gpu_open finds it).
 *
 * The model and the environment are tests/cli/test_environment.sh's: the byte
 * tokenizer's tiny Qwen3 (C 32, 2 layers), its turns ended by <|im_end|> or one of 7
 * letters (eos_token_id a list, so turns end often), and a guessing game that answers
 * "more N" (reward N/4) until the model's last turn holds four characters whose code
 * % 5 is the row's secret (done, reward 1; test_environment.sh's game wants two, which
 * ends most games at the first turn), each request logged. 2 prompts x 4 completions
 * of up to 128 ids, max_environment_turns 2 (a completion with both turns is required),
 * 2 steps.
 *
 * Checks, the GPU run against the --use_cpu true --bf16 true run (bf16 products and
 * the same Philox streams on both sides):
 * - the GPU run trains on the device: nothing on stderr under --quiet, and without
 *   --quiet its plan says "generation on the GPU";
 * - completions.jsonl the same bytes (ids, the environment's turns as tool_spans, its
 *   rewards, the advantages), holding at least one turn (the check cannot pass
 *   vacuously), and the environment asked the same requests, in the same order;
 * - the weights' moves from the initial ones within test_gpu_train's bound (figures
 *   printed); the metrics' keys equal;
 * - max_environment_turns 0 (asked once with "last", nothing appended) on the GPU:
 *   the CPU run's completions and requests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "gpu/ops.h"
#include "model/model_io.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 53
#include "gpu_test.h"
#include "gpu_test_cli.h"

enum { MAXOUT = 1 << 16 };
static char tmp[256], errs[GPU_TEST_ERRS];

static void write_file(const char *name, const char *text) { gpu_test_write(tmp, name, text); }

/* The model in tmp/m, the prompts and the game. */
static void make_inputs(void) {
    write_file("cfg.json",
               "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 32, "
               "\"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
               "\"num_key_value_heads\": 2, \"head_dim\": 8, \"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-06, "
               "\"rope_theta\": 10000.0, \"tie_word_embeddings\": true, \"attention_bias\": false, "
               "\"max_position_embeddings\": 512, \"vocab_size\": 259, \"bos_token_id\": null, "
               "\"eos_token_id\": [258, 97, 101, 105, 110, 111, 115, 116], \"initializer_range\": 0.02, "
               "\"torch_dtype\": \"float32\"}\n");
    T_CHECK(!gpu_test_run(tmp, errs, cmd_init, "init --config %s/cfg.json --tokenizer assets/byte-tokenizer --seed 1 --output_dir %s/m",
                 tmp, tmp), "init: %s", errs);
    write_file("d.jsonl", "{\"prompt\": [{\"role\": \"user\", \"content\": \"Guess.\"}], \"secret\": 1}\n"
                          "{\"prompt\": [{\"role\": \"user\", \"content\": \"Again?\"}], \"secret\": 3}\n");
    write_file("game.py", "import json, sys\n"
                          "log = open(sys.argv[1], 'a')\n"
                          "for line in sys.stdin:\n"
                          "    log.write(line); log.flush()\n"
                          "    req = json.loads(line)\n"
                          "    said = req['messages'][-1]['content']\n"
                          "    hits = sum(ord(ch) % 5 == int(req['row']['secret']) for ch in said)\n"
                          "    out = {'done': True, 'reward': 1.0} if hits >= 4 else "
                          "{'content': 'more %d' % hits, 'reward': 0.25 * hits}\n"
                          "    print(json.dumps(out), flush=True)\n");
}

/* tmp/game_NAME.sh: run NAME's environment command, logging to tmp/NAME.log. */
static void write_game(const char *name) {
    char file[64];
    snprintf(file, sizeof file, "game_%s.sh", name);
    gpu_test_write_command(tmp, file, "game.py", name);
}

#define TRAIN "train --model %s/m --dataset %s/d.jsonl --reward_funcs environment_reward --num_generations 4 " \
              "--per_device_train_batch_size 4 --max_completion_length 128 --max_steps 2 --learning_rate 5e-2 " \
              "--adam_epsilon 1 --logging_steps 1 --log_completions true --environment_command %s/game_%s.sh " \
              "--output_dir %s/%s %s"
#define CPU " --use_cpu true --bf16 true"

/* cmd_train on TRAIN with run NAME's own environment and output directory, options opts. */
static int train(const char *name, const char *opts) {
    write_game(name);
    return gpu_test_run(tmp, errs, cmd_train, TRAIN, tmp, tmp, tmp, name, tmp, name, opts);
}

/* Two runs' rollouts the same bytes and the environment asked alike; want_turns: a
 * completion with that many turns appended at least (0: none in any). */
static void check_rollouts(const char *what, const char *a, const char *b, int want_turns) {
    char la[400], lb[400];
    snprintf(la, sizeof la, "%s/%s.log", tmp, a), snprintf(lb, sizeof lb, "%s/%s.log", tmp, b);
    int most, same = gpu_test_same_in(tmp, a, b, "completions.jsonl"), n = gpu_test_turn_spans(tmp, b, &most);
    int asked = gpu_test_same_file(la, lb);
    T_CHECK(same, "%s: completions.jsonl differs (%s against %s)", what, b, a);
    T_CHECK(asked, "%s: the environment's requests differ (%s.log against %s.log)", what, b, a);
    T_CHECK(want_turns ? most >= want_turns : n == 0, "%s: %d turns appended in %s, at most %d in a completion "
            "(want %d)", what, n, b, most, want_turns);
    if (same && asked)
        printf("  %s: completions.jsonl and the requests the same bytes, %d turns appended, %d in one completion\n",
               what, n, most);
}

static void check_all(void) {
    static char ka[MAXOUT], kb[MAXOUT];
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    gpu_close(&dev); /* the commands open their own */
    printf("grpo train --environment_command, max_environment_turns 2\n");
    T_CHECK(!train("e_cpu", "--quiet --max_environment_turns 2" CPU), "cpu: %s", errs);
    T_CHECK(!train("e_gpu", "--quiet --max_environment_turns 2"), "gpu: %s", errs);
    T_CHECK(!errs[0], "the GPU run (--quiet) said something (it trains on the device): %s", errs);
    check_rollouts("environment turns decoded on the GPU against the CPU's bf16", "e_cpu", "e_gpu", 2);
    int n, moved = gpu_test_check_moved(tmp, "grpo train --environment_command", "m", "e_cpu", "e_gpu", 0, &n);
    T_CHECK(moved > n / 2, "the CPU moved %d of %d tensors", moved, n);
    gpu_test_metric_keys(tmp, "e_cpu", ka, sizeof ka), gpu_test_metric_keys(tmp, "e_gpu", kb, sizeof kb);
    T_CHECK(ka[0] && !strcmp(ka, kb), "metrics.jsonl keys differ:\n cpu %s\n gpu %s", ka, kb);
    T_CHECK(strstr(ka, "rewards/environment_reward/mean") != NULL, "no environment reward in the metrics: %s", ka);
    printf("max_environment_turns 0 (asked once, \"last\", nothing appended)\n");
    T_CHECK(!train("z_cpu", "--max_environment_turns 0 --max_steps 1" CPU), "cpu, 0 turns: %s", errs);
    T_CHECK(!train("z_gpu", "--max_environment_turns 0 --max_steps 1"), "gpu, 0 turns: %s", errs);
    const char *plan = strstr(errs, "generation on the GPU");
    T_CHECK(plan && !strstr(errs, "trains on the CPU"), "the plan does not say the GPU generates: %s", errs);
    if (plan) printf("  the plan: ...%.*s\n", (int)strcspn(plan, "\n"), plan);
    check_rollouts("no turn appended, on the GPU against the CPU's bf16", "z_cpu", "z_gpu", 0);
}

int main(void) {
    /* a name of its own: not under a glob another test's clean-up may sweep (/tmp/test_gpu_train*) */
    snprintf(tmp, sizeof tmp, "/tmp/grpo_gpu_env_XXXXXX");
    T_CHECK(mkdtemp(tmp) != NULL, "mkdtemp %s", tmp);
    make_inputs();
    int rc = gpu_test_main("test_gpu_train_env", check_all);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) printf("could not remove %s\n", tmp);
    return rc;
}
