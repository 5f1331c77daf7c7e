/* tests/reward/test_math_verify.c — the answer comparison of accuracy_reward
 * (reward/math_parse.c, math_value.c) on a table of (gold, prediction,
 * expected) cases whose expected results are math_verify's: each block names
 * the file of its public test suite (huggingface/Math-Verify at 5d148cf,
 * tests/test_all.py) or of TRL's / open-r1's accuracy_reward tests it comes
 * from. Math-Verify's cases extract answers from whole texts with its own
 * unanchored configuration; here the answer as it would be extracted (the
 * boxed or $..$ content) is compared, so the table tests the comparison.
 * Cases math_verify accepts and we do not are the "known differences" block:
 * asserted to be what we return today, so a change shows, and listed in
 * docs/rewards.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reward/math_expr.h"
#include "reward/reward_internal.h"
#include "testutil.h"

typedef struct {
    const char *gold, *pred;
    int expected;
} Case;

static void run(const char *block, const Case *cases, int n) {
    for (int i = 0; i < n; i++) {
        int got = math_answers_equal(cases[i].pred, cases[i].gold);
        T_CHECK(got == cases[i].expected, "%s: gold '%s' pred '%s': got %d, math_verify %d", block, cases[i].gold,
                cases[i].pred, got, cases[i].expected);
    }
}

#define RUN(block, cases) run(block, cases, (int)(sizeof cases / sizeof cases[0]))

/* tests/test_all.py: test_number_extraction (the LaTeX-readable ones) */
static const Case numbers[] = {
    {"-5", "-5", 1},          {"7425000", "7,425,000", 1}, {"1000", "1000.0", 1}, {"1000.0", "1,000.0", 1},
    {"0.4", ".4", 1},         {"1000.99", "1,000.99", 1},  {"1000.99", "\\$1,000.99", 1},
    {"2", "3", 0},
};

/* tests/test_all.py: test_simple_fraction_notation, test_latex_notation */
static const Case fractions[] = {
    {"10/9", "\\frac{10}{9}", 1},
    {"-10/9", "-\\frac{10}{9}", 1},
    {"9", " 9 ", 1},
    {"10", " (9+1) ", 1},
    {"1/3", "\\frac13 ", 1},
    {"1", "\\frac3{3} ", 1},
    {"\\sqrt{3}", "\\sqrt3 ", 1},
    {"1/3", "\\cfrac{1}{3} ", 1},
    {"1/3", "\\dfrac{1}{3} ", 1},
    {"1/3", "\\tfrac{1}{3} ", 1},
    {"1/3", " 1/3 ", 1},
    {"1/3", "\\left( \\frac{1}{3} \\right)", 1},
    {"1/3", "\\frac{1}{3} \\text{meters}", 1},
    {"1/3", "\\frac{1}{3} \\textbf{meters}", 1},
    {"1/3", "k = \\frac{1}{3}", 1},
};

/* tests/test_all.py: test_sets_handling, test_percent_notation (the boxed forms) */
static const Case sets_percents[] = {
    {"[0,1)", "[0,1)", 1},
    {"[0,9)", "[0,1)", 0},
    {"(0,9)", "[0,9)", 0},
    {"1", "-[0,1)", 0},
    {"28\\%", "28 percent", 1},
    {"28\\%", "28 pct", 1},
    {"28\\%", "28 %", 1},
    {"28\\%", "28 percentage", 1},
};

/* tests/test_all.py: test_latex_notation_math (the boxed answers) */
static const Case notation_math[] = {
    {"2-2p", "2-2p", 1},
    {"28\\%", "28\\%", 1},
    {"14{,}916", "14 {, }916", 1},
    {"(3, \\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)", 1},
    {"\\frac{14}{3}", "\\frac{14}{3}", 1},
    {"\\text{Evelyn}", "\\text{Evelyn}", 1},
    {"90^\\circ", "90^\\circ", 1},
    {"3\\sqrt{13}", "3\\sqrt{13}", 1},
    {"15\\mbox{ cm}^2", "15\\mbox{ cm}^2", 1},
    {"-2,1", "-2,1", 1},
    {"204_5", "204_5", 1},
    {"(6,31,-1)", "(6,31,-1)", 1},
    {"1 \\pm \\sqrt{19}", "1 \\pm \\sqrt{19}", 1},
    {"\\{1\\pm\\sqrt{5},-2\\}", "\\{1\\pm\\sqrt{5},-2\\}", 1},
    {"f(2) < f(1) < f(4)", "f(2) < f(1) < f(4)", 1},
    {"2 \\sin b \\cos a", "2 \\sin b \\cos a", 1},
    {"\\frac{\\pi r}{h+r}", "\\frac{\\pi r}{h+r}", 1},
    {"125 miles", "125\\textnormal{ miles}", 1},
    {"[-1, -\\frac{1}{2}) \\cup (-\\frac{1}{2}, 0) \\cup (0, 1) \\cup (1, \\infty)",
     "[-1, -\\tfrac12) \\cup (-\\tfrac12, 0) \\cup (0, 1) \\cup (1, \\infty)", 1},
    {"\\sqrt{2}+\\sqrt{5}", "\\sqrt 2+\\sqrt 5", 1},
    {"\\frac{9}{4}\\pi", "\\frac94\\pi", 1},
    {"\\{-1\\} \\cup [0,7)", "\\{-1\\} \\cup [0,7)", 1},
};

/* tests/test_all.py: test_relations_math */
static const Case relations[] = {
    {"x >= 5", "x \\geq 5", 1},
    {"x < 3", "x \\lt 3", 1},
    {"x \\leq 2", "x <= 2", 1},
    {"x > 5", "x \\gt 5", 1},
    {"x != 3", "x \\neq 3", 1},
    {"x > 5", "x < 5", 0},
    {"x \\geq 5", "x \\leq 5", 0},
    {"x \\neq 5", "x != 5", 1},
    {"x \\leq 5", "5 \\geq x", 1},
    {"x \\geq 5", "5 \\leq x", 1},
    {"x = 11", "x = 5+5+1 = 7 =11", 1},
    {"7 = 11a+c", "11a+c", 0},
    {"x = 1/3", "x = 5+5+1 = 1/3 \\approx 11", 1},
    {"11", "x=11", 1},
    {"11", "x\\approx11", 1},
    {"1/3", "x=1/3\\approx1.3", 1},
    {"x < 1", "-x > -1", 1},
    {"x < 1", "x > -1", 0},
    {"x <= 1", "-x >= -1", 1},
    {"a +3z = 0", "0", 0},
    {"1 = \\zzz = x = 0", "0", 1},
    {"2x + z = 1", "1", 0},
    {"a^2 + b = 0", "0", 0},
    {"k=1", "1", 1},
    {"1", "k=1", 1},
    {"z = 1 + 1 = 2", "z = 3+3 = 2", 1},
    {"2x+4y-3=0", "y=-\\frac{1}{2}x+\\frac{3}{4}", 1},
    {"x^2/4 + y^2/3 = 1", "x^2/16 + y^2/12 = 1/4", 1},
};

/* tests/test_all.py: test_matrix_extraction (single matrices) */
static const Case matrices[] = {
    {"\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}", " \\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix} ", 1},
    {"\\begin{bmatrix}0 & 0 \\\\0 & 0\\end{bmatrix}", " \\begin{pmatrix}0 & 0 \\\\0 & 0\\end{pmatrix} ", 1},
    {"\\begin{pmatrix}1 & 2 \\\\3 & 4\\end{pmatrix}", " \\left[\\begin{array}{cc}1 & 2 \\\\3 & 4\\end{array}\\right] ", 1},
    {"\\begin{pmatrix}\\frac{1}{2} & \\frac{3}{4} \\\\ \\frac{5}{6} & \\frac{7}{8}\\end{pmatrix}",
     " \\begin{pmatrix}\\frac{1}{2} & \\frac{3}{4} \\\\ \\frac{5}{6} & \\frac{7}{8}\\end{pmatrix} ", 1},
    {"\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}", "\\begin{pmatrix}1 & 2 \\\\ 3 & 5\\end{pmatrix}", 0},
};

/* tests/test_all.py: test_complex_math_expressions (precision 6 ones),
 * test_math_extraction_additional_cases, test_set_rel_assymetry (default
 * allow_set_relation_comp=False, as TRL calls verify), test_sqrt_precision,
 * test_symbols */
static const Case expressions[] = {
    {"\\frac{1}{12}", "0.0833333333333333", 1},
    {"(1,\\frac{9}{2})", "(1,4.5)", 1},
    {"\\frac{x+2}{7}", "\\frac{x}{7}+\\frac{2}{7}", 1},
    {"\\tan^2(y)+1", "\\sec^2(y)", 1},
    {"34x+45y-20z+100=0", "-34x-45y+20z-100=0", 1},
    {"\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{15+2\\sqrt{33}}", "\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{2\\sqrt{33}+15}", 1},
    {"(a+5)(b+2)", "(+5)(b+2)", 0},
    {"2", "\\frac{1+\\sqrt{5}}{2}", 0},
    {"4", "\\frac{34}{16}+\\frac{\\sqrt{1358}}{16}", 0},
    {"1\\sqrt{19}", "1", 0},
    {"x+2n+1", "x+1", 0},
    {"(3,1)", "{1,3}", 0},
    {"(1,3)", "{1,3}", 1},
    {"[-4,0]", "[-4, 0]", 1},
    {"(-6, 10)", "(-6, 10)", 1},
    {"\\text{C}", "\\text{(C)}", 1},
    {"11111111100", "11,\\! 111,\\! 111,\\! 100", 1},
    {"32349", "32,\\! 349", 1},
    {"32349", "32, 349", 0},
    {"(2, 12) \\cup (12, 102)", "x \\in (2,12) \\cup (12,102)", 1},
    {"\\text{E}", "E", 1},
    {"-2 \\le x \\le 7", "x \\in [-2,7]", 1},
    {"x \\in [-2,7]", "-2 \\le x \\le 7", 0},
    {"4", "4\\sqrt{2}", 0},
    {"\\text{13}", "13", 0},
    {"\\frac{1}{3}", "0.333333", 1}, /* test_precision with float_rounding 6 */
};

/* tests/test_numina_cases.py (the ones whose answers the extraction hands over
 * whole; the boxed answer of a prediction, the $..$ of a gold) and
 * tests/test_boxed.py, test_strict.py (strict=True) */
static const Case numina[] = {
    {"(37,3,3,13),(17,3,3,7),(3,37,3,13),(3,17,3,7),(3,3,2,3)",
     "(3, 37, 3, 13), (3, 17, 3, 7), (3, 3, 2, 3), (3,17,3,7), (17,3,3,7), (37,3,3,13)", 1},
    {"(p,q)=(3,2)", "(3,2)", 1},
    {"(0;0;0),(0;-2;0),(0;0;6),(0;-2;6),(4;0;0),(4;-2;0),(4;0;6),(4;-2;6)",
     "(4, 0, 6), (4, -2, 6), (0, 0, 6), (0, -2, 6), (4, 0, 0), (4, -2, 0), (0, 0, 0), (0, -2, 0)", 1},
    {"-12;-11;-10;-8;-7;-6", "\\{-12, -11, -10, -8, -7, -6\\}", 1},
    {"AB=4,CD=5", "4, 5", 1},
    {"(11,7)or(7,11)", "(7,11),\\ (11,7)", 1},
    {"S_{MBCN}:S=7:32", "7:32", 1},
    {"\\frac{NO}{BO}=\\frac{1}{\\sqrt{6}}", "\\frac{1}{\\sqrt{6}}", 1},
    {"(p,q,r)=(3,2,7)", "(3,2,7)", 1},
    {"V_{1}:V_{2}=11:21", "11:21", 1},
    {"\\text{odd}", "odd", 1},
    {"\\text{e}", "e", 1},
    {"\\text{E}", "E", 1},
    {"d", "\\text{E}", 0},
    {"(37,3,3),(17,3,3,7),(3,37,3,13),(3,17,3,7),(3,3,2,3)",
     "(3, 37, 3, 13), (3, 17, 3, 7), (3, 3, 2, 3), (3,17,3,7), (17,3,3,7), (37,3,3,13)", 0},
    {"(p,q)=(3,2)", "(3, 2)", 1},
    {"x = -5,\\ p = \\frac{14}{3}", "-5, \\frac{14}{3}", 1},
    {"a=4,\\,-8,\\,-10", "-10,-8,4", 1},
    {"21,16 or 11", "21,16,11", 1},
    {"p = -1 \\text{ and } p = \\dfrac{15}{8}", "p=-1,p=\\frac{15}{8}", 1},
    {"0<f(x)<1", "(0,1)", 1},
    {"6 \\text{ and } 8", "6,8", 1},
    {"\\text{Even}", "Even", 1},
    {"004", "004", 1},
    {"840", "840", 1},
    {"f(x)", "f(y)", 0},
};

/* tests/test_open_thoughts.py (several boxed answers given here joined by commas) */
static const Case open_thoughts[] = {
    {"2, 3, 5, 7, 13", "{2, 3, 5, 7, 13}", 1},
    {"f(y) = y", "f(y) = y", 1},
    {"-793 < a < 10", "(-793, 10)", 1},
    {"\\text{The midpoints form a regular hexagon}", "\\text{The midpoints form a regular hexagon}", 1},
    {"a_3 = 2, a_{37} = 19", "a_{37} = 19, \\quad a_3 = 2", 1},
    {"(2, 2), (1, 3), (3, 3)", "(2, 2), (1, 3), (3, 3)", 1},
    {"(1, +\\infty)", "(1, +\\infty)", 1},
    {"x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}", "x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}", 1},
    {"0.06 \\text{ yuan}", "0.06 \\text{ yuan}", 1},
    {"(5, 8), (8, 5)", "(x, y) = (5, 8) \\quad \\text{and} \\quad (8, 5)", 1},
    {"667", "667", 1},
    {"6 \\text{ and } 8", "6 \\text{ and } 8", 1},
    {"(2, 2), (6, 2)", "(2, 2), (6, 2)", 1},
    {"k \\ge 2", "k \\ge 2", 1},
    {"k = 45, n = 2", "k = 45, n = 2", 1},
    {"|AB|=1", "1", 1},
    {"A:B=1", "1", 1},
    {"f(x)=1", "1", 1},
    {"x_{1}=10^{\\frac{-5+\\sqrt{13}}{6}},\\quadx_{2}=10^{\\frac{-5-\\sqrt{13}}{6}}",
     "10^{\\frac{\\sqrt{13} - 5}{6}}, 10^{-\\frac{5 + \\sqrt{13}}{6}}", 1},
    {"y_{1}=-2 x^{2}+4 x+3, y_{2}=3 x^{2}+12 x+10", "-2(x - 1)^2 + 5, 3(x + 2)^2 - 2", 1},
    {"x_{1}=\\frac{1}{2}+\\frac{31\\sqrt{5}}{216},\\quadx_{2}=\\frac{1}{2}-\\frac{31\\sqrt{5}}{216}",
     "\\dfrac{108 + 31\\sqrt{5}}{216}, \\dfrac{108 - 31\\sqrt{5}}{216}", 1},
};

/* TRL tests/test_rewards.py (accuracy_reward) and open-r1 tests/test_rewards.py:
 * the gold solutions against the boxed answers. */
static const Case trl_open_r1[] = {
    {"\\frac{63}{400}", "\\frac{63}{400}", 1},
    {"63/400", "\\frac{63}{400}", 1},
    {"\\frac{63}{400}", "\\frac{64}{400}", 0},
    {"6", "3", 0},
    {"\\frac{1}{3}", "\\frac{1}{3}", 1},
    {"\\frac{1}{3}", "\\frac{1}{2}", 0},
};

/* Our own consequences of the rules above (math_verify's grader.py semantics):
 * percent is a hundredth, mixed numbers, sets in any order, tuples in order,
 * degrees dropped, units stripped, infinities, implicit products. */
static const Case derived[] = {
    {"0.5", "50\\%", 1},                       /* 50% is 1/2, compared rounded with a decimal */
    {"50", "50\\%", 0},
    {"\\frac{5}{2}", "2\\frac{1}{2}", 1},      /* latex2sympy's mixed number */
    {"\\{1,2,3\\}", "\\{3,1,2\\}", 1},
    {"\\{1,2,3\\}", "\\{1,2\\}", 0},
    {"(1,2,3)", "(3,2,1)", 0},
    {"(1,2,3)", "(1,2,3)", 1},
    {"[1,2]", "[1,2)", 0},
    {"(-\\infty, 3]", "(-\\infty,3]", 1},
    {"x \\in (-\\infty, 3)", "x < 3", 0},      /* a set gold against a relation: not compared */
    {"x < 3", "(-\\infty, 3)", 1},             /* a relation gold against a set: read as the set */
    {"2\\pi", "\\pi \\cdot 2", 1},
    {"e^2", "e \\cdot e", 1},
    {"2^{10}", "1024", 1},
    {"5!", "120", 1},
    {"\\binom{5}{2}", "10", 1},
    {"\\sqrt[3]{8}", "2", 1},
    {"\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", 1},
    {"x^2-1", "(x-1)(x+1)", 1},
    {"x^2-1", "(x-1)^2", 0},
    {"a b", "ab", 1},
    {"2a", "2b", 0},                           /* variables matter (strict) */
    {"12 \\text{ and } 13", "12, 13", 1},
    {"\\text{yes}", "yes", 1},
    {"3", "3 \\text{ cm}^2", 1},
    {"1,000,000", "10^6", 1},
    {"-\\frac{3}{4}", "-0.75", 1},
    {"0.333", "\\frac{1}{3}", 0},               /* rounded to 6 decimals: 0.333 != 0.333333 */
    {"\\frac{1}{3}", "0.3333333", 1},
    {"|-3|", "3", 1},
    {"x^2 = 4", "x = 2", 0},                   /* different solution sets: sympy's solve agrees */
    {"\\ln(e^2)", "2", 1},
};

/* Known differences: math_verify accepts these (tests/test_all.py) and we do
 * not; asserted as what we return, and listed in docs/rewards.md. */
static const Case known_differences[] = {
    /* matrix arithmetic is not evaluated (test_matrix_extraction) */
    {"\\begin{pmatrix}6 & 8 \\\\ 10 & 12\\end{pmatrix}",
     "\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix} + \\begin{pmatrix}5 & 6 \\\\ 7 & 8\\end{pmatrix}", 0},
    /* decimal commas are read only in plain-text numbers by math_verify (test_number_extraction) */
    {"1000.99", "1000,99", 0},
    /* an interval gold against a relation needs allow_set_relation_comp, which TRL does not pass */
    /* |z| bounds against a union: sympy solves the relation (test_numina_cases.py) */
    {"1\\leq|z|\\leq \\frac{3}{2}", "z \\in \\left[-\\frac{3}{2}, -1\\right] \\cup \\left[1, \\frac{3}{2}\\right]", 0},
    /* pairs of assignments against tuples (test_numina_cases.py) */
    {"p=5,q=2;p=7,q=2", "(5,2),(7,2)", 0},
    /* inequalities in one variable equal only after solving (sympy's solve) */
    {"x^2 < 4", "-2 < x < 2", 0},
};

static void test_parse_errors(void) {
    MathArena *arena = math_arena_new();
    const char *bad[] = {"\\int_0^1 x dx", "\\frac{1}{", "(1,2", "\\zzz", "\\sum_{i=1}^n i", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        T_CHECK(!math_parse(arena, bad[i]), "'%s' should not parse", bad[i]);
    /* deep nesting stops at the depth limit, not the stack */
    char deep[4001];
    for (int i = 0; i < 2000; i++) deep[i] = '(', deep[4000 - 1 - i] = ')';
    deep[4000] = 0;
    T_CHECK(!math_parse(arena, deep), "2000 nested parentheses are refused");
    char *sets = malloc(4 * 2000 + 1), *o = sets;
    for (int i = 0; i < 1000; i++) memcpy(o, "\\{", 2), o += 2;
    for (int i = 0; i < 1000; i++) memcpy(o, "\\}", 2), o += 2;
    *o = 0;
    T_CHECK(!math_parse(arena, sets), "1000 nested sets are refused");
    /* a left-deep chain of 5000 terms: refused by the node limit (evaluation recurses on it) */
    char *sum = malloc(2 * 5000 + 1);
    for (int i = 0; i < 5000; i++) sum[2 * i] = '1', sum[2 * i + 1] = '+';
    sum[2 * 5000 - 1] = 0;
    T_CHECK(!math_parse(arena, sum), "5000 terms are refused");
    sum[2 * 100 - 1] = 0;
    T_CHECK(math_parse(arena, sum) && math_answers_equal(sum, "100"), "100 terms are read and summed");
    /* 16 sets of 16 sets of 16 elements against a reordering: a bounded amount of work, then "different" */
    char *wide = malloc(64 * 1024), *w = wide;
    w += sprintf(w, "\\{");
    for (int i = 0; i < 15; i++) {
        w += sprintf(w, "%s\\{", i ? "," : "");
        for (int j = 0; j < 15; j++) w += sprintf(w, "%s\\{%d,%d\\}", j ? "," : "", i, j);
        w += sprintf(w, "\\}");
    }
    w += sprintf(w, "\\}");
    const MathValue *big = math_parse(arena, wide);
    T_CHECK(big && math_values_equal(big, big) == 1, "a wide nested set equals itself");
    free(wide);
    free(sets);
    free(sum);
    math_arena_free(arena);
}

static void test_correct_entry_point(void) {
    /* TRL tests/test_rewards.py: test_accuracy_reward_unparsable_gold: no answer in the gold is None */
    T_CHECK(reward_math_correct("Answer is forty two.", "Answer is forty two.") == -1, "prose gold: no value");
    T_CHECK(reward_math_correct("Some other content. \\boxed{43}.", "Answer is forty three.") == -1,
            "prose gold: no value");
    T_CHECK(reward_math_correct("\\boxed{3}", "6") == 0, "TRL wrong_answer_no_latex");
    T_CHECK(reward_math_correct("\\boxed{\\frac{63}{400}}", "63/400") == 1, "TRL correct_answer 63/400");
    T_CHECK(reward_math_correct("so \\boxed{x \\in [0, 1)}", "The answer is $[0,1)$.") == 1, "interval in text gold");
    T_CHECK(reward_math_correct("\\boxed{12}", "The train covers 12 miles.") == 1, "last number of a prose gold");
    T_CHECK(reward_math_correct("no answer here", "$5$") == 0, "no answer in the completion");
    /* several boxes read as one list (test_all.py test_math_extraction_additional_cases, test_open_thoughts.py) */
    T_CHECK(reward_math_correct("$\\boxed{1,2}$", "$\\boxed{1}\\boxed{2}$") == 1, "gold boxes 1 and 2 against 1,2");
    T_CHECK(reward_math_correct("$$\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$$", "$$(2, 2), (6, 2)$$") == 1,
            "boxes joined by and");
    T_CHECK(reward_math_correct("$$\\boxed{k = 45} \\quad \\text{and} \\quad \\boxed{n = 2}$$", "$$k = 45, n = 2$$") == 1,
            "boxed assignments joined by and");
    /* test_all.py test_percent_notation, with TRL's anchoring */
    T_CHECK(reward_math_correct("$\\boxed{28}$ pct", "$28\\%$") == 1, "percent after the environment");
    T_CHECK(reward_math_correct("$\\boxed{28 percentage}$", "$28\\%$") == 1, "percentage in the box");
    T_CHECK(reward_math_correct("$\\boxed{28}$", "$28\\%$") == 0, "28 is not 28 percent");
}

int main(void) {
    RUN("numbers", numbers);
    RUN("fractions", fractions);
    RUN("sets_percents", sets_percents);
    RUN("notation_math", notation_math);
    RUN("relations", relations);
    RUN("matrices", matrices);
    RUN("expressions", expressions);
    RUN("numina", numina);
    RUN("open_thoughts", open_thoughts);
    RUN("trl_open_r1", trl_open_r1);
    RUN("derived", derived);
    RUN("known_differences", known_differences);
    test_parse_errors();
    test_correct_entry_point();
    return t_summary("test_math_verify");
}
