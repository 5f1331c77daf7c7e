/* reward/reward_python.c — a TRL-style Python reward function, unchanged:
 * `FILE.py:FUNCTION` or TRL's dotted `module.function`, called as TRL's
 * GRPOTrainer calls it, in a python3 process (the first on PATH).
 *
 * The process is a cmd: reward (reward_cmd.c: its life cycle, guardian, stderr
 * relay, timeouts, the JSON exchange) running reward/py_runner.py, which is
 * embedded in the binary (the Makefile's .incbin: py_runner_source) and passed
 * with python3 -c, so nothing is installed and the runner always matches the
 * binary. The runner first loads the function and says so in a start-up line
 * (docs/reward-protocol.md), so a missing file, an import error or a missing
 * function is reported here, when the rewards are built, before any generation.
 * Not here: the call's arguments and the return value's checks (py_runner.py). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/text.h"
#include "reward/reward_internal.h"

extern const char py_runner_source[]; /* src/reward/py_runner.py, NUL-terminated */

static int is_identifier(const char *s, size_t n) {
    if (n == 0 || isdigit((unsigned char)s[0])) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
    return 1;
}

/* module.function: identifiers joined by dots, at least two of them. */
static int is_dotted_path(const char *s) {
    int parts = 0;
    for (const char *p = s;; p++) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!is_identifier(p, n)) return 0;
        parts++;
        if (!dot) break;
        p = dot;
    }
    return parts >= 2;
}

int reward_python_spec(const char *spec) {
    const char *colon = strchr(spec, ':');
    size_t head = colon ? (size_t)(colon - spec) : strlen(spec);
    if (head >= 3 && !memcmp(spec + head - 3, ".py", 3)) return 1;
    return !colon && is_dotted_path(spec);
}

/* The first executable python3 in $PATH (malloc'd), or NULL. */
static char *find_python3(void) {
    const char *path = getenv("PATH");
    if (!path) return NULL;
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        size_t len = (n ? n : 1) + sizeof "/python3";
        char *cand = xmalloc(len);
        snprintf(cand, len, "%.*s/python3", (int)(n ? n : 1), n ? p : "."); /* an empty entry is . */
        struct stat st;
        if (!stat(cand, &st) && S_ISREG(st.st_mode) && !access(cand, X_OK)) return cand;
        free(cand);
        if (!end) return NULL;
        p = end + 1;
    }
}

/* The log name the runner reports (TRL's get_callable_name), when it is one a
 * log key can carry; else NULL. */
static char *ready_name(const json_t *hello) {
    const char *s = json_string_value(json_object_get(json_object_get(hello, "ready"), "name"));
    if (!s || !*s || strlen(s) > 100) return NULL;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') return NULL;
    return xstrdup(s);
}

int reward_python_init(RewardFunc *f, const char *spec, const char *name, double timeout_s, char **default_name,
                       GrpoErr *err) {
    *default_name = NULL;
    char shown[512], *what = xmalloc(600); /* the spec as messages name it: escaped, shortened */
    snprintf(what, 600, "python reward '%s'", text_escaped(shown, sizeof shown, spec, 120));
    char *target = xstrdup(spec), *attr, *kind;
    int rc = 0;
    if (strchr(spec, ':')) { /* FILE.py:FUNCTION, FUNCTION after the last ':' */
        kind = "file";
        attr = strrchr(target, ':');
        *attr++ = 0;
        if (!is_identifier(attr, strlen(attr)) || !reward_python_spec(target))
            rc = err_set(err, "%s: expected FILE.py:FUNCTION (a Python identifier after the ':')", what);
    } else if (is_dotted_path(spec) && strcmp(strrchr(spec, '.'), ".py")) { /* TRL's module.function */
        kind = "module";
        attr = strrchr(target, '.');
        *attr++ = 0;
    } else {
        kind = "file", attr = NULL;
        rc = err_set(err, "%s: expected FILE.py:FUNCTION (which function of the file?)", what);
    }
    char *python = rc ? NULL : find_python3();
    if (!rc && !python)
        rc = err_set(err, "%s: python3 not found on PATH (a Python reward runs in the first python3 there)", what);
    if (!rc) {
        char *argv[] = {python, "-c", (char *)py_runner_source, kind, target, attr, NULL};
        char label[300];
        snprintf(label, sizeof label, "reward %s", name ? name : attr);
        rc = reward_cmd_start(f, argv, what, label, "reward_timeout", timeout_s, err);
    }
    json_t *hello = NULL;
    if (!rc && (rc = reward_cmd_hello(f, &hello, err)) == 0) {
        if (!json_is_object(json_object_get(hello, "ready")))
            rc = err_set(err, "%s: the runner's start-up line is not {\"ready\": ...}", what);
        else if (!(*default_name = ready_name(hello)))
            *default_name = xstrdup(attr);
    }
    if (rc && f->state) {
        f->destroy(f);
        f->state = NULL;
    }
    json_decref(hello);
    free(python);
    free(target);
    free(what);
    return rc;
}
