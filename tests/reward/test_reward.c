/* tests/reward/test_reward.c — the in-process reward functions on hand-checked
 * cases: reward_len (code points, not bytes), format (search semantics, Perl
 * anchors), exact_match (boxed with nested braces, <answer>, last number with
 * thousands separators and signs, number/string columns, missing column),
 * spec errors, RewardSet weights with TRL's nansum, and the columns the built-ins
 * declare, checked row by row before a run (reward_set_check_row). The child-process and
 * plugin functions are in test_reward_ext.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reward/reward.h"
#include "testutil.h"

static RewardFunc *make(const char *spec) {
    RewardFunc *f = NULL;
    GrpoErr err = {{0}};
    if (reward_new(&f, spec, NULL, &err)) {
        fprintf(stderr, "reward_new(%s): %s\n", spec, err.msg);
        return NULL;
    }
    return f;
}

/* Scores completions[0..n) with rows (may be NULL) and returns out in res. */
static int score(RewardFunc *f, const char *const *completions, json_t **rows, int n, double *res,
                 GrpoErr *err) {
    RewardItem items[16];
    memset(items, 0, sizeof items);
    for (int i = 0; i < n; i++) {
        items[i].completion = completions[i];
        items[i].row = rows ? rows[i] : NULL;
        items[i].file = "data.jsonl";
        items[i].line = i + 1;
    }
    RewardBatch b = {.items = items, .n = n};
    return reward_compute(f, &b, res, err);
}

static void expect_spec_error(const char *spec, const char *want) {
    RewardFunc *f = NULL;
    GrpoErr err = {{0}};
    int rc = reward_new(&f, spec, NULL, &err);
    T_CHECK(rc == -1 && f == NULL && strstr(err.msg, want), "spec '%s': rc %d, '%s' (want '%s')", spec,
            rc, err.msg, want);
    reward_free(f);
}

static void test_length(void) {
    RewardFunc *f = make("reward_len"); /* bare "length" is open-r1's len_reward (test_reward_openr1.c) */
    T_CHECK(f && !strcmp(f->name, "reward_len"), "reward_len name");
    if (!f) return;
    /* "héllo wörld" is 11 code points (13 bytes); the emoji is 1 (4 bytes) */
    const char *c[] = {"", "héllo wörld", "\xF0\x9F\x98\x80", "aaaaaaaaaaaaaaaaaaaaaaaaa"};
    double out[4];
    GrpoErr err = {{0}};
    T_CHECK(score(f, c, NULL, 4, out, &err) == 0, "length: %s", err.msg);
    T_CHECK(out[0] == -20 && out[1] == -9 && out[2] == -19 && out[3] == -5,
            "length values %g %g %g %g (want -20 -9 -19 -5)", out[0], out[1], out[2], out[3]);
    reward_free(f);
    f = make("reward_len:5");
    T_CHECK(f && !strcmp(f->name, "reward_len"), "alias reward_len");
    if (f) {
        T_CHECK(score(f, c, NULL, 2, out, &err) == 0 && out[0] == -5 && out[1] == -6,
                "length:5 gives %g %g", out[0], out[1]);
        reward_free(f);
    }
    f = make("short=length:0");
    T_CHECK(f && !strcmp(f->name, "short"), "NAME= prefix sets the name");
    reward_free(f);
    expect_spec_error("length:abc", "target length must be a non-negative integer");
    expect_spec_error("length:-3", "non-negative");
    /* a target past a long (strtol's LONG_MAX gave rewards of -9.2e18) or past 2^53,
     * where -|target - len| stops being exact, is refused (issue 38) */
    expect_spec_error("length:99999999999999999999999", "at most 2^53, got '99999999999999999999999'");
    expect_spec_error("length:9007199254740993", "at most 2^53");
    expect_spec_error("length:", "non-negative integer");
    f = make("reward_len:9007199254740992");
    T_CHECK(f != NULL, "length:2^53 is a target");
    if (f) {
        T_CHECK(score(f, c, NULL, 2, out, &err) == 0 && out[0] == -9007199254740992.0 &&
                    out[1] == -9007199254740981.0,
                "length:2^53 gives %.17g %.17g", out[0], out[1]);
        reward_free(f);
    }
}

static void test_format(void) {
    RewardFunc *f = make("format:^<think>.*?</think><answer>.*?</answer>$");
    T_CHECK(f && !strcmp(f->name, "format"), "format loads");
    if (!f) return;
    const char *c[] = {
        "<think>a b</think><answer>42</answer>",   /* 1 */
        "x<think>a</think><answer>4</answer>",     /* 0: ^ anchors at the start */
        "<think>a</think><answer>4</answer> more", /* 0: $ anchors at the end */
        "<think>a\nb</think><answer>4</answer>",   /* 0: '.' does not match newline (as Python re) */
        "<think>a</think><answer>4</answer>\n",    /* 1: $ matches before a final newline */
        "<think>é</think><answer>ü</answer>",      /* 1: UTF-8 */
    };
    double out[6];
    GrpoErr err = {{0}};
    T_CHECK(score(f, c, NULL, 6, out, &err) == 0, "format: %s", err.msg);
    const double want[] = {1, 0, 0, 0, 1, 1};
    for (int i = 0; i < 6; i++) T_CHECK(out[i] == want[i], "format case %d: %g want %g", i, out[i], want[i]);
    reward_free(f);
    /* search semantics: unanchored patterns match anywhere; (?s) lets '.' cross lines */
    f = make("format:(?s)<answer>.+</answer>");
    if (f) {
        const char *c2[] = {"so <answer>\n7\n</answer> done", "no tags"};
        T_CHECK(score(f, c2, NULL, 2, out, &err) == 0 && out[0] == 1 && out[1] == 0,
                "unanchored search: %g %g", out[0], out[1]);
        reward_free(f);
    }
    expect_spec_error("format:(", "bad regex");
    expect_spec_error("format:", "expected format:REGEX");
}

static void expect_answer(const char *completion, const char *want) {
    char *got = reward_extract_answer(completion);
    T_CHECK((want == NULL && got == NULL) || (want && got && !strcmp(got, want)),
            "extract '%s' -> '%s' (want '%s')", completion, got ? got : "(none)", want ? want : "(none)");
    free(got);
}

static void test_extract(void) {
    expect_answer("so \\boxed{\\frac{1}{2}} ok", "\\frac{1}{2}");
    expect_answer("\\boxed{1} then \\boxed{{a}{b}}", "{a}{b}");
    expect_answer("first \\boxed{7} then \\boxed{8 unbalanced", "7");
    expect_answer("<answer>x</answer> and <answer> 12 </answer> 99", " 12 ");
    expect_answer("\\boxed{3} beats <answer>4</answer>", "3");
    expect_answer("it costs $1,234,567.50 in total.", "1234567.50");
    expect_answer("from 5 to -17", "-17");
    expect_answer("3-2 is", "2");
    expect_answer("list 1,2", "2");
    expect_answer("the year 2024.", "2024");
    expect_answer("no numbers here", NULL);
    T_CHECK(reward_answers_match(" 42. ", "42"), "trailing period and spaces");
    T_CHECK(reward_answers_match("$1,000", "1000.0"), "dollar, separators, numeric compare");
    T_CHECK(reward_answers_match("-0.50", "-.5"), "numeric -0.50 = -.5");
    T_CHECK(!reward_answers_match("41", "42"), "41 != 42");
    T_CHECK(reward_answers_match("x + 1", "x+1"), "spaces removed");
    T_CHECK(!reward_answers_match("Paris", "paris"), "case kept");
}

static void test_exact_match(void) {
    RewardFunc *f = make("exact_match:answer");
    T_CHECK(f && !strcmp(f->name, "exact_match"), "exact_match loads");
    if (!f) return;
    json_t *rows[6] = {
        json_pack("{s:s, s:i}", "prompt", "p", "answer", 1234),
        json_pack("{s:s, s:s}", "prompt", "p", "answer", "Janet earns... #### 18"),
        json_pack("{s:s, s:s}", "prompt", "p", "answer", "\\boxed{\\frac{1}{2}}"),
        json_pack("{s:s, s:f}", "prompt", "p", "answer", -2.5),
        json_pack("{s:s, s:n}", "prompt", "p", "answer"),
        json_pack("{s:s, s:i}", "prompt", "p", "answer", 7),
    };
    const char *c[] = {
        "The total is 1,234.",                  /* 1: separators, period */
        "so she makes \\boxed{18} dollars",     /* 1: GSM8K #### gold */
        "answer: \\boxed{\\frac{1}{2}}",        /* 1: nested braces both sides */
        "<answer>-2.50</answer>",               /* 1: numeric */
        "whatever",                             /* NAN: null gold */
        "I think 8",                            /* 0 */
    };
    double out[6];
    GrpoErr err = {{0}};
    T_CHECK(score(f, c, rows, 6, out, &err) == 0, "exact_match: %s", err.msg);
    T_CHECK(out[0] == 1 && out[1] == 1 && out[2] == 1 && out[3] == 1 && isnan(out[4]) && out[5] == 0,
            "exact_match values %g %g %g %g %g %g", out[0], out[1], out[2], out[3], out[4], out[5]);
    /* a missing column names the column and the line */
    json_t *bad[2] = {rows[0], json_pack("{s:s, s:i}", "prompt", "p", "solution", 3)};
    T_CHECK(score(f, c, bad, 2, out, &err) == -1 && strstr(err.msg, "data.jsonl:2") &&
                strstr(err.msg, "no column 'answer'"),
            "missing column: %s", err.msg);
    json_t *wrong[1] = {json_pack("{s:s, s:[i]}", "prompt", "p", "answer", 3)};
    T_CHECK(score(f, c, wrong, 1, out, &err) == -1 && strstr(err.msg, "data.jsonl:1") &&
                strstr(err.msg, "must be a string or a number"),
            "list column: %s", err.msg);
    reward_free(f);
    /* accuracy is open-r1's math-verifying accuracy_reward now, not this lenient match */
    f = make("accuracy");
    T_CHECK(f && !strcmp(f->name, "accuracy_reward"), "accuracy is open-r1's");
    reward_free(f);
    for (int i = 0; i < 6; i++) json_decref(rows[i]);
    json_decref(bad[1]);
    json_decref(wrong[0]);
    expect_spec_error("exact_match", "expected exact_match:COLUMN");
}

static void test_spec_errors(void) {
    expect_spec_error("bogus:1", "unknown reward function 'bogus'");
    expect_spec_error("cmd:", "expected cmd:COMMAND LINE");
    expect_spec_error("plugin:", "expected plugin:PATH.so");
}

/* A fixed-output function for the set tests. */
static int fixed_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    const double *v = f->state;
    for (int i = 0; i < b->n; i++) out[i] = v[i];
    return 0;
}
static int failing_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    return err_set(err, "fixed failure");
}
static RewardFunc *fixed(const char *name, const double *values) {
    RewardFunc *f = xcalloc(1, sizeof *f);
    f->name = xstrdup(name);
    f->compute = fixed_compute;
    f->state = (void *)values;
    return f;
}

static void test_set(void) {
    static const double a[3] = {1.0, NAN, NAN}, b[3] = {2.0, 3.0, NAN};
    RewardFunc *funcs[2] = {fixed("a", a), fixed("a", b)};
    const double w[2] = {0.5, 2.0};
    RewardSet s;
    GrpoErr err = {{0}};
    T_CHECK(reward_set_init_funcs(&s, funcs, 2, w, 2, &err) == 0, "set init: %s", err.msg);
    T_CHECK(!strcmp(s.funcs[1]->name, "a_2"), "duplicate name gets _2: %s", s.funcs[1]->name);
    RewardItem items[3] = {{0}};
    for (int i = 0; i < 3; i++) items[i].completion = "";
    RewardBatch batch = {.items = items, .n = 3};
    double per[6], total[3];
    T_CHECK(reward_set_compute(&s, &batch, per, total, &err) == 0, "set compute");
    /* row 0: 0.5*1 + 2*2 = 4.5; row 1: NAN left out -> 6; row 2: all NAN -> 0 (torch.nansum) */
    T_CHECK(total[0] == 4.5 && total[1] == 6.0 && total[2] == 0.0, "nansum %g %g %g", total[0],
            total[1], total[2]);
    T_CHECK(per[0] == 1.0 && isnan(per[1]) && per[3] == 2.0 && isnan(per[5]), "per-function kept");
    reward_set_free(&s);

    /* default weights 1.0; a failing function's message comes through */
    RewardFunc *f2[2] = {fixed("x", b), fixed("y", b)};
    T_CHECK(reward_set_init_funcs(&s, f2, 2, NULL, 0, &err) == 0, "default weights");
    T_CHECK(reward_set_compute(&s, &batch, per, total, &err) == 0 && total[0] == 4.0 && total[1] == 6.0,
            "weights 1: %g %g", total[0], total[1]);
    s.funcs[1]->compute = failing_compute;
    T_CHECK(reward_set_compute(&s, &batch, per, total, &err) == -1 && strstr(err.msg, "fixed failure"),
            "failure propagates");
    reward_set_free(&s);

    /* weight count mismatch names both counts */
    RewardFunc *f3[2] = {fixed("x", a), fixed("y", b)};
    T_CHECK(reward_set_init_funcs(&s, f3, 2, w, 1, &err) == -1 && strstr(err.msg, "1 weights") &&
                strstr(err.msg, "2 reward functions"),
            "mismatch: %s", err.msg);
    const char *specs[2] = {"reward_len", "format:^a"};
    T_CHECK(reward_set_init(&s, specs, 2, w, 3, NULL, &err) == -1 && strstr(err.msg, "3 weights") &&
                strstr(err.msg, "2 reward functions"),
            "spec mismatch: %s", err.msg);
    /* from specs, end to end */
    T_CHECK(reward_set_init(&s, specs, 2, w, 2, NULL, &err) == 0, "set from specs: %s", err.msg);
    items[0].completion = "abc";
    items[1].completion = "bcd";
    batch.n = 2;
    T_CHECK(reward_set_compute(&s, &batch, per, total, &err) == 0 && total[0] == 0.5 * -17 + 2.0 &&
                total[1] == 0.5 * -17,
            "length+format: %g %g", total[0], total[1]);
    reward_set_free(&s);
    /* a weighted sum past what a double holds is refused, naming the rewards (issue 38):
     * two rewards of 1e308, or one of 1e308 with weight 10; 1e308 + -1e308 is 0 */
    static const double big[3] = {1e308, 1e308, -1e308}, big2[3] = {1e308, -1e308, 1e308};
    RewardFunc *f4[2] = {fixed("huge", big), fixed("also_huge", big2)};
    T_CHECK(reward_set_init_funcs(&s, f4, 2, NULL, 0, &err) == 0, "big set");
    items[2].completion = "";
    batch.n = 3;
    T_CHECK(reward_set_compute(&s, &batch, per, total, &err) == -1 &&
                strstr(err.msg, "the weighted sum of the rewards of completion 1 is inf, not a finite number: "
                                "'huge' 1e+308 x weight 1, 'also_huge' 1e+308 x weight 1"),
            "sum overflow: %s", err.msg);
    T_CHECK(reward_weighted_check(&s, per, 3, &err) == -1 && strstr(err.msg, "completion 1"), "the check alone");
    per[0] = 1.0; /* completion 1: 1 + 1e308 */
    per[5] = -1e308; /* completion 3: -1e308 + -1e308 */
    T_CHECK(reward_weighted_check(&s, per, 3, &err) == -1 && strstr(err.msg, "completion 3 is -inf"), "%s", err.msg);
    per[5] = 1e308;
    T_CHECK(reward_weighted_check(&s, per, 3, &err) == 0, "finite sums pass: %s", err.msg);
    per[0] = INFINITY; /* a function's own inf is not this check's (the trainer's non-finite policy) */
    T_CHECK(reward_weighted_check(&s, per, 3, &err) == 0, "a reward of inf itself passes: %s", err.msg);
    s.weights[0] = 10;
    per[0] = 1e308, per[3] = NAN; /* 10 x 1e308 alone */
    T_CHECK(reward_weighted_check(&s, per, 3, &err) == -1 && strstr(err.msg, "'huge' 1e+308 x weight 10, 'also_huge' nan"),
            "weight overflow: %s", err.msg);
    reward_set_free(&s);
    const char *bad_specs[2] = {"reward_len", "format:("};
    T_CHECK(reward_set_init(&s, bad_specs, 2, NULL, 0, NULL, &err) == -1 && strstr(err.msg, "bad regex"),
            "a bad spec fails the set: %s", err.msg);
}

/* Every built-in that reads a column declares it; a row is checked as the function
 * reads it: present, a string, a number or null (no value). */
static void test_check_row(void) {
    const char *specs[] = {"accuracy", "accuracy_reward:gold", "exact_match:answer", "cosine", "length",
                           "reward_len", "format:a", "think_format_reward", "tag_count"};
    int n = sizeof specs / sizeof specs[0];
    const char *want[] = {"solution", "gold", "answer", "solution", "solution", NULL, NULL, NULL, NULL};
    RewardSet s;
    GrpoErr err = {{0}};
    T_CHECK(reward_set_init(&s, specs, n, NULL, 0, NULL, &err) == 0, "set: %s", err.msg);
    for (int k = 0; k < n; k++)
        T_CHECK(want[k] ? s.funcs[k]->column && !strcmp(s.funcs[k]->column, want[k]) : !s.funcs[k]->column,
                "%s declares %s", specs[k], want[k] ? want[k] : "no column");
    json_t *ok = json_pack("{s:s, s:s, s:i, s:n}", "prompt", "p", "solution", "$2$", "gold", 2, "answer");
    T_CHECK(reward_set_check_row(&s, ok, "d.jsonl", 3, &err) == 0, "a full row (null, number): %s", err.msg);
    json_object_del(ok, "gold");
    T_CHECK(reward_set_check_row(&s, ok, "d.jsonl", 5, &err) == -1 &&
                !strcmp(err.msg, "d.jsonl:5: no 'gold' column, which reward 'accuracy_reward_2' reads"),
            "a missing column: %s", err.msg);
    json_object_set_new(ok, "gold", json_true());
    T_CHECK(reward_set_check_row(&s, ok, "d.jsonl", 7, &err) == -1 &&
                !strcmp(err.msg, "d.jsonl:7: column 'gold' must be a string, a number or null, which reward "
                        "'accuracy_reward_2' reads"),
            "a column of another type: %s", err.msg);
    json_decref(ok);
    reward_set_free(&s);
}

int main(void) {
    test_check_row();
    test_length();
    test_format();
    test_extract();
    test_exact_match();
    test_spec_errors();
    test_set();
    return t_summary("test_reward");
}
