/* reward/reward_names.c — the names of the reward functions reward_new builds,
 * checked before a run starts (reward_spec_check), with a did-you-mean for a
 * misspelt one and a hint for a Python-looking dotted name.
 *
 * Not here: building the functions (reward.c). A spec's kind is read the way
 * reward_new reads it: after an optional NAME= prefix, up to the first ':'. */
#include <ctype.h>
#include <string.h>

#include "core/suggest.h"
#include "core/text.h"
#include "reward/reward_internal.h"

/* Every kind reward_new knows, in the order the message lists them. */
static const char *const reward_kinds[] = {
    "accuracy",        "format",          "tag_count",      "reasoning_steps",
    "cosine",          "repetition_penalty", "length",      "soft_overlong_punishment",
    "accuracy_reward", "think_format_reward", "reward_len", "exact_match",
    "environment_reward", "cmd",          "plugin",
};
#define N_KINDS (int)(sizeof reward_kinds / sizeof reward_kinds[0])

/* open-r1's rewards that run code in a sandbox (E2B, Piston, Morph): not built in. */
static const char *const openr1_code_kinds[] = {"code", "binary_code", "ioi_code", "cf_code", "code_format"};

int reward_unknown_err(const char *spec, const char *kind, GrpoErr *err) {
    char shown_spec[160], shown_kind[96];
    text_escaped(shown_spec, sizeof shown_spec, spec, 120);
    text_escaped(shown_kind, sizeof shown_kind, kind, 60);
    for (size_t i = 0; i < sizeof openr1_code_kinds / sizeof openr1_code_kinds[0]; i++)
        if (!strcmp(kind, openr1_code_kinds[i]))
            return err_set(err, "reward '%s': open-r1's code reward '%s' is not built in; run your own as a cmd: "
                           "reward (docs/reward-protocol.md)", shown_spec, shown_kind);
    const char *near = suggest_name(kind, reward_kinds, N_KINDS);
    if (near)
        return err_set(err, "reward '%s': unknown reward function '%s'; did you mean '%s'?", shown_spec, shown_kind,
                       near);
    const char *dot = strchr(kind, '.');
    if (dot && dot > kind && dot[1])
        return err_set(err, "reward '%s': unknown reward function '%s'; a Python reward function is given as "
                       "FILE.py:FUNCTION (docs/rewards.md)", shown_spec, shown_kind);
    char list[400] = "";
    for (int i = 0; i < N_KINDS; i++) {
        strcat(list, reward_kinds[i]);
        strcat(list, i + 2 < N_KINDS ? ", " : i + 1 < N_KINDS ? " or " : "");
    }
    return err_set(err, "reward '%s': unknown reward function '%s' (expected %s, or a Python function "
                   "FILE.py:FUNCTION or module.function)", shown_spec, shown_kind, list);
}

int reward_spec_check(const char *spec, GrpoErr *err) {
    const char *body = spec;
    size_t id = 0; /* an optional NAME= prefix, as reward_new reads it */
    while (isalnum((unsigned char)spec[id]) || spec[id] == '_' || spec[id] == '-' || spec[id] == '.') id++;
    if (id > 0 && spec[id] == '=') body = spec + id + 1;
    size_t len = strcspn(body, ":");
    char kind[128];
    if (len >= sizeof kind) len = sizeof kind - 1;
    memcpy(kind, body, len);
    kind[len] = 0;
    for (int i = 0; i < N_KINDS; i++)
        if (!strcmp(kind, reward_kinds[i])) return 0;
    /* FILE.py:FUNCTION or module.function is a Python reward function, which reward_new builds or refuses itself */
    if (reward_python_spec(body)) return 0;
    return reward_unknown_err(spec, kind, err);
}

int reward_spec_is(const char *spec, const char *kind) {
    const char *body = spec;
    size_t id = 0;
    while (isalnum((unsigned char)spec[id]) || spec[id] == '_' || spec[id] == '-' || spec[id] == '.') id++;
    if (id > 0 && spec[id] == '=') body = spec + id + 1;
    size_t len = strcspn(body, ":");
    return len == strlen(kind) && !strncmp(body, kind, len);
}
