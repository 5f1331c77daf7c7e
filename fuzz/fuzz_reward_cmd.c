/* fuzz/fuzz_reward_cmd.c — the reply side of the `cmd:` reward protocol
 * (reward/cmd_reply.h), in memory: the input is what a reward process writes
 * back, delivered in reads of varying size (the first byte picks them), framed
 * (one line, nothing after it) and, once a line is complete, decoded as
 * {"rewards": [number or null, ...]} for 1 to 4 completions. The process side
 * (fork, socket, timeouts, the process group) is tested in
 * tests/reward/test_reward_ext.c. */
#include <math.h>

#include "fuzz.h"
#include "reward/cmd_reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t step = 1 + data[0] % 64;
    int n = 1 + (data[0] >> 6);
    data++, size--;
    static CmdReply r; /* reused across inputs, as reward_cmd.c reuses it across requests */
    cmd_reply_reset(&r);
    GrpoErr err;
    int state = 0;
    size_t fed = 0;
    while (fed < size && state == 0) {
        size_t room, k = size - fed < step ? size - fed : step;
        char *at = cmd_reply_space(&r, &room);
        FUZZ_ASSERT(room >= k);
        memcpy(at, data + fed, k);
        fed += k;
        state = cmd_reply_added(&r, k, "fuzz", &err);
    }
    const char *nl = memchr(data, '\n', size);
    if (state == 1) { /* exactly one line, and it is the input's first */
        FUZZ_ASSERT(nl && (size_t)(nl - (const char *)data) == r.line_len && fed == r.line_len + 1);
        double out[4];
        if (cmd_reply_decode(&r, n, out, "fuzz", &err) == 0)
            for (int i = 0; i < n; i++) FUZZ_ASSERT(isnan(out[i]) || isfinite(out[i]));
    } else if (state == 0) {
        FUZZ_ASSERT(!nl); /* no newline anywhere: still waiting */
    } else {
        FUZZ_ASSERT(nl && (size_t)(nl - (const char *)data) + 1 < fed); /* bytes after the line */
    }
    return 0;
}
