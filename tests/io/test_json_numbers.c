/* tests/io/test_json_numbers.c — the runs of 0s of a mask to and from JSON (a
 * completion's tool spans in completions.jsonl and rollout.json): round trips,
 * and lists that are no such runs refused. */
#include <string.h>

#include "io/json_numbers.h"
#include "testutil.h"

/* json_to_zero_runs of text into a mask of n: its result */
static int parse(const char *text, int n, uint8_t *mask, int *runs) {
    json_t *a = json_loads(text, JSON_DECODE_ANY, NULL);
    int rc = json_to_zero_runs(a, mask, n, runs);
    json_decref(a);
    return rc;
}

int main(void) {
    const uint8_t masks[3][8] = {{1, 1, 0, 0, 1, 0, 1, 1}, {0, 0, 1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 1, 1, 1}};
    const char *want[3] = {"[[2,4],[5,6]]", "[[0,2],[7,8]]", "[]"};
    for (int k = 0; k < 3; k++) {
        json_t *j = json_from_zero_runs(masks[k], 8);
        char *s = json_dumps(j, JSON_COMPACT);
        T_CHECK(s && !strcmp(s, want[k]), "mask %d: %s", k, s);
        uint8_t back[8];
        int runs = -1;
        T_CHECK(json_to_zero_runs(j, back, 8, &runs) == 0 && !memcmp(back, masks[k], 8) && runs == (k < 2 ? 2 : 0),
                "mask %d back", k);
        free(s);
        json_decref(j);
    }
    uint8_t m[8];
    int runs;
    const char *bad[] = {"{}", "[[2]]", "[[2,4,5]]", "[[4,2]]", "[[2,2]]", "[[2,9]]", "[[-1,2]]", "[[4,6],[1,2]]",
                         "[[2,4],[4,6]]", "[[1.5,3]]", "[\"a\"]"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        T_CHECK(parse(bad[k], 8, m, &runs) == -1, "refused: %s", bad[k]);
    T_CHECK(parse("[[0,8]]", 8, m, &runs) == 0 && runs == 1 && m[0] == 0 && m[7] == 0, "the whole mask");
    return t_summary("test_json_numbers");
}
