/* tests/reward/test_reward_math.c — TRL's accuracy_reward and
 * think_format_reward (reward/reward_math.c): the examples of TRL's own
 * docstrings, math_verify's extraction rules as TRL configures them (boxed
 * first and rightmost, anchored LaTeX only, a bare number scores 0), numeric
 * equality of fractions, decimals, separators, percents, units and "x = 3",
 * text equality otherwise, no value for an empty or null solution, and the
 * errors (missing column, a column of the wrong type). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reward/reward.h"
#include "reward/reward_internal.h"
#include "testutil.h"

static void expect_answer(const char *completion, const char *want) {
    char *got = math_completion_answer(completion);
    T_CHECK(want ? got && !strcmp(got, want) : !got, "answer of '%s': '%s' (want '%s')", completion,
            got ? got : "(none)", want ? want : "(none)");
    free(got);
}

static void test_extraction(void) {
    /* boxed wins, and the rightmost one */
    expect_answer("My answer is \\boxed{\\frac{1}{3}}", "\\frac{1}{3}");
    /* boxes close to the last one join it, as math_verify's extract_boxed_content does
     * (fewer than 10 characters between, or fewer than 70 with and/or/,/;) */
    expect_answer("first \\boxed{1} then \\boxed{2}.", "1,2");
    expect_answer("\\boxed{1} and \\boxed{2}", "1,2");
    expect_answer("\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}", "(2, 2),(6, 2)");
    expect_answer("\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}", "(3, 3),(1, 1)");
    expect_answer("\\boxed{1}, so far; then after a long detour through other reasoning, more than 70 characters: \\boxed{2}", "2");
    expect_answer("\\boxed{1} is what one might think but the honest result is \\boxed{2}", "2"); /* no separator */
    expect_answer("\\boxed{ 5 } \\boxed{5}", "5");
    expect_answer("\\boxed{\\boxed{1}}", "1");
    /* a percent marker after the environment (Math-Verify tests/test_all.py test_percent_notation) */
    expect_answer("Answer: $28$ %", "28\\%");
    expect_answer("The final answer is $28$ percent", "28\\%");
    expect_answer("$\\boxed{28}$ pct", "28\\%");
    expect_answer("\\boxed{28} percent", "28");  /* no environment around the box */
    expect_answer("\\boxed{4} and later \\boxed {\\frac{1}{2}} too", "4,\\frac{1}{2}");
    expect_answer("\\boxed{\\frac{a}{b}} and $5$ and answer: $7$", "\\frac{a}{b}");
    expect_answer("\\fbox{4}", "4");
    expect_answer("unbalanced \\boxed{3", NULL);
    /* anchored LaTeX environments */
    expect_answer("So the final answer is $42$. I hope it is correct.", "42");
    expect_answer("The final answer to the question is: \\(\\frac{3}{4}\\)", "\\frac{3}{4}");
    expect_answer("Answer: it equals $$12$$", "12");
    expect_answer("the answer, after all that work, is \\[ 9 \\]", " 9 ");
    expect_answer("answer $1$ ... later, answer: $2$", "2");
    /* no anchor, no extraction: TRL scores these 0 */
    expect_answer("42", NULL);
    expect_answer("It is $42$.", NULL);
    expect_answer("The answer is 42", NULL);
    expect_answer("answer" "                                                            " "$3$", NULL);
}

static void expect_equal(const char *answer, const char *gold, int want) {
    T_CHECK(math_answers_equal(answer, gold) == want, "'%s' vs '%s': want %s", answer, gold,
            want ? "equal" : "different");
}

static void test_equality(void) {
    expect_equal("\\frac{1}{3}", "\\frac{1}{3}", 1);
    expect_equal("\\frac{1}{2}", "\\frac{1}{3}", 0);
    expect_equal("\\dfrac{1}{2}", "0.5", 1);
    expect_equal("\\tfrac12", "1/2", 1);
    expect_equal("0.333333", "\\frac{1}{3}", 1);          /* float_rounding 6 */
    expect_equal("0.33333", "\\frac{1}{3}", 0);
    expect_equal("1,000", "1000", 1);
    expect_equal("-\\frac{3}{4}", "-0.75", 1);
    expect_equal("\\frac{-3}{4}", "-0.75", 1);
    expect_equal("\\left( 7 \\right)", "7", 1);
    expect_equal("(1, 2)", "(1,2)", 1);                     /* a tuple: text */
    expect_equal("(1, 2)", "(2, 1)", 0);
    expect_equal("50\\%", "0.5", 1);                      /* math_verify: 50% is 1/2 */
    expect_equal("50\\%", "50", 0);
    expect_equal("90^\\circ", "90", 1);
    expect_equal("5 \\text{ cm}", "5", 1);
    expect_equal("x = 3", "3", 1);
    expect_equal("3", "x=3", 1);
    expect_equal("x = 4", "3", 0);
    expect_equal("1 = 3", "3", 1);                          /* math_verify: an equation against a number: its right side */
    expect_equal("x^2 + 1", "x^2+1", 1);                    /* text, spaces aside */
    expect_equal("\\text{yes}", "yes", 1);
    expect_equal("\\sqrt{2}", "2^{1/2}", 1);                /* equal values */
    expect_equal("", "", 0);
    expect_equal("2", "2.0", 1);
    expect_equal("1/0", "1/0", 1);                          /* not numbers: same text */
}

static RewardFunc *make(const char *spec) {
    RewardFunc *f = NULL;
    GrpoErr err = {{0}};
    if (reward_new(&f, spec, NULL, &err)) {
        fprintf(stderr, "reward_new(%s): %s\n", spec, err.msg);
        return NULL;
    }
    return f;
}

static int score(RewardFunc *f, const char *const *completions, const char *const *rows, int n, double *out,
                 GrpoErr *err) {
    RewardItem items[16];
    json_t *js[16];
    memset(items, 0, sizeof items);
    for (int i = 0; i < n; i++) {
        js[i] = rows ? json_loads(rows[i], 0, NULL) : NULL;
        CHECK(!rows || js[i]);
        items[i].completion = completions[i];
        items[i].row = js[i];
        items[i].file = "data.jsonl";
        items[i].line = i + 1;
    }
    RewardBatch b = {.items = items, .n = n};
    int rc = reward_compute(f, &b, out, err);
    for (int i = 0; i < n && rows; i++) json_decref(js[i]);
    return rc;
}

static void test_accuracy_reward(void) {
    RewardFunc *f = make("accuracy_reward");
    T_CHECK(f && !strcmp(f->name, "accuracy_reward"), "accuracy_reward name");
    if (!f) return;
    /* TRL's docstring example, then the cases around it */
    const char *c[] = {"My answer is \\boxed{\\frac{1}{3}}", "My answer is \\boxed{\\frac{1}{2}}",
                       "The result is 42", "The final answer is $42$. I hope it is correct.",
                       "\\boxed{42}", "\\boxed{7}", "\\boxed{1}"};
    const char *rows[] = {"{\"solution\": \"\\\\frac{1}{3}\"}", "{\"solution\": \"\\\\frac{1}{3}\"}",
                          "{\"solution\": \"42\"}", "{\"solution\": 42}",
                          "{\"solution\": \"The answer is $\\\\boxed{42}$\"}", "{\"solution\": \"\"}",
                          "{\"solution\": null}"};
    double out[7];
    GrpoErr err = {{0}};
    T_CHECK(score(f, c, rows, 7, out, &err) == 0, "accuracy_reward: %s", err.msg);
    T_CHECK(out[0] == 1 && out[1] == 0 && out[2] == 0 && out[3] == 1 && out[4] == 1 && isnan(out[5]) && isnan(out[6]),
            "accuracy_reward %g %g %g %g %g %g %g (want 1 0 0 1 1 nan nan)", out[0], out[1], out[2], out[3], out[4],
            out[5], out[6]);
    /* TRL's test_accuracy_reward_unparsable_gold: a solution math_verify parses nothing from gives None */
    const char *prose_c[] = {"Answer is forty two.", "Some other content. \\boxed{43}.", "\\boxed{12}"};
    const char *prose_rows[] = {"{\"solution\": \"Answer is forty two.\"}", "{\"solution\": \"Answer is forty three.\"}",
                                "{\"solution\": \"The train covers 12 miles.\"}"};
    T_CHECK(score(f, prose_c, prose_rows, 3, out, &err) == 0 && isnan(out[0]) && isnan(out[1]) && out[2] == 1,
            "prose solutions: %g %g %g (want nan nan 1)", out[0], out[1], out[2]);
    const char *bad_rows[] = {"{\"answer\": \"1\"}"};
    T_CHECK(score(f, c, bad_rows, 1, out, &err) == -1 &&
                strstr(err.msg, "reward 'accuracy_reward': data.jsonl:1: the example has no column 'solution'"),
            "missing column: %s", err.msg);
    const char *list_rows[] = {"{\"solution\": [1]}"};
    T_CHECK(score(f, c, list_rows, 1, out, &err) == -1 && strstr(err.msg, "column 'solution' must be a string or a number"),
            "list column: %s", err.msg);
    reward_free(f);
    /* another column */
    f = make("accuracy_reward:answer");
    const char *ans_rows[] = {"{\"answer\": \"0.5\"}"};
    const char *half[] = {"answer: $\\dfrac{1}{2}$"};
    T_CHECK(f && score(f, half, ans_rows, 1, out, &err) == 0 && out[0] == 1, "accuracy_reward:answer %g %s", out[0],
            err.msg);
    reward_free(f);
}

static void test_think_format(void) {
    RewardFunc *f = make("think_format_reward");
    if (!f) return;
    /* TRL's docstring example first */
    const char *c[] = {"<think>\nThis is my reasoning.\n</think>\nThis is my answer.",
                       "<think>\nThis is my reasoning.\nThis is my answer.",
                       " <think>x</think>y", "<think>a<think>b</think>", "<think></think>", "<think>x</think>\n<think>"};
    double out[6];
    GrpoErr err = {{0}};
    T_CHECK(score(f, c, NULL, 6, out, &err) == 0, "think_format_reward: %s", err.msg);
    T_CHECK(out[0] == 1 && out[1] == 0 && out[2] == 0 && out[3] == 0 && out[4] == 1 && out[5] == 0,
            "think_format_reward %g %g %g %g %g %g (want 1 0 0 0 1 0)", out[0], out[1], out[2], out[3], out[4], out[5]);
    reward_free(f);
    RewardFunc *g = NULL;
    T_CHECK(reward_new(&g, "think_format_reward:x", NULL, &err) == -1 && strstr(err.msg, "takes no argument"),
            "think_format_reward:x: %s", err.msg);
}

int main(void) {
    test_extraction();
    test_equality();
    test_accuracy_reward();
    test_think_format();
    return t_summary("test_reward_math");
}
