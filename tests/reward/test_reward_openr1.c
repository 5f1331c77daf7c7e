/* tests/reward/test_reward_openr1.c — open-r1's reward functions by their
 * open-r1 names against values worked out from open_r1/rewards.py's formulas
 * and the expectations of its tests/test_rewards.py: accuracy (math verified,
 * no value without a gold), format (re.match with DOTALL | MULTILINE),
 * tag_count (str.count, not overlapping), reasoning_steps (re.findall, Unicode
 * digits), repetition_penalty (lower().split() n-grams), cosine and length
 * (characters; an unparseable gold skipped as open-r1 does), soft overlong
 * punishment (tokens); the parameters as options with open-r1's defaults; the
 * log names; unknown names with a did-you-mean. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reward/reward.h"
#include "testutil.h"

static RewardFunc *make_with(const char *spec, const OpenR1Params *p) {
    RewardFunc *f = NULL;
    GrpoErr err = {{0}};
    RewardOptions opt = {.timeout_s = 0, .openr1 = p};
    if (reward_new(&f, spec, &opt, &err)) {
        fprintf(stderr, "reward_new(%s): %s\n", spec, err.msg);
        return NULL;
    }
    return f;
}

/* Scores n completions, each with {"solution": solutions[i]} (NULL: the JSON
 * null; no rows at all when solutions is NULL) and n_ids[i] token ids. */
static int score(RewardFunc *f, const char *const *completions, const char *const *solutions, const int *n_ids,
                 int n, double *out, GrpoErr *err) {
    RewardItem items[16];
    json_t *rows[16] = {0};
    memset(items, 0, sizeof items);
    for (int i = 0; i < n; i++) {
        items[i].completion = completions[i];
        if (solutions) {
            rows[i] = json_object();
            json_object_set_new(rows[i], "solution", solutions[i] ? json_string(solutions[i]) : json_null());
        }
        items[i].row = rows[i];
        items[i].n_completion_ids = n_ids ? n_ids[i] : 0;
        items[i].file = "d.jsonl";
        items[i].line = i + 1;
    }
    RewardBatch b = {.items = items, .n = n};
    int rc = reward_compute(f, &b, out, err);
    for (int i = 0; i < n; i++) json_decref(rows[i]);
    return rc;
}

/* One completion's reward (solution may be NULL: no row). */
static double one(const char *spec, const OpenR1Params *p, const char *completion, const char *solution) {
    RewardFunc *f = make_with(spec, p);
    if (!f) return -999;
    double out = -999;
    GrpoErr err = {{0}};
    const char *sols[1] = {solution};
    if (score(f, &completion, solution ? sols : NULL, NULL, 1, &out, &err)) fprintf(stderr, "%s: %s\n", spec, err.msg);
    reward_free(f);
    return out;
}

static char *padded(const char *s, int chars) {
    size_t n = strlen(s), total = (size_t)chars > n ? (size_t)chars : n;
    char *out = malloc(total + 1);
    memcpy(out, s, n);
    memset(out + n, ' ', total - n);
    out[total] = 0;
    return out;
}

#define RIGHT "\\boxed{\\frac{63}{400}}" /* 22 characters */
#define WRONG "\\boxed{\\frac{64}{400}}"
#define GOLD "\\frac{63}{400}"

static void test_accuracy(void) {
    RewardFunc *f = make_with("accuracy", NULL);
    T_CHECK(f && !strcmp(f->name, "accuracy_reward"), "accuracy logs as open-r1's accuracy_reward");
    reward_free(f);
    T_CHECK(one("accuracy", NULL, RIGHT, GOLD) == 1.0, "boxed 63/400 is right");
    T_CHECK(one("accuracy", NULL, WRONG, GOLD) == 0.0, "boxed 64/400 is wrong");
    T_CHECK(one("accuracy", NULL, "\\boxed{3}", "6") == 0.0, "boxed 3 against a plain 6");
    T_CHECK(one("accuracy", NULL, "The answer is $\\frac{1}{2}$", "0.5") == 1.0, "1/2 equals 0.5: math, not text");
    /* the lenient exact match counted a bare last number; open-r1's needs LaTeX */
    T_CHECK(one("accuracy", NULL, "so it is 6", "6") == 0.0, "a bare number is no LaTeX answer");
    RewardFunc *g = make_with("accuracy", NULL);
    const char *c[1] = {RIGHT}, *sol[1] = {NULL};
    double out[1];
    GrpoErr err = {{0}};
    T_CHECK(g && score(g, c, sol, NULL, 1, out, &err) == 0 && isnan(out[0]), "a null solution gives no value");
    reward_free(g);
    g = make_with("accuracy:answer", NULL);
    json_t *row = json_pack("{s:s}", "answer", "7");
    RewardItem it = {.completion = "\\boxed{7}", .row = row};
    RewardBatch b = {.items = &it, .n = 1};
    T_CHECK(g && reward_compute(g, &b, out, &err) == 0 && out[0] == 1.0, "accuracy:COLUMN reads that column");
    json_decref(row);
    reward_free(g);
}

static void test_format(void) {
    RewardFunc *f = make_with("format", NULL);
    T_CHECK(f && !strcmp(f->name, "format_reward"), "bare format is open-r1's format_reward");
    reward_free(f);
    f = make_with("format:^a", NULL);
    T_CHECK(f && !strcmp(f->name, "format"), "format:REGEX keeps its meaning and name");
    reward_free(f);
    static const struct {
        const char *text;
        double want;
    } cases[] = {
        {"<think>\nSome reasoning\n</think>\n<answer>\nThe answer\n</answer>", 1},
        {"<think>\nI count:\n1. a\n2. b\n\nThere are 2.\n</think>\n<answer>\n2\n</answer>", 1},
        {"<think>\n\n</think>\n<answer>\n\n</answer>", 1},                      /* empty groups */
        {"<think>\na\n</think>\n<answer>\nb\n</answer>\nmore", 1},             /* $ before a newline */
        {"<think>\na\n</think>\n<answer>\nb\n</answer> x\n</answer>", 1},      /* a later close ends a line */
        {"<think>\na\n</think>\n<answer>\nb\n</answer> x", 0},
        {"x<think>\na\n</think>\n<answer>\nb\n</answer>", 0},                  /* re.match: at the start */
        {"<think>\n</think>\n<answer>\nb\n</answer>", 0},                      /* the newline is not shared */
        {"<think>\na\n</think>\n<answer>\n</answer>", 0},
        {"<think>Only thinking</think>", 0},
        {"<answer>Only answer</answer>", 0},
        {"No tags at all", 0},
        {"<think>Missing closing</think><answer>Missing closing", 0},
        {"<think>Wrong order</answer><answer>Wrong order</think>", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = one("format", NULL, cases[i].text, NULL);
        T_CHECK(got == cases[i].want, "format case %zu: %g (want %g)", i, got, cases[i].want);
    }
}

static void test_tag_count(void) {
    static const struct {
        const char *text;
        double want;
    } cases[] = {
        {"<think>\nSome reasoning\n</think>\n<answer>\nThe answer\n</answer>", 1.0},
        {"Some reasoning\n</think>\n<answer>\nThe answer\n</answer>", 0.75},
        {"<think>\nSome reasoning\n<answer>\nThe answer\n</answer>", 0.75},
        {"<think>\nSome reasoning\n</think>\nThe answer\n</answer>", 0.75},
        {"<think>\nSome reasoning\n</think>\n<answer>\nThe answer", 0.75},
        {"Some reasoning\nThe answer", 0.0},
        {"", 0.0},
        /* str.count does not overlap: "\n</think>\n</think>\n" holds it once */
        {"<think>\na\n</think>\n</think>\n<answer>\nb\n</answer>", 1.0},
        {"<think>\n<think>\na\n</think>\n<answer>\nb\n</answer>", 0.75}, /* twice: no quarter */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = one("tag_count", NULL, cases[i].text, NULL);
        T_CHECK(got == cases[i].want, "tag_count case %zu: %g (want %g)", i, got, cases[i].want);
    }
    RewardFunc *f = make_with("tag_count", NULL);
    T_CHECK(f && !strcmp(f->name, "tag_count_reward"), "tag_count's log name");
    reward_free(f);
}

static void test_reasoning_steps(void) {
    static const struct {
        const char *text;
        double want;
    } cases[] = {
        {"Step 1: First step\nStep 2: Second step\nStep 3: Third step", 1.0},
        {"First, we do this.\nSecond, we do that.\nFinally, we conclude.", 1.0},
        {"Step 1: Only step", 1.0 / 3},
        {"First, we do this.\nFinally, we conclude.", 2.0 / 3},
        {"Just plain text without any clear steps", 0.0},
        {"", 0.0},
        {"1. a\n2. b\n- c", 2.0 / 3},                      /* ^ only at the start: "2." does not count */
        {"Step \xd9\xa3: x", 1.0 / 3},                     /* \d is any Unicode digit (ARABIC-INDIC 3) */
        {"Step 12a: Step 3:", 1.0 / 3},
        {"First,Second,Next,Finally,", 1.0},
        {"\n-\n*", 2.0 / 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = one("reasoning_steps", NULL, cases[i].text, NULL);
        T_CHECK(t_close(got, cases[i].want, 1e-15, 0), "reasoning_steps case %zu: %.17g (want %.17g)", i, got,
                cases[i].want);
    }
}

static void test_repetition(void) {
    static const struct {
        int n;
        double max_penalty;
        const char *text;
        double want;
    } cases[] = {
        {2, -1.0, "this is a test sentence", 0.0},
        {2, -1.0, "this this this this this", -0.75},
        {2, -1.0, "this is a this is a test", -1.0 / 3},
        {3, -0.5, "this is a test", 0.0},
        {3, -0.5, "test test test test", -0.25},
        {2, -1.0, "", 0.0},
        {3, -2.0, "this is a this is a test", -0.4},
        {3, -1.0, "word", 0.0},
        {3, -1.0, "two words", 0.0},
        {3, -1.0, "three different words", 0.0},
        {3, -1.0, "word word word word", -0.5},
        {3, -1.0, "one two one two", 0.0},
        {3, -0.5, "A B C A B", 0.0},
        {3, -1.0, "A B C A B C", -0.25},
        {3, -1.0, "A B C A B C E F G A B C A B C", -5.0 / 13},
        {3, -1.0, "A B C D E F G H I J K L", 0.0},
        {2, -1.0, "This is A Test this IS a test", -3.0 / 7},        /* lowercased: 4 distinct of 7 */
        {2, -1.0, "a\xc2\xa0" "a\xe3\x80\x80" "a\n\ta", -2.0 / 3}, /* Unicode spaces split words */
        {1, -1.0, "\xc3\x89t\xc3\xa9 \xc3\xa9t\xc3\xa9", -0.5},       /* "Été été": one word lowercased */
        {2, -1.0, "   ", 0.0},                                        /* no words */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        OpenR1Params p;
        reward_openr1_defaults(&p);
        p.repetition_n_grams = cases[i].n, p.repetition_max_penalty = cases[i].max_penalty;
        double got = one("repetition_penalty", &p, cases[i].text, NULL);
        T_CHECK(t_close(got, cases[i].want, 1e-12, 0), "repetition case %zu: %.17g (want %.17g)", i, got,
                cases[i].want);
    }
    OpenR1Params p;
    reward_openr1_defaults(&p);
    T_CHECK(t_close(one("repetition_penalty", &p, "a b c a b c", NULL), -0.25, 1e-15, 0), "defaults: n 3, -1");
    p.repetition_max_penalty = 1.5;
    RewardFunc *f = NULL;
    GrpoErr err = {{0}};
    RewardOptions opt = {.openr1 = &p};
    T_CHECK(reward_new(&f, "repetition_penalty", &opt, &err) == -1 && strstr(err.msg, "1.5 should not be positive"),
            "a positive max penalty is refused: %s", err.msg);
}

static void test_cosine(void) {
    /* open-r1's test: min_wrong -1, max_wrong -0.5, min_correct 0.5, max_correct 1, max_len 100 */
    OpenR1Params p;
    reward_openr1_defaults(&p);
    p.cosine_min_value_wrong = -1.0, p.cosine_max_len_chars = 100;
    char *right20 = padded(RIGHT, 20), *right80 = padded(RIGHT, 80), *wrong20 = padded(WRONG, 20),
         *wrong80 = padded(WRONG, 80);
    T_CHECK(t_close(one("cosine", &p, right20, GOLD), 0.943, 0.005, 0), "short right ~0.943");
    T_CHECK(t_close(one("cosine", &p, right80, GOLD), 0.547, 0.005, 0), "long right ~0.547");
    T_CHECK(t_close(one("cosine", &p, wrong20, GOLD), -0.942, 0.005, 0), "short wrong ~-0.942");
    T_CHECK(t_close(one("cosine", &p, wrong80, GOLD), -0.547, 0.005, 0), "long wrong ~-0.547");
    /* the formula at 22 characters (RIGHT is longer than 20): 0.5 + 0.25 (1 + cos(0.22 pi)) */
    T_CHECK(t_close(one("cosine", &p, right20, GOLD), 0.5 + 0.25 * (1 + cos(0.22 * M_PI)), 1e-12, 0),
            "cosine at 22 characters");
    free(right20), free(right80), free(wrong20), free(wrong80);
    /* open-r1's defaults: wrong runs 0 (empty) .. -0.5 (1000 characters); right 1 .. 0.5 */
    reward_openr1_defaults(&p);
    char *right500 = padded(RIGHT, 500), *right1000 = padded(RIGHT, 1000), *wrong1000 = padded(WRONG, 1000);
    T_CHECK(one("cosine", &p, "", GOLD) == 0.0, "an empty completion is wrong at length 0: 0");
    T_CHECK(t_close(one("cosine", &p, wrong1000, GOLD), -0.5, 1e-12, 0), "wrong at max_len: -0.5");
    T_CHECK(t_close(one("cosine", &p, right1000, GOLD), 0.5, 1e-12, 0), "right at max_len: 0.5");
    T_CHECK(t_close(one("cosine", &p, right500, GOLD), 0.75, 1e-12, 0), "right at half: 0.75");
    /* "Skip unparseable examples": 1.0 when the gold has no LaTeX (a plain 6), or is null */
    T_CHECK(one("cosine", &p, "\\boxed{3}", "6") == 1.0, "plain-text gold: 1.0");
    T_CHECK(t_close(one("cosine", &p, "\\boxed{6}", "The answer is $6$"), 0.75 + 0.25 * cos(9 * M_PI / 1000), 1e-12, 0),
            "a $6$ gold is LaTeX: right at 9 characters");
    RewardFunc *f = make_with("cosine", &p);
    const char *c[1] = {"x"}, *sol[1] = {NULL};
    double out[1];
    GrpoErr err = {{0}};
    T_CHECK(f && !strcmp(f->name, "cosine_scaled_reward"), "cosine's log name");
    T_CHECK(f && score(f, c, sol, NULL, 1, out, &err) == 0 && out[0] == 1.0, "a null gold: 1.0");
    T_CHECK(f && score(f, c, NULL, NULL, 1, out, &err) == -1 && strstr(err.msg, "d.jsonl:1") &&
                strstr(err.msg, "no column 'solution'"),
            "no solution column: %s", err.msg);
    reward_free(f);
    free(right500), free(right1000), free(wrong1000);
}

static void test_length(void) {
    RewardFunc *f = make_with("length", NULL);
    T_CHECK(f && !strcmp(f->name, "len_reward"), "bare length is open-r1's len_reward");
    double out[4];
    GrpoErr err = {{0}};
    const char *gold4[4] = {GOLD, GOLD, GOLD, GOLD};
    const char *same[2] = {RIGHT, WRONG};
    T_CHECK(f && score(f, same, gold4, NULL, 2, out, &err) == 0 && out[0] == 0 && out[1] == 0, "same lengths: 0 0");
    /* 22 and 34 characters: lambda 0.5 and -0.5 */
    const char *mixed[4] = {RIGHT, RIGHT "  xxxxxxxxxx", WRONG, WRONG "  xxxxxxxxxx"};
    T_CHECK(f && score(f, mixed, gold4, NULL, 2, out, &err) == 0 && out[0] == 0.5 && out[1] == -0.5,
            "right short/long: %g %g (want 0.5 -0.5)", out[0], out[1]);
    T_CHECK(f && score(f, mixed + 2, gold4, NULL, 2, out, &err) == 0 && out[0] == 0 && out[1] == -0.5,
            "wrong short/long: %g %g (want 0 -0.5)", out[0], out[1]);
    T_CHECK(f && score(f, mixed, gold4, NULL, 4, out, &err) == 0 && out[0] == 0.5 && out[1] == -0.5 && out[2] == 0 &&
                out[3] == -0.5,
            "mixed: %g %g %g %g", out[0], out[1], out[2], out[3]);
    const char *bad[2] = {"unparseable_latex", "unparseable_latex"};
    const char *ans[2] = {"\\boxed{answer}", "\\boxed{answer} xxxxxxxxxx"};
    T_CHECK(f && score(f, ans, bad, NULL, 2, out, &err) == 0 && out[0] == 0.5 && out[1] == -0.5,
            "an unparseable gold counts as right: %g %g", out[0], out[1]);
    /* characters, not bytes: "é" x 3 is 3 characters against 1 and 5 */
    const char *uni[3] = {"a", "\xc3\xa9\xc3\xa9\xc3\xa9", "aaaaa"};
    T_CHECK(f && score(f, uni, gold4, NULL, 3, out, &err) == 0 && out[0] == 0 && out[1] == 0 && out[2] == -0.5,
            "characters: %g %g %g (want 0 0 -0.5)", out[0], out[1], out[2]);
    T_CHECK(f && score(f, mixed, gold4, NULL, 1, out, &err) == 0 && out[0] == 0, "one completion: 0");
    reward_free(f);
    f = make_with("length:5", NULL);
    T_CHECK(f && !strcmp(f->name, "length") && score(f, uni, NULL, NULL, 1, out, &err) == 0 && out[0] == -4,
            "length:TARGET keeps TRL's reward_len");
    reward_free(f);
}

static void test_overlong(void) {
    OpenR1Params p;
    reward_openr1_defaults(&p);
    p.max_completion_len_tokens = 100, p.soft_punish_cache_tokens = 20;
    RewardFunc *f = make_with("soft_overlong_punishment", &p);
    T_CHECK(f && !strcmp(f->name, "soft_overlong_punishment_reward"), "its log name");
    const char *c[7] = {"", "", "", "", "", "", ""};
    int ids[7] = {50, 110, 90, 80, 100, 81, 0};
    double want[7] = {0, -1, -0.5, 0, -1, -0.05, 0}, out[7];
    GrpoErr err = {{0}};
    T_CHECK(f && score(f, c, NULL, ids, 7, out, &err) == 0, "overlong: %s", err.msg);
    for (int i = 0; i < 7; i++) T_CHECK(t_close(out[i], want[i], 1e-15, 0), "%d tokens: %g (want %g)", ids[i], out[i], want[i]);
    reward_free(f);
    p.soft_punish_cache_tokens = 0; /* no soft band: 0 up to the maximum, -1 past it */
    f = make_with("soft_overlong_punishment", &p);
    int ids0[2] = {100, 101};
    T_CHECK(f && score(f, c, NULL, ids0, 2, out, &err) == 0 && out[0] == 0 && out[1] == -1, "cache 0: %g %g", out[0],
            out[1]);
    reward_free(f);
    f = make_with("soft_overlong_punishment", NULL); /* 16384 and 4096 */
    int idsd[2] = {12288, 14336};
    T_CHECK(f && score(f, c, NULL, idsd, 2, out, &err) == 0 && out[0] == 0 && out[1] == -0.5, "defaults: %g %g",
            out[0], out[1]);
    reward_free(f);
}

static void test_names(void) {
    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"acurracy", "did you mean 'accuracy'?"},
        {"formt:^a", "did you mean 'format'?"},
        {"tagcount", "did you mean 'tag_count'?"},
        {"cosin", "did you mean 'cosine'?"},
        {"my_rewards.my_reward:x", "FILE.py:FUNCTION"}, /* dotted with an argument: not Python */
        {"nosuch", "unknown reward function 'nosuch' (expected accuracy, format, tag_count"},
        {"n=zzzzzz:1", "unknown reward function 'zzzzzz'"},
        {"ioi_code", "open-r1's code reward 'ioi_code' is not built in"},
        {"code", "open-r1's code reward 'code' is not built in"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        GrpoErr err = {{0}};
        T_CHECK(reward_spec_check(bad[i].spec, &err) == -1 && strstr(err.msg, bad[i].want), "check '%s': %s",
                bad[i].spec, err.msg);
        RewardFunc *f = NULL;
        GrpoErr err2 = {{0}};
        T_CHECK(reward_new(&f, bad[i].spec, NULL, &err2) == -1 && !strcmp(err.msg, err2.msg),
                "reward_new says the same for '%s': %s", bad[i].spec, err2.msg);
    }
    static const char *const good[] = {"accuracy", "format", "tag_count", "reasoning_steps", "cosine",
                                       "repetition_penalty", "length", "soft_overlong_punishment", "reward_len:3",
                                       "format:^a", "exact_match:answer", "accuracy_reward", "think_format_reward",
                                       "judge=cmd:python3 x.py", "plugin:x.so", "rewards/mine.py:f",
                                       "my_rewards.my_reward"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        GrpoErr err = {{0}};
        T_CHECK(reward_spec_check(good[i], &err) == 0, "'%s' is known: %s", good[i], err.msg);
    }
    RewardFunc *f = NULL;
    GrpoErr err = {{0}};
    T_CHECK(reward_new(&f, "tag_count:x", NULL, &err) == -1 && strstr(err.msg, "tag_count takes no argument"),
            "open-r1 rewards take no argument: %s", err.msg);
    const char *specs[2] = {"accuracy", "acurracy"};
    RewardArgs a = {.funcs = {2, specs}};
    T_CHECK(reward_args_check(&a, &err) == -1 && strstr(err.msg, "'acurracy'; did you mean 'accuracy'?"),
            "reward_args_check checks the names: %s", err.msg);
}

static void test_options(void) {
    RewardArgs a;
    OptGroup g = REWARD_OPTIONS_GROUP(0);
    opts_defaults(&g, 1, &a);
    OpenR1Params want;
    reward_openr1_defaults(&want);
    T_CHECK(!memcmp(&a.openr1, &want, sizeof want), "the options' defaults are open-r1's");
    T_CHECK(want.cosine_min_value_wrong == 0.0 && want.cosine_max_value_wrong == -0.5 &&
                want.cosine_min_value_correct == 0.5 && want.cosine_max_value_correct == 1.0 &&
                want.cosine_max_len_chars == 1000 && want.repetition_n_grams == 3 &&
                want.repetition_max_penalty == -1.0 && want.max_completion_len_tokens == 16384 &&
                want.soft_punish_cache_tokens == 4096,
            "GRPOScriptArguments' defaults");
    GrpoErr err = {{0}};
    size_t base = 0;
    const OptSpec *o = opts_find(&g, 1, "repetition_max_penalty", strlen("repetition_max_penalty"), &base);
    T_CHECK(o && opt_set_text(o, opt_value(o, &a, base), "0.5", &err) == 0, "set repetition_max_penalty");
    const char *one_func[1] = {"format"};
    a.funcs = (StrList){1, one_func};
    T_CHECK(opts_check(&g, 1, &a, &err) == -1 && strstr(err.msg, "repetition_max_penalty"),
            "a positive repetition_max_penalty is out of range: %s", err.msg);
    o = opts_find(&g, 1, "cosine_max_len", strlen("cosine_max_len"), &base);
    T_CHECK(o && opt_set_text(o, opt_value(o, &a, base), "50", &err) == 0 && a.openr1.cosine_max_len_chars == 50,
            "cosine_max_len sets the cosine's length");
}

int main(void) {
    test_accuracy();
    test_format();
    test_tag_count();
    test_reasoning_steps();
    test_repetition();
    test_cosine();
    test_length();
    test_overlong();
    test_names();
    test_options();
    return t_summary("test_reward_openr1");
}
