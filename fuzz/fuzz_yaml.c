/* fuzz/fuzz_yaml.c — cli/args.c's YAML option files: the input is the file of
 * `grpo train --config FILE`, read by the real args_parse over the real option
 * table of `grpo train` (grpo/config.c and the groups it shares: every option
 * type, lists, choices, ranges), then checked by train_config_check as
 * cmd_train does. Usage errors go to stderr (libFuzzer's -close_fd_mask=2 hides
 * them). */
#include "cli/args.h"
#include "fuzz.h"
#include "grpo/trainer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    TrainConfig c;
    train_config_default(&c);
    OptGroup g[TRAIN_CONFIG_N_GROUPS];
    train_config_groups(g);
    char *argv[] = {"train", "--config", (char *)path, NULL};
    int rc = args_parse("train", "--config FILE", 3, argv, g, TRAIN_CONFIG_N_GROUPS, &c);
    GrpoErr err;
    if (rc == 0) (void)train_config_check(&c, &err);
    args_free();
    return 0;
}
