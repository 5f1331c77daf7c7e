/* tests/reward/test_reward_ext.c — rewards outside the process: the cmd child
 * (examples/reward_len.py end to end, the request's contents, a child kept
 * across batches, every failure mode with its message, termination on free)
 * and C plugins built here with cc (examples/reward_plugin_len.c, a failing
 * plugin, NAN values, missing file and symbol). Runs from the repository root
 * ($ROOT, as tests/run.sh does). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/text.h"
#include "reward/reward.h"
#include "testutil.h"

static char tmp[] = "/tmp/grpo-reward-XXXXXX";
static const char *root = ".";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static RewardFunc *make(const char *spec, double timeout_s) {
    RewardFunc *f = NULL;
    GrpoErr err = {{0}};
    RewardOptions opt = {.timeout_s = timeout_s};
    if (reward_new(&f, spec, &opt, &err)) {
        fprintf(stderr, "reward_new(%s): %s\n", spec, err.msg);
        return NULL;
    }
    return f;
}

/* A batch of two: a standard prompt with columns answer=7, level="easy", and a
 * conversational one without `level`. */
typedef struct {
    json_t *rows[2];
    RewardItem items[2];
    int32_t ids0[3], ids1[1];
} Batch2;

static void batch2_init(Batch2 *b) {
    memset(b, 0, sizeof *b);
    b->rows[0] = json_pack("{s:s, s:i, s:s}", "prompt", "What is 3+4?", "answer", 7, "level", "easy");
    b->rows[1] = json_pack("{s:[{s:s, s:s}], s:i}", "prompt", "role", "user", "content", "Hi",
                           "answer", 1);
    b->ids0[0] = 5, b->ids0[1] = 6, b->ids0[2] = 7;
    b->ids1[0] = 9;
    const char *completions[2] = {"héllo", "seven is 7"};
    for (int i = 0; i < 2; i++) {
        b->items[i].prompt = json_object_get(b->rows[i], "prompt");
        b->items[i].prompt_text = i ? "<|im_start|>user\nHi<|im_end|>\n" : "What is 3+4?";
        b->items[i].completion = completions[i];
        b->items[i].completion_ids = i ? b->ids1 : b->ids0;
        b->items[i].n_completion_ids = i ? 1 : 3;
        b->items[i].row = b->rows[i];
        b->items[i].file = "data.jsonl";
        b->items[i].line = i + 1;
    }
}

static void batch2_free(Batch2 *b) {
    json_decref(b->rows[0]);
    json_decref(b->rows[1]);
}

static void test_python_child(void) {
    char spec[1024];
    snprintf(spec, sizeof spec, "cmd:python3 %s/examples/reward_len.py", root);
    RewardFunc *f = make(spec, 30);
    T_CHECK(f && !strcmp(f->name, "reward_len"), "python child starts, named reward_len");
    if (!f) return;
    Batch2 b;
    batch2_init(&b);
    RewardBatch rb = {.items = b.items, .n = 2};
    GrpoErr err = {{0}};
    for (int round = 0; round < 3; round++) { /* the same process, batch after batch */
        double out[2] = {0, 0};
        T_CHECK(reward_compute(f, &rb, out, &err) == 0, "python round %d: %s", round, err.msg);
        /* "héllo" is 5 characters; "seven is 7" 10 (sent as an assistant message) */
        T_CHECK(out[0] == -15 && out[1] == -10, "python rewards %g %g", out[0], out[1]);
    }
    reward_free(f);
    batch2_free(&b);
}

/* The request as the child sees it: written to a file by a shell child. */
static void test_request_contents(void) {
    char spec[1024], path[512];
    snprintf(path, sizeof path, "%s/request.json", tmp);
    snprintf(spec, sizeof spec,
             "cmd:n=0; while read -r line; do n=$((n+1)); printf '%%s\\n' \"$line\" > %s; "
             "echo \"{\\\"rewards\\\": [null, $n.5]}\"; done",
             path);
    RewardFunc *f = make(spec, 30);
    if (!f) { T_CHECK(0, "shell child starts"); return; }
    Batch2 b;
    batch2_init(&b);
    /* the dataset's columns: `source` is in none of the batch's rows */
    char *columns[] = {"prompt", "answer", "source", "level"};
    json_t *state = json_pack("{s:i, s:i, s:f, s:n}", "global_step", 42, "max_steps", 100, "epoch", 1.25,
                              "train_batch_size");
    RewardBatch rb = {b.items, 2, state, columns, 4};
    GrpoErr err = {{0}};
    double out[2];
    T_CHECK(reward_compute(f, &rb, out, &err) == 0 && isnan(out[0]) && out[1] == 1.5,
            "null -> NAN, number kept: %g %g (%s)", out[0], out[1], err.msg);
    T_CHECK(reward_compute(f, &rb, out, &err) == 0 && out[1] == 2.5, "child kept across batches: %g", out[1]);
    json_error_t jerr;
    json_t *req = json_load_file(path, 0, &jerr);
    T_CHECK(req != NULL, "request is one JSON line: %s", req ? "" : jerr.text);
    if (req) {
        json_t *p = json_object_get(req, "prompts"), *c = json_object_get(req, "completions"),
               *ids = json_object_get(req, "completion_ids"), *ans = json_object_get(req, "answer"),
               *lvl = json_object_get(req, "level"), *ts = json_object_get(req, "trainer_state");
        T_CHECK(json_array_size(p) == 2 && !strcmp(json_string_value(json_array_get(p, 0)), "What is 3+4?") &&
                    json_equal(json_array_get(p, 1), json_object_get(b.rows[1], "prompt")),
                "prompts are the original values");
        T_CHECK(!strcmp(json_string_value(json_array_get(c, 0)), "héllo"), "standard completion is text");
        json_t *msg = json_array_get(json_array_get(c, 1), 0);
        T_CHECK(!strcmp(json_string_value(json_object_get(msg, "role")), "assistant") &&
                    !strcmp(json_string_value(json_object_get(msg, "content")), "seven is 7"),
                "conversational completion is [{role: assistant, content}]");
        T_CHECK(json_array_size(json_array_get(ids, 0)) == 3 &&
                    json_integer_value(json_array_get(json_array_get(ids, 0), 2)) == 7 &&
                    json_integer_value(json_array_get(json_array_get(ids, 1), 0)) == 9,
                "completion_ids");
        T_CHECK(json_integer_value(json_array_get(ans, 0)) == 7 && json_integer_value(json_array_get(ans, 1)) == 1,
                "column answer as a list");
        T_CHECK(!strcmp(json_string_value(json_array_get(lvl, 0)), "easy") && json_is_null(json_array_get(lvl, 1)),
                "column missing in one example is null there");
        T_CHECK(!json_object_get(req, "prompt") && json_equal(ts, state), "no 'prompt' column; trainer_state as given");
        json_t *src = json_object_get(req, "source");
        T_CHECK(json_array_size(src) == 2 && json_is_null(json_array_get(src, 0)) && json_is_null(json_array_get(src, 1)),
                "a dataset column no row of the batch has is sent, null for every completion");
        json_decref(req);
    }
    /* without a trainer state: global_step 0 */
    RewardBatch bare = {.items = b.items, .n = 2};
    T_CHECK(reward_compute(f, &bare, out, &err) == 0, "bare batch: %s", err.msg);
    req = json_load_file(path, 0, &jerr);
    json_t *want = json_pack("{s:i}", "global_step", 0);
    T_CHECK(req && json_equal(json_object_get(req, "trainer_state"), want) && !json_object_get(req, "source"),
            "no trainer state: {global_step: 0}; no columns: the batch's");
    json_decref(want);
    json_decref(req);
    json_decref(state);
    reward_free(f);
    batch2_free(&b);
}

/* A failing child: the error must contain want; a second call says not running. */
static void expect_cmd_error(const char *script, double timeout_s, const char *want) {
    char spec[1024];
    snprintf(spec, sizeof spec, "cmd:%s", script);
    RewardFunc *f = make(spec, timeout_s);
    if (!f) { T_CHECK(0, "child '%s' starts", script); return; }
    Batch2 b;
    batch2_init(&b);
    RewardBatch rb = {.items = b.items, .n = 2};
    GrpoErr err = {{0}};
    double out[2];
    double t0 = now_s();
    int rc = reward_compute(f, &rb, out, &err);
    double dt = now_s() - t0;
    char shown[1024]; /* messages name the command escaped, a backslash as \\ */
    text_escaped(shown, sizeof shown, script, 120);
    T_CHECK(rc == -1 && strstr(err.msg, want) && strstr(err.msg, shown) && !strchr(err.msg, '\n'),
            "child '%s': rc %d, '%s' (want '%s')", script, rc, err.msg, want);
    /* a timeout within it; any other failure at once, whatever the timeout */
    T_CHECK(dt < (timeout_s < 5.0 ? timeout_s + 3.0 : 8.0), "child '%s' failed in %.2f s", script, dt);
    rc = reward_compute(f, &rb, out, &err);
    T_CHECK(rc == -1 && strstr(err.msg, "not running"), "after a failure: '%s'", err.msg);
    reward_free(f);
    batch2_free(&b);
}

static void test_cmd_failures(void) {
    expect_cmd_error("sleep 5", 0.3, "no reply within 0.3 s (reward_timeout)");
    expect_cmd_error("read -r l; exit 3", 10, "exited with status 3 before replying");
    expect_cmd_error("exit 4", 10, "exited with status 4");
    expect_cmd_error("read -r l; kill -9 $$", 10, "killed by signal 9");
    expect_cmd_error("/nonexistent/reward-prog 2>/dev/null", 10,
                     "status 127 before replying to request 1 (global_step 0; command not found?)");
    /* an exit is reported at once, with its status, though a process it started
     * still holds its stdout; a closed stdout is seen at once too */
    expect_cmd_error("sleep 300 & read -r l; exit 0", 600, "exited with status 0 before replying to request 1 (global_step 0)");
    expect_cmd_error("(sleep 300 &); read -r l; exit 3", 600, "exited with status 3 before replying");
    expect_cmd_error("setsid sleep 300 & read -r l; kill -TERM $$", 600, "killed by signal 15 (Terminated) before replying");
    expect_cmd_error("exec >&-; read -r l; sleep 300", 600, "closed its stdout before replying to request 1");
    expect_cmd_error("while read -r l; do echo 'not json'; done", 10, "reply is not JSON");
    expect_cmd_error("while read -r l; do echo '[1, 2]'; done", 10, "reply must be an object {\"rewards\"");
    expect_cmd_error("while read -r l; do echo '{\"rewards\": [1]}'; done", 10, "reply has 1 rewards for 2 completions");
    expect_cmd_error("while read -r l; do echo '{\"rewards\": [1, \"a\"]}'; done", 10,
                     "rewards[1] must be a number or null, got a string");
    expect_cmd_error("while read -r l; do echo '{\"rewards\": [1, NaN]}'; done", 10, "reply is not JSON");
    /* the process's own account of a failure, its control characters escaped */
    expect_cmd_error("while read -r l; do echo '{\"error\": \"judge unreachable\\u001b[31m\"}'; done", 10,
                     "': judge unreachable\\x1b[31m");
}

/* A Python function (FILE.py:FUNCTION) gets TRL's keyword arguments: prompts,
 * completions (conversational ones as a message list), completion_ids, every
 * column of the dataset (None where an example lacks it, so a required one no
 * row of the batch has is there), trainer_state with attribute access (its
 * fields as given; one not given raises an AttributeError that says so),
 * log_extra and log_metric; it returns floats and None. */
static void test_python_function(void) {
    char file[512], spec[600], seen[512];
    snprintf(file, sizeof file, "%s/trl_reward.py", tmp);
    snprintf(seen, sizeof seen, "%s/kwargs.json", tmp);
    FILE *fp = fopen(file, "w");
    CHECK(fp);
    fprintf(fp,
            "import json\n"
            "def judge(prompts, completions, completion_ids, trainer_state, source, **kwargs):\n"
            "    print('not on the protocol')\n"
            "    try:\n"
            "        trainer_state.log_history\n"
            "        missing = 'none'\n"
            "    except AttributeError as e:\n"
            "        missing = str(e)\n"
            "    json.dump({'keys': sorted(kwargs), 'prompts': prompts, 'completions': completions,\n"
            "               'ids': completion_ids, 'answer': kwargs['answer'], 'level': kwargs['level'],\n"
            "               'source': source, 'state': [trainer_state.max_steps, trainer_state.epoch,\n"
            "                                           trainer_state.train_batch_size], 'missing': missing,\n"
            "               'callable': [callable(kwargs['log_extra']), callable(kwargs['log_metric'])]},\n"
            "              open('%s', 'w'))\n"
            "    return [float(trainer_state.global_step), None]\n",
            seen);
    fclose(fp);
    snprintf(spec, sizeof spec, "%s:judge", file);
    RewardFunc *f = make(spec, 30);
    if (!f) { T_CHECK(0, "python reward starts"); return; }
    T_CHECK(!strcmp(f->name, "judge"), "log name is the function's __name__: %s", f->name);
    Batch2 b;
    batch2_init(&b);
    char *columns[] = {"prompt", "answer", "level", "source"};
    json_t *state = json_pack("{s:i, s:i, s:f, s:n}", "global_step", 42, "max_steps", 100, "epoch", 1.25,
                              "train_batch_size");
    RewardBatch rb = {b.items, 2, state, columns, 4};
    GrpoErr err = {{0}};
    double out[2] = {0, 0};
    T_CHECK(reward_compute(f, &rb, out, &err) == 0 && out[0] == 42.0 && isnan(out[1]),
            "trainer_state.global_step back, None -> NAN: %g %g (%s)", out[0], out[1], err.msg);
    json_error_t jerr;
    json_t *got = json_load_file(seen, 0, &jerr);
    T_CHECK(got != NULL, "the function ran: %s", got ? "" : jerr.text);
    if (got) {
        json_t *want = json_pack("{s:[s,s,s,s], s:[s,o], s:[s,[{s:s,s:s}]], s:[[i,i,i],[i]], s:[i,i], s:[s,n], "
                                 "s:[n,n], s:[i,f,n], s:s, s:[b,b]}",
                                 "keys", "answer", "level", "log_extra", "log_metric",
                                 "prompts", "What is 3+4?", json_deep_copy(json_object_get(b.rows[1], "prompt")),
                                 "completions", "héllo", "role", "assistant", "content", "seven is 7",
                                 "ids", 5, 6, 7, 9, "answer", 7, 1, "level", "easy", "source", "state", 100, 1.25,
                                 "missing", "trainer_state.log_history is not passed by grpo.c (it passes epoch, "
                                 "global_step, max_steps, train_batch_size)", "callable", 1, 1);
        T_CHECK(json_equal(got, want), "TRL's keyword arguments: %s", json_dumps(got, JSON_COMPACT));
        json_decref(want);
        json_decref(got);
    }
    json_decref(state);
    reward_free(f);
    batch2_free(&b);
    /* start-up failures come from reward_new itself: before any batch */
    const char *source[3] = {"import not_a_module_anywhere\n", "LIMIT = 3\n", "LIMIT = 3\n"};
    const char *func[3] = {"judge", "judge", "LIMIT"};
    const char *want[3] = {"raised ModuleNotFoundError: No module named 'not_a_module_anywhere' (traceback above)",
                           "broken_reward.py has no attribute 'judge'", "'LIMIT' in "};
    snprintf(file, sizeof file, "%s/broken_reward.py", tmp);
    for (int k = 0; k < 3; k++) {
        fp = fopen(file, "w");
        CHECK(fp);
        fputs(source[k], fp);
        fclose(fp);
        snprintf(spec, sizeof spec, "%s:%s", file, func[k]);
        RewardOptions opt = {.timeout_s = 30};
        RewardFunc *g = NULL;
        T_CHECK(reward_new(&g, spec, &opt, &err) == -1 && !g && strstr(err.msg, want[k]) &&
                    strstr(err.msg, "python reward '") && strstr(err.msg, spec),
                "start-up failure from reward_new: '%s' (want '%s')", err.msg, want[k]);
    }
}

/* The child's stderr reaches ours (the stderr the trainer had when the reward
 * was started), each line prefixed with the reward's name. */
static void test_cmd_stderr(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/stderr.txt", tmp);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    CHECK(f && saved >= 0);
    dup2(fileno(f), 2);
    RewardFunc *r = make("logger=cmd:while read -r l; do echo 'log from child' >&2; echo '{\"rewards\": [0, 0]}'; done", 10);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    if (!r) { T_CHECK(0, "stderr child starts"); return; }
    Batch2 b;
    batch2_init(&b);
    RewardBatch rb = {.items = b.items, .n = 2};
    GrpoErr err = {{0}};
    double out[2];
    T_CHECK(reward_compute(r, &rb, out, &err) == 0, "stderr child: %s", err.msg);
    reward_free(r);
    batch2_free(&b);
    char buf[256] = {0};
    f = fopen(path, "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    T_CHECK(!strcmp(buf, "[reward logger] log from child\n"), "child's stderr passes through, prefixed: '%s'", buf);
}

/* reward_free ends the child even when it ignores EOF and SIGTERM. */
static void test_cmd_termination(void) {
    char spec[1024], path[512];
    snprintf(path, sizeof path, "%s/child.pid", tmp);
    snprintf(spec, sizeof spec, "cmd:echo $$ > %s; trap '' TERM; while :; do sleep 0.05; done", path);
    RewardFunc *f = make(spec, 10);
    if (!f) { T_CHECK(0, "stubborn child starts"); return; }
    long pid = 0;
    for (int i = 0; i < 200 && pid == 0; i++) { /* wait for the pid file */
        FILE *pf = fopen(path, "r");
        if (pf) {
            if (fscanf(pf, "%ld", &pid) != 1) pid = 0;
            fclose(pf);
        }
        if (!pid) usleep(10000);
    }
    T_CHECK(pid > 0 && kill((pid_t)pid, 0) == 0, "child %ld running", pid);
    double t0 = now_s();
    reward_free(f);
    T_CHECK(pid > 0 && kill((pid_t)pid, 0) == -1 && errno == ESRCH, "child %ld gone after reward_free", pid);
    T_CHECK(now_s() - t0 < 5.0, "reward_free took %.2f s", now_s() - t0);
}

/* A cmd function is named after its script, not its last argument. */
static void test_cmd_names(void) {
    const char *specs[][2] = {{"cmd:true ./rewards/reward_len.py 20", "reward_len"},
                              {"cmd:true -u score.py --threshold 0.5", "score"},
                              {"cmd:true 20", "true"},
                              {"cmd:/bin/true --fast", "true"},
                              {"mine=cmd:true x.py", "mine"}};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        RewardFunc *f = make(specs[i][0], 10);
        T_CHECK(f && !strcmp(f->name, specs[i][1]), "%s: named '%s' (want '%s')", specs[i][0], f ? f->name : "",
                specs[i][1]);
        reward_free(f);
    }
}

/* Is pid running (a zombie is not)? */
static int running(long pid) {
    char path[64], st[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(st, 1, sizeof st - 1, f);
    fclose(f);
    st[n] = 0;
    const char *paren = strrchr(st, ')');
    return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

static long read_pid(const char *path) {
    long pid = 0;
    for (int i = 0; i < 300 && pid == 0; i++) {
        FILE *pf = fopen(path, "r");
        if (pf) {
            if (fscanf(pf, "%ld", &pid) != 1) pid = 0;
            fclose(pf);
        }
        if (!pid) usleep(10000);
    }
    return pid;
}

/* One request, one line: a second line — in the same write or later — is a
 * protocol error, never the answer to the next request. */
static void test_cmd_framing(void) {
    Batch2 b;
    batch2_init(&b);
    RewardBatch rb = {.items = b.items, .n = 2};
    const char *scripts[2] = {
        "while read -r l; do echo '{\"rewards\": [1, 2]}'; echo '{\"rewards\": [3, 4]}'; done",
        "while read -r l; do echo '{\"rewards\": [1, 2]}'; sleep 0.2; echo '{\"rewards\": [3, 4]}'; done"};
    for (int s = 0; s < 2; s++) {
        char spec[512];
        snprintf(spec, sizeof spec, "cmd:%s", scripts[s]);
        RewardFunc *f = make(spec, 10);
        if (!f) { T_CHECK(0, "framing child %d starts", s); continue; }
        GrpoErr err = {{0}};
        double out[2] = {0, 0};
        int rc = 0, calls = 0;
        while (calls < 3 && (rc = reward_compute(f, &rb, out, &err)) == 0) {
            calls++;
            T_CHECK(out[0] == 1 && out[1] == 2, "child %d call %d: rewards %g %g (shifted?)", s, calls, out[0], out[1]);
            usleep(300000);
        }
        T_CHECK(rc == -1 && strstr(err.msg, "wrote more than one line for one request") && calls <= 1,
                "child %d: two lines per request: rc %d after %d calls, '%s'", s, rc, calls, err.msg);
        reward_free(f);
    }
    /* an endless line: the size limit, soon, with bounded memory */
    double t0 = now_s();
    RewardFunc *f = make("cmd:read -r l; exec cat /dev/zero", 30);
    GrpoErr err = {{0}};
    double out[2];
    int rc = f ? reward_compute(f, &rb, out, &err) : 0;
    T_CHECK(rc == -1 && strstr(err.msg, "reply line longer than 64 MiB"), "endless reply: '%s'", err.msg);
    T_CHECK(now_s() - t0 < 20, "endless reply refused after %.1f s", now_s() - t0);
    reward_free(f);
    /* a line with no newline: the timeout says so */
    f = make("cmd:read -r l; printf '{\"rewards\": [1, 2]}'; sleep 5", 0.3);
    rc = f ? reward_compute(f, &rb, out, &err) : 0;
    T_CHECK(rc == -1 && strstr(err.msg, "never ended with a newline"), "unterminated reply: '%s'", err.msg);
    reward_free(f);
    batch2_free(&b);
}

/* A trainer that dies — kill -9 — takes the reward's process group with it,
 * grandchildren included. */
/* What a reward starts — in its process group, in a new session (setsid), or
 * double-forked as a daemon — ends with the trainer: when the reward is freed,
 * and when the trainer is killed with SIGKILL. */
static const char *const escapes[] = {
    "sh -c 'sleep 300 & echo $! > %s; wait' & read -r l",
    "setsid sh -c 'sleep 300 & echo $! > %s; wait' & read -r l",
    "(setsid sh -c 'sleep 300 & echo $! > %s' &) ; read -r l",
};

static void test_cmd_dies_with_trainer(void) {
    char path[512], spec[1024];
    snprintf(path, sizeof path, "%s/grandchild.pid", tmp);
    for (size_t k = 0; k < sizeof escapes / sizeof *escapes; k++)
        for (int how = 0; how < 2; how++) { /* 0: reward_free, 1: kill -9 of the trainer */
            unlink(path);
            char line[900];
            snprintf(line, sizeof line, escapes[k], path);
            snprintf(spec, sizeof spec, "cmd:%s", line);
            fflush(NULL);
            pid_t trainer = fork();
            CHECK(trainer >= 0);
            if (trainer == 0) {
                RewardFunc *f = make(spec, 10);
                if (!f) _exit(1);
                if (how == 0) {
                    while (access(path, F_OK)) usleep(10000);
                    usleep(100000);
                    reward_free(f);
                    _exit(0);
                }
                for (;;) pause();
            }
            long grandchild = read_pid(path);
            T_CHECK(grandchild > 0 && running(grandchild), "'%s': grandchild %ld runs", line, grandchild);
            if (how == 1) kill(trainer, SIGKILL);
            waitpid(trainer, NULL, 0);
            double t0 = now_s();
            while (grandchild > 0 && running(grandchild) && now_s() - t0 < 5) usleep(10000);
            T_CHECK(grandchild > 0 && !running(grandchild), "'%s': grandchild %ld still runs %.1f s after %s",
                    line, grandchild, now_s() - t0, how ? "kill -9 of its trainer" : "reward_free");
            if (grandchild > 0) kill((pid_t)grandchild, SIGKILL);
        }
}

static int build_plugin(const char *src, const char *so) {
    char cmd[2048];
    const char *cc = getenv("CC") ? getenv("CC") : "cc";
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -O1 -I%s/src %s -o %s -lm", cc, root, src, so);
    int rc = system(cmd);
    T_CHECK(rc == 0, "built plugin: %s", cmd);
    return rc;
}

static void test_plugin(void) {
    char src[512], so[512], spec[1200];
    snprintf(src, sizeof src, "%s/examples/reward_plugin_len.c", root);
    snprintf(so, sizeof so, "%s/len.so", tmp);
    if (build_plugin(src, so)) return;
    snprintf(spec, sizeof spec, "plugin:%s", so);
    RewardFunc *f = make(spec, 0);
    T_CHECK(f && !strcmp(f->name, "len"), "plugin loads, named after the file: %s", f ? f->name : "");
    Batch2 b;
    batch2_init(&b);
    RewardBatch rb = {.items = b.items, .n = 2};
    GrpoErr err = {{0}};
    double out[2];
    if (f) {
        T_CHECK(reward_compute(f, &rb, out, &err) == 0 && out[0] == -15 && out[1] == -10,
                "plugin rewards %g %g (%s)", out[0], out[1], err.msg);
        reward_free(f);
    }
    /* missing symbol, missing file */
    RewardFunc *g = NULL;
    snprintf(spec, sizeof spec, "plugin:%s:no_such_fn", so);
    T_CHECK(reward_new(&g, spec, NULL, &err) == -1 && strstr(err.msg, so) && strstr(err.msg, "no function 'no_such_fn'"),
            "missing symbol: %s", err.msg);
    T_CHECK(reward_new(&g, "plugin:/nonexistent/r.so", NULL, &err) == -1 &&
                strstr(err.msg, "reward plugin '/nonexistent/r.so': cannot load"),
            "missing file: %s", err.msg);
    /* a bare file name is the file here, not a search of the library path */
    T_CHECK(reward_new(&g, "plugin:no_such_plugin.so", NULL, &err) == -1 &&
                strstr(err.msg, "./no_such_plugin.so"),
            "bare file name: %s", err.msg);
    /* a plugin that checks row_json and prompt_text, gives NAN, and one that fails */
    snprintf(src, sizeof src, "%s/other.c", tmp);
    FILE *fp = fopen(src, "w");
    CHECK(fp);
    fputs("#include <math.h>\n#include <stdio.h>\n#include <string.h>\n#include \"reward/reward_plugin.h\"\n"
          "int score_rows(const GrpoRewardItem *it, int n, double *out, char *err, size_t size) {\n"
          "  for (int i = 0; i < n; i++)\n"
          "    out[i] = strstr(it[i].row_json, \"\\\"answer\\\":7\") && !strcmp(it[i].prompt_text, \"What is 3+4?\")\n"
          "             && it[i].n_completion_ids == 3 ? 1.0 : NAN;\n"
          "  return 0;\n}\n"
          "int always_fail(const GrpoRewardItem *it, int n, double *out, char *err, size_t size) {\n"
          "  snprintf(err, size, \"judge unavailable\");\n  return 2;\n}\n",
          fp);
    fclose(fp);
    snprintf(so, sizeof so, "%s/other.so", tmp);
    if (build_plugin(src, so)) { batch2_free(&b); return; }
    snprintf(spec, sizeof spec, "plugin:%s:score_rows", so);
    f = make(spec, 0);
    T_CHECK(f && !strcmp(f->name, "score_rows"), "explicit symbol names the function");
    if (f) {
        T_CHECK(reward_compute(f, &rb, out, &err) == 0 && out[0] == 1.0 && isnan(out[1]),
                "row_json / NAN: %g %g", out[0], out[1]);
        reward_free(f);
    }
    snprintf(spec, sizeof spec, "plugin:%s:always_fail", so);
    f = make(spec, 0);
    if (f) {
        T_CHECK(reward_compute(f, &rb, out, &err) == -1 && strstr(err.msg, "always_fail") &&
                    strstr(err.msg, "judge unavailable"),
                "plugin failure: %s", err.msg);
        reward_free(f);
    }
    batch2_free(&b);
}

int main(void) {
    if (getenv("ROOT")) root = getenv("ROOT");
    CHECK(mkdtemp(tmp));
    test_python_child();
    test_request_contents();
    test_cmd_failures();
    test_python_function();
    test_cmd_stderr();
    test_cmd_termination();
    test_cmd_names();
    test_cmd_framing();
    test_cmd_dies_with_trainer();
    test_plugin();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return t_summary("test_reward_ext");
}
