/* tests/env/test_env_loop.c — a completion's environment turn (env/env_loop.h)
 * on the byte-level tokenizer's ChatML template, with a fake environment that
 * answers from the request alone:
 *  - a turn's reply rendered as the next user turn and the generation prompt;
 *    the request holds the prompt, the model's turns without their end-of-turn
 *    token, the environment's messages, the row, the turn and "last";
 *  - done ends the completion with its reward; the last reward given counts;
 *    max_turns asks once more with "last": true and ends there; a new group
 *    resets the rewards;
 *  - in generation with a tiny random model: turns happen, appended ids are
 *    masked and decode to the environment's messages, and ids, masks, sampling
 *    log-probs, turns, rewards and the requests made are the same for every
 *    chunk size and without the shared prompt prefix;
 *  - an environment that crashes or times out in generation: -1 with its
 *    message, well before the 60 s the sleeping one would take. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env/env_loop.h"
#include "model/config.h"
#include "model/init.h"
#include "testutil.h"

#define G 6

static char tmp[] = "/tmp/grpo-envloop-XXXXXX";
static char script[600], log_path[600];
static Tokenizer *tok;

static const char *FAKE =
    "import json, sys, time\n"
    "log, mode = open(sys.argv[1], 'a'), sys.argv[2]\n"
    "for line in sys.stdin:\n"
    "    req = json.loads(line); log.write(line); log.flush()\n"
    "    said = req['messages'][-1]['content']\n"
    "    if said == 'crash' or mode == 'crash': sys.exit(3)\n"
    "    if mode == 'sleep': time.sleep(60)\n"
    "    h = sum(map(ord, said))\n"
    "    if said == 'win': out = {'done': True, 'reward': 1.5}\n"
    "    elif said == 'stop': out = {'done': True}\n"
    "    elif h % 3 == 0: out = {'done': True, 'reward': h % 7}\n"
    "    else: out = {'content': 'no %d %d' % (len(said), req['turn']), 'reward': req['turn'] / 4}\n"
    "    print(json.dumps(out), flush=True)\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static EnvProc *start(const char *mode, double timeout_s) {
    char command[1400];
    snprintf(command, sizeof command, "python3 %s %s %s", script, log_path, mode);
    EnvProc *p;
    GrpoErr err;
    if (env_proc_start(&p, command, timeout_s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return p;
}

/* the log's lines, sorted, as one string (malloc'd); the log emptied */
static char *take_log(void) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "sort %s > %s.sorted && : > %s", log_path, log_path, log_path);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s.sorted", log_path);
    FILE *f = fopen(cmd, "r");
    CHECK(f);
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    for (int ch; (ch = fgetc(f)) != EOF;) {
        if (n + 1 == cap) s = realloc(s, cap *= 2);
        s[n++] = (char)ch;
    }
    s[n] = 0;
    fclose(f);
    return s;
}

/* the last request in the log */
static json_t *last_request(void) {
    FILE *f = fopen(log_path, "r");
    char line[8192], last[8192] = "";
    while (f && fgets(line, sizeof line, f)) strcpy(last, line);
    if (f) fclose(f);
    return json_loads(last, 0, NULL);
}

static char *text_of(const int32_t *ids, int n) {
    char *t = NULL;
    size_t len;
    GrpoErr err;
    CHECK(tok_decode(tok, ids, (size_t)n, 0, &t, &len, &err) == 0);
    return t;
}

/* c := the texts of parts, model's and appended alternating (appended masked 0),
 * each model part ending with <|im_end|> */
static void make(Completion *c, const char *const *parts, int n_parts) {
    memset(c, 0, sizeof *c);
    c->ids = malloc(4096 * sizeof *c->ids);
    c->mask = malloc(4096);
    GrpoErr err;
    for (int p = 0; p < n_parts; p++) {
        TokIds ids = {0};
        CHECK(tok_encode(tok, parts[p], strlen(parts[p]), 0, &ids, &err) == 0);
        memcpy(c->ids + c->n, ids.ids, ids.n * sizeof *ids.ids);
        memset(c->mask + c->n, p % 2 == 0, ids.n);
        c->n += (int)ids.n;
        if (p % 2 == 0) c->mask[c->n] = 1, c->ids[c->n++] = 258;
        tok_ids_free(&ids);
    }
    c->n_turns = n_parts / 2;
}

#define USER(x) "\n<|im_start|>user\n" x "<|im_end|>\n<|im_start|>assistant\n"

static json_t *prompt_messages(void) {
    return json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", "Guess.", "role", "user", "content",
                     "A number?");
}

static void test_turns(void) {
    json_t *prompt = prompt_messages(), *row = json_pack("{s:i}", "secret", 7);
    EnvLoop l = {.tok = tok, .proc = start("play", 20), .max_turns = -1};
    env_loop_begin_group(&l, prompt, row, 3);
    Completion c;
    const int32_t *ids;
    const char *one[] = {"5"};
    make(&c, one, 1);
    int k = env_loop_turn_end(&l, 0, &c, &ids);
    char *t = k > 0 ? text_of(ids, k) : NULL;
    T_CHECK(t && !strcmp(t, USER("no 1 1")), "a reply as the next user turn: %d '%s' (%s)", k, t ? t : "", l.err.msg);
    free(t);
    T_CHECK(env_loop_reward(&l, 0) == 0.25 && isnan(env_loop_reward(&l, 1)), "its reward %g, none for another",
            env_loop_reward(&l, 0));
    json_t *req = last_request();
    json_t *want = json_pack("{s:[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}], s:O, s:i, s:b}", "messages", "role", "system",
                             "content", "Guess.", "role", "user", "content", "A number?", "role", "assistant",
                             "content", "5", "row", row, "turn", 1, "last", 0);
    T_CHECK(req && json_equal(req, want), "the first request");
    json_decref(req), json_decref(want);
    completion_free(&c);

    /* the second turn: the conversation so far, "win" ends it with its reward */
    const char *two[] = {"5", USER("no 1 1"), "win"};
    make(&c, two, 3);
    T_CHECK(env_loop_turn_end(&l, 0, &c, &ids) == 0 && env_loop_reward(&l, 0) == 1.5 && l.done == 1 && l.steps == 2,
            "done: reward %g, done %ld (%s)", env_loop_reward(&l, 0), l.done, l.err.msg);
    req = last_request();
    want = json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "role", "system", "content",
                     "Guess.", "role", "user", "content", "A number?", "role", "assistant", "content", "5", "role",
                     "user", "content", "no 1 1", "role", "assistant", "content", "win");
    T_CHECK(req && json_equal(json_object_get(req, "messages"), want) &&
                json_integer_value(json_object_get(req, "turn")) == 2,
            "the second request holds the whole conversation");
    json_t *after = json_array();
    for (int i = 2; i < 5; i++) json_array_append(after, json_array_get(want, i));
    T_CHECK(json_equal(env_loop_turns(&l, 0), after), "the completion's turns: the messages after the prompt");
    json_decref(after);
    json_decref(req), json_decref(want);
    completion_free(&c);

    /* "stop": done without a reward, after a turn that gave one: the last given counts */
    const char *stop[] = {"5", USER("no 1 1"), "stop"};
    make(&c, one, 1);
    T_CHECK(env_loop_turn_end(&l, 1, &c, &ids) > 0, "turn 1 of completion 1");
    completion_free(&c);
    make(&c, stop, 3);
    T_CHECK(env_loop_turn_end(&l, 1, &c, &ids) == 0 && env_loop_reward(&l, 1) == 0.25 && l.done == 2,
            "done without a reward keeps the last one: %g", env_loop_reward(&l, 1));
    completion_free(&c);

    /* max_turns 1: the second turn is asked with "last" and ends the completion whatever the reply */
    l.max_turns = 1;
    make(&c, one, 1);
    T_CHECK(env_loop_turn_end(&l, 2, &c, &ids) > 0, "max_turns 1: the first reply is appended");
    completion_free(&c);
    const char *more[] = {"5", USER("no 1 1"), "58"};
    make(&c, more, 3);
    T_CHECK(env_loop_turn_end(&l, 2, &c, &ids) == 0 && env_loop_reward(&l, 2) == 0.5 && l.limited == 1,
            "max_turns 1: ends with the reply's reward %g (%s)", env_loop_reward(&l, 2), l.err.msg);
    req = last_request();
    T_CHECK(req && json_is_true(json_object_get(req, "last")), "max_turns: the request says last");
    json_decref(req);
    completion_free(&c);
    /* max_turns 0: asked once, for the reward; a completion starting again is reset */
    l.max_turns = 0;
    make(&c, one, 1);
    T_CHECK(env_loop_turn_end(&l, 2, &c, &ids) == 0 && env_loop_reward(&l, 2) == 0.25 &&
                json_array_size(env_loop_turns(&l, 2)) == 1 && l.limited == 2,
            "max_turns 0: one request, its reward %g", env_loop_reward(&l, 2));
    completion_free(&c);
    /* a new group: no rewards, no turns */
    env_loop_begin_group(&l, prompt, row, 2);
    T_CHECK(isnan(env_loop_reward(&l, 0)) && json_array_size(env_loop_turns(&l, 0)) == 0, "a new group is reset");
    /* a crash: -1 with its message, then not running */
    l.max_turns = -1;
    const char *crash[] = {"crash"};
    make(&c, crash, 1);
    T_CHECK(env_loop_turn_end(&l, 0, &c, &ids) == -1 && strstr(l.err.msg, "exited with status 3") &&
                strstr(l.err.msg, "environment command '"),
            "crash: %s", l.err.msg);
    T_CHECK(env_loop_turn_end(&l, 1, &c, &ids) == -1 && strstr(l.err.msg, "not running"), "then: %s", l.err.msg);
    completion_free(&c);
    env_proc_close(l.proc);
    env_loop_free(&l);
    json_decref(prompt), json_decref(row);
    free(take_log()); /* the log emptied for the next test */
}

typedef struct {
    Completion c[G];
    double reward[G];
    json_t *turns[G];
    char *requests;
    long n;
} Run;

static void run_free(Run *r) {
    for (int i = 0; i < G; i++) completion_free(&r->c[i]), json_decref(r->turns[i]);
    free(r->requests);
}

static long generate(Model *m, const GenOpts *o, EnvLoop *l, const TokIds *prompt, const json_t *messages,
                     Run *r) {
    Generator g;
    GrpoErr err;
    if (gen_create(&g, m, o, 64, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    GenTurns t = {env_loop_turn_end, l};
    gen_set_turns(&g, &t);
    env_loop_begin_group(l, messages, NULL, G);
    r->n = gen_group(&g, prompt->ids, (int)prompt->n, G, 11, r->c);
    for (int i = 0; i < G; i++) {
        r->reward[i] = env_loop_reward(l, i);
        r->turns[i] = json_copy((json_t *)env_loop_turns(l, i));
    }
    r->requests = take_log();
    gen_free(&g);
    return r->n;
}

static int same(const Run *a, const Run *b) {
    if (strcmp(a->requests, b->requests)) return 0;
    for (int i = 0; i < G; i++) {
        const Completion *x = &a->c[i], *y = &b->c[i];
        if (x->n != y->n || x->stopped != y->stopped || x->n_turns != y->n_turns ||
            memcmp(x->ids, y->ids, sizeof(int32_t) * x->n) || memcmp(x->logp, y->logp, sizeof(float) * x->n) ||
            memcmp(x->mask, y->mask, x->n))
            return 0;
        if (memcmp(&a->reward[i], &b->reward[i], sizeof(double)) || !json_equal(a->turns[i], b->turns[i])) return 0;
    }
    return 1;
}

static void test_generation(void) {
    json_t *cj = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:i, s:i}", "model_type", "qwen3",
                           "hidden_size", 32, "intermediate_size", 64, "num_hidden_layers", 2, "num_attention_heads",
                           4, "num_key_value_heads", 2, "head_dim", 8, "vocab_size", 259, "rms_norm_eps", 1e-6,
                           "rope_theta", 10000.0, "tie_word_embeddings", 1, "max_position_embeddings", 256,
                           "eos_token_id", 258);
    ModelConfig cfg;
    GrpoErr err;
    CHECK(config_from_json(&cfg, cj, "tiny", &err) == 0);
    json_decref(cj);
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 5, 0.2f);
    json_t *messages = prompt_messages();
    char *text;
    TokIds prompt = {0};
    CHECK(tok_chat_render_json(tok, messages, 1, NULL, &text, &err) == 0);
    CHECK(tok_encode(tok, text, strlen(text), 0, &prompt, &err) == 0);
    free(text);
    GenOpts o;
    gen_opts_default(&o);
    o.seed = 3;
    o.max_completion_length = 72;
    o.n_eos = 16; /* turns end often: <|im_end|> and 15 bytes */
    o.eos_ids[0] = 258;
    for (int i = 1; i < 16; i++) o.eos_ids[i] = 60 + 5 * i;
    o.chunk_size = G;
    EnvLoop l = {.tok = tok, .proc = start("play", 20), .max_turns = 3};
    Run ref;
    long n = generate(&m, &o, &l, &prompt, messages, &ref);
    T_CHECK(n > 0, "generated %ld (%s)", n, l.err.msg);
    int turned = 0, turned2 = 0, rewarded = 0, spans_ok = 1;
    for (int i = 0; i < G; i++) {
        const Completion *c = &ref.c[i];
        turned += c->n_turns >= 1, turned2 += c->n_turns >= 2, rewarded += !isnan(ref.reward[i]);
        /* each masked span decodes to the environment's next message, rendered */
        int span = 0;
        for (int t = 0; t < c->n;) {
            if (c->mask[t]) { t++; continue; }
            int e = t;
            while (e < c->n && !c->mask[e]) e++;
            char *got = text_of(c->ids + t, e - t), want[512];
            const char *msg = json_string_value(json_object_get(json_array_get(ref.turns[i], 2 * span + 1), "content"));
            snprintf(want, sizeof want, USER("%s"), msg ? msg : "?");
            spans_ok &= msg && !strcmp(got, want) && !strcmp(json_string_value(json_object_get(
                                                                 json_array_get(ref.turns[i], 2 * span + 1), "role")),
                                                             "user");
            free(got);
            span++, t = e;
        }
        spans_ok &= span == c->n_turns && c->n_turns <= 3;
    }
    T_CHECK(turned >= 2 && turned2 >= 1 && rewarded >= 2, "turns happened: %d, %d with two, %d rewarded", turned,
            turned2, rewarded);
    T_CHECK(spans_ok, "appended spans are the environment's messages, masked");
    int chunks[] = {1, 4};
    for (int k = 0; k < 2; k++)
        for (int share = 1; share >= 0; share--) {
            o.chunk_size = chunks[k], o.share_prefix = share;
            Run r;
            generate(&m, &o, &l, &prompt, messages, &r);
            T_CHECK(same(&ref, &r), "chunk %d share_prefix %d differs from chunk %d", chunks[k], share, G);
            run_free(&r);
        }
    o.chunk_size = 2, o.share_prefix = 1;
    env_proc_close(l.proc);
    /* failures in generation: -1, promptly, with the environment's message */
    const char *modes[] = {"crash", "sleep"};
    const char *wants[] = {"exited with status 3", "no reply within 1 s"};
    for (int k = 0; k < 2; k++) {
        /* the crash's exit is seen when it comes, whatever the timeout: 20 s, so that a
         * loaded machine's slow interpreter start does not read as "no reply within 1 s" */
        l.proc = start(modes[k], k == 0 ? 20.0 : 1.0);
        Run r;
        double t0 = now_s();
        long got = generate(&m, &o, &l, &prompt, messages, &r);
        T_CHECK(got == -1 && strstr(l.err.msg, wants[k]) && now_s() - t0 < 30, "%s: %ld '%s' in %.1f s", modes[k], got,
                l.err.msg, now_s() - t0);
        run_free(&r);
        env_proc_close(l.proc);
    }
    env_loop_free(&l);
    run_free(&ref);
    tok_ids_free(&prompt);
    json_decref(messages);
    model_free(&m);
}

int main(void) {
    GrpoErr err;
    CHECK(tok_load(&tok, "assets/byte-tokenizer", &err) == 0);
    CHECK(mkdtemp(tmp));
    snprintf(script, sizeof script, "%s/env.py", tmp);
    snprintf(log_path, sizeof log_path, "%s/requests.log", tmp);
    FILE *f = fopen(script, "w");
    CHECK(f);
    fputs(FAKE, f);
    fclose(f);
    test_turns();
    test_generation();
    tok_free(tok);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return t_summary("test_env_loop");
}
