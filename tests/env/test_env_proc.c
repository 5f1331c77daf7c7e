/* tests/env/test_env_proc.c — the environment process (env/env_proc.h) with a
 * fake environment in a few lines of Python: the request carries the
 * conversation, the row, the turn and "last"; content, done, done with a
 * reward, a null reward; a process that times out, crashes, writes garbage, an
 * array, or a reply that breaks the protocol (both or neither of content and
 * done, content not a string, a reward not a number, an unknown key): each -1
 * with its message, within the timeout, and later steps fail at once. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env/env_proc.h"
#include "testutil.h"

static char tmp[] = "/tmp/grpo-env-XXXXXX";
static char script[600], log_path[600], command[1400];

static const char *FAKE =
    "import json, sys, time\n"
    "log = open(sys.argv[1], 'a')\n"
    "for line in sys.stdin:\n"
    "    req = json.loads(line); log.write(line); log.flush()\n"
    "    said = req['messages'][-1]['content']\n"
    "    if said == 'sleep': time.sleep(60)\n"
    "    if said == 'crash': sys.exit(3)\n"
    "    if said == 'garbage': print('hello', flush=True); continue\n"
    "    out = {'win': {'done': True, 'reward': 1.5}, 'stop': {'done': True}, 'null': {'done': True, 'reward': None},\n"
    "           'scored': {'content': 'closer', 'reward': -2}, 'array': [1],\n"
    "           'both': {'content': 'x', 'done': True}, 'neither': {'reward': 1}, 'notdone': {'done': False},\n"
    "           'number': {'content': 3}, 'textreward': {'done': True, 'reward': '1'},\n"
    "           'score': {'done': True, 'score': 1}}.get(said)\n"
    "    if out is None:\n"
    "        out = {'content': 'turn %d last %s secret %s: you said %s' % (req['turn'], req['last'],\n"
    "               req['row'].get('secret'), said)}\n"
    "    print(json.dumps(out), flush=True)\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the conversation [system, user, assistant: said] */
static json_t *conversation(const char *said) {
    json_t *m = json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "role", "system", "content", "Guess.", "role",
                          "user", "content", "A number?", "role", "assistant", "content", said);
    CHECK(m);
    return m;
}

static int step(EnvProc *p, const char *said, int turn, int last, EnvReply *r, GrpoErr *err) {
    json_t *m = conversation(said), *row = json_pack("{s:i, s:s}", "secret", 7, "prompt", "A number?");
    int rc = env_proc_step(p, m, row, turn, last, r, err);
    json_decref(m);
    json_decref(row);
    return rc;
}

static void test_steps(void) {
    EnvProc *p;
    GrpoErr err = {{0}};
    T_CHECK(env_proc_start(&p, command, 20, &err) == 0, "start: %s", err.msg);
    if (!p) return;
    EnvReply r;
    T_CHECK(step(p, "5", 2, 0, &r, &err) == 0 && !r.done && !r.has_reward && r.content &&
                !strcmp(r.content, "turn 2 last False secret 7: you said 5"),
            "content: '%s' (%s)", r.content ? r.content : "", err.msg);
    env_reply_free(&r);
    T_CHECK(step(p, "6", 3, 1, &r, &err) == 0 && r.content && strstr(r.content, "turn 3 last True"),
            "last: '%s'", r.content ? r.content : "");
    env_reply_free(&r);
    T_CHECK(step(p, "win", 1, 0, &r, &err) == 0 && r.done && !r.content && r.has_reward && r.reward == 1.5,
            "done with a reward: %d %d %g (%s)", r.done, r.has_reward, r.reward, err.msg);
    env_reply_free(&r);
    T_CHECK(step(p, "stop", 1, 0, &r, &err) == 0 && r.done && !r.has_reward, "done without a reward");
    env_reply_free(&r);
    T_CHECK(step(p, "null", 1, 0, &r, &err) == 0 && r.done && !r.has_reward, "a null reward is none");
    env_reply_free(&r);
    T_CHECK(step(p, "scored", 1, 0, &r, &err) == 0 && !r.done && r.content && r.has_reward && r.reward == -2,
            "content with a reward: %g", r.reward);
    env_reply_free(&r);
    /* the request as the environment saw it */
    FILE *f = fopen(log_path, "r");
    char line[4096] = "";
    T_CHECK(f && fgets(line, sizeof line, f), "the log has the first request");
    if (f) fclose(f);
    json_t *req = json_loads(line, 0, NULL);
    json_t *want = json_pack("{s:o, s:{s:i, s:s}, s:i, s:b}", "messages", conversation("5"), "row", "secret", 7,
                             "prompt", "A number?", "turn", 2, "last", 0);
    T_CHECK(req && json_equal(req, want), "the request: %s", line);
    json_decref(req);
    json_decref(want);
    /* no row: {} */
    json_t *m = conversation("7");
    T_CHECK(env_proc_step(p, m, NULL, 1, 0, &r, &err) == 0 && r.content && strstr(r.content, "secret None"),
            "no row: '%s'", r.content ? r.content : "");
    env_reply_free(&r);
    json_decref(m);
    env_proc_close(p);
}

/* a process that fails on `said`: -1 with want in the message, soon */
static void expect_failure(const char *said, double timeout_s, const char *want) {
    EnvProc *p;
    GrpoErr err = {{0}};
    T_CHECK(env_proc_start(&p, command, timeout_s, &err) == 0, "start: %s", err.msg);
    if (!p) return;
    EnvReply r;
    double t0 = now_s();
    int rc = step(p, said, 4, 0, &r, &err);
    double took = now_s() - t0;
    T_CHECK(rc == -1 && !r.content && !r.done && strstr(err.msg, want) && strstr(err.msg, "environment command '"),
            "%s: rc %d, '%s' (want '%s')", said, rc, err.msg, want);
    T_CHECK(took < timeout_s + 3, "%s: took %.1f s", said, took);
    rc = step(p, "5", 1, 0, &r, &err);
    T_CHECK(rc == -1 && strstr(err.msg, "not running"), "%s: then not running: '%s'", said, err.msg);
    t0 = now_s();
    env_proc_close(p);
    T_CHECK(now_s() - t0 < 5, "close is prompt");
}

int main(void) {
    CHECK(mkdtemp(tmp));
    snprintf(script, sizeof script, "%s/env.py", tmp);
    snprintf(log_path, sizeof log_path, "%s/requests.log", tmp);
    snprintf(command, sizeof command, "python3 %s %s", script, log_path);
    FILE *f = fopen(script, "w");
    CHECK(f);
    fputs(FAKE, f);
    fclose(f);
    test_steps();
    expect_failure("sleep", 1.0, "no reply within 1 s (environment_timeout)");
    expect_failure("crash", 10, "exited with status 3 before replying");
    expect_failure("garbage", 10, "is not a JSON object ('hello')");
    expect_failure("array", 10, "a reply must be a JSON object (turn 4 got '[1]')");
    expect_failure("both", 10, "\"content\" and \"done\": true together (turn 4 got");
    expect_failure("neither", 10, "a reply needs \"content\" or \"done\": true (turn 4 got '{\"reward\":1}')");
    expect_failure("notdone", 10, "a reply needs \"content\" or \"done\": true");
    expect_failure("number", 10, "\"content\" must be a string");
    expect_failure("textreward", 10, "\"reward\" must be a number or null");
    expect_failure("score", 10, "unknown key 'score' (expected \"content\", \"done\", \"reward\")");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return t_summary("test_env_proc");
}
