/* fuzz/fuzz_reward_cmd.c — reward/reward_cmd.c's reply path: the input is what a
 * `cmd:` reward process writes back (docs/reward-protocol.md) — read through
 * the real socketpair, split at the first newline, decoded and checked
 * ({"rewards": [number or null, ...]}, one per completion). reward_cmd.c has no
 * in-memory entry point, so every input starts a real child: build-fuzz's
 * fuzz/reward_reply, which reads the request and writes the input back
 * verbatim. That costs a fork and exec per input (hundreds per second, not
 * thousands); the reply path is small, so it is covered within seconds. */
#include "fuzz.h"
#include "reward/reward.h"

#ifndef FUZZ_REWARD_REPLY
#define FUZZ_REWARD_REPLY FUZZ_ROOT "/build-fuzz/fuzz/reward_reply"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (access(FUZZ_REWARD_REPLY, X_OK)) {
        fprintf(stderr, "fuzz_reward_cmd: %s is not built (make fuzz-build)\n", FUZZ_REWARD_REPLY);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    char spec[512];
    snprintf(spec, sizeof spec, "cmd:exec '%s' '%s'", FUZZ_REWARD_REPLY, path);
    RewardOptions opt = {.timeout_s = 10};
    RewardFunc *f = NULL;
    GrpoErr err;
    if (reward_new(&f, spec, &opt, &err)) {
        fprintf(stderr, "fuzz_reward_cmd: %s\n", err.msg);
        abort();
    }
    json_t *prompt = json_string("What is 3+4?");
    json_t *row = json_pack("{s:O, s:i}", "prompt", prompt, "answer", 7);
    int32_t ids[3] = {1122, 374, 13};
    RewardItem items[2] = {
        {prompt, "What is 3+4?", "It is 7.", ids, 3, row, "data.jsonl", 1},
        {prompt, "What is 3+4?", "\\boxed{7}", ids, 2, row, "data.jsonl", 1},
    };
    RewardBatch b = {items, 2, 5};
    double out[2] = {0, 0};
    (void)reward_compute(f, &b, out, &err);
    reward_free(f);
    json_decref(row);
    json_decref(prompt);
    return 0;
}
