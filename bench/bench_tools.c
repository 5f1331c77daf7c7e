/* bench/bench_tools.c — what tool calls cost a rollout: generation throughput with
 * a tool of fixed latency, the calls made inside the decoding batch (tool_workers
 * 0: every other sequence waits) against overlapped (tool_workers W: the waits
 * run while the others decode), next to the same model generating without tools.
 * bench/bench_tools.sh makes the model (tests/cli/tool_model.py on a larger
 * config) and the tool, and runs this.
 *
 *   build/bench/bench_tools MODEL_DIR 'TOOL COMMAND' [--G N] [--reps R] [--workers W] [--max_len L]
 *
 * Work per case: one chat prompt, G completions of up to L tokens (the model's and
 * the tools' together, as in training), no limit on rounds of calls. Figures per
 * case, the best of R runs: the model's tokens / wall time of gen_group
 * (tokens_per_s), tool calls, and blocked_s: the time decoding stood still waiting
 * for tools (inside turn_end, or turn_wait when no row had anything to decode).
 * The no-tools case's tokens are fewer (a call ends its completion), so it is the
 * rate of the plain decoder, not the same work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "gen/generate.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "tools/tool_loop.h"

typedef struct {
    ToolLoop *l;
    double blocked_s;
} Timed;

static int timed_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    Timed *t = ctx;
    double t0 = time_now_s();
    int k = tool_loop_turn_end(t->l, index, c, ids);
    t->blocked_s += time_now_s() - t0;
    return k;
}

static int timed_begin(void *ctx, int index, const Completion *c, const int32_t **ids) {
    Timed *t = ctx;
    return tool_loop_turn_begin(t->l, index, c, ids);
}

static int timed_wait(void *ctx, int block, int *index, const int32_t **ids) {
    Timed *t = ctx;
    double t0 = time_now_s();
    int k = tool_loop_turn_wait(t->l, block, index, ids);
    if (block) t->blocked_s += time_now_s() - t0;
    return k;
}

static void die(const GrpoErr *err) {
    fprintf(stderr, "bench_tools: %s\n", err->msg);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tools MODEL_DIR 'TOOL COMMAND' [--G N] [--reps R] [--workers W] [--max_len L]\n");
        return 2;
    }
    const char *dir = argv[1], *command = argv[2];
    int G = 16, reps = 3, workers = 4, max_len = 160;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--G")) G = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--workers")) workers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max_len")) max_len = atoi(argv[i + 1]);
        else return fprintf(stderr, "bench_tools: unknown option %s\n", argv[i]), 2;
    }
    GrpoErr err;
    Model m;
    Tokenizer *tok;
    if (model_load(&m, dir, &err) || tok_load(&tok, dir, &err)) die(&err);
    const char *text = "<|im_start|>user\nwhat is 6*7?<|im_end|>\n<|im_start|>assistant\n";
    TokIds prompt = {0};
    if (tok_encode(tok, text, strlen(text), 0, &prompt, &err)) die(&err);
    json_t *schemas = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"calc\", \"parameters\": "
                                 "{\"type\": \"object\", \"properties\": {\"expression\": {\"type\": \"string\"}}}}}]",
                                 0, NULL);
    GenOpts o;
    gen_opts_default(&o);
    o.max_completion_length = max_len;
    o.seed = 11;
    o.n_eos = 1;
    o.eos_ids[0] = m.cfg.eos_token_ids[0];
    o.chunk_size = G;
    const char *cases[] = {"none", "sync", "overlap"};
    double none_rate = 0;
    for (int cs = 0; cs < 3; cs++) {
        Generator g;
        if (gen_create(&g, &m, &o, (int)prompt.n, &err)) die(&err);
        ToolLoop l = {0};
        Timed t = {&l, 0};
        if (cs > 0) {
            ToolArgs a = {"tools", command, 10.0, -1, cs == 2 ? workers : 0};
            if (tool_loop_open(&l, &a, schemas, tok, NULL, &err)) die(&err);
            gen_set_turns(&g, &(GenTurns){timed_end, &t});
            if (cs == 2) gen_set_overlap(&g, &(GenOverlap){timed_begin, timed_wait});
        }
        double best = 1e300, blocked = 0;
        long tokens = 0, calls = 0, all_tokens = 0;
        for (int r = 0; r < reps; r++) {
            Completion *c = calloc(G, sizeof *c);
            long calls0 = l.calls;
            t.blocked_s = 0;
            double t0 = time_now_s();
            long n = gen_group(&g, prompt.ids, (int)prompt.n, G, 1, c);
            double dt = time_now_s() - t0;
            if (n < 0) die(&l.err);
            if (dt < best) {
                best = dt, tokens = n, blocked = t.blocked_s, calls = l.calls - calls0, all_tokens = 0;
                for (int i = 0; i < G; i++) all_tokens += c[i].n;
            }
            for (int i = 0; i < G; i++) completion_free(&c[i]);
            free(c);
        }
        double rate = tokens / best;
        if (cs == 0) none_rate = rate;
        printf("tools case=%s workers=%d G=%d tokens=%ld all_tokens=%ld calls=%ld seconds=%.3f tokens_per_s=%.1f "
               "blocked_s=%.3f vs_no_tools=%.3f\n", cases[cs], cs == 2 ? workers : 0, G, tokens, all_tokens, calls,
               best, rate, blocked, rate / none_rate);
        fflush(stdout);
        tool_loop_close(&l);
        gen_free(&g);
    }
    json_decref(schemas);
    tok_ids_free(&prompt);
    tok_free(tok);
    model_free(&m);
    return 0;
}
