/* cli/args.c — option parsing shared by the subcommands (see args.h). */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm.h"

static void print_help(FILE *out, const char *cmd, const char *synopsis, const Opt *opts, int n) {
    fprintf(out, "usage: grpo %s %s\n\noptions:\n", cmd, synopsis);
    for (int i = 0; i < n; i++) {
        const char *arg = opts[i].kind == OPT_FLAG ? "" : opts[i].kind == OPT_STR ? " VALUE" : " N";
        char left[64];
        snprintf(left, sizeof left, "--%s%s", opts[i].name, arg);
        fprintf(out, "  %-28s %s\n", left, opts[i].help);
    }
}

int args_parse(const char *cmd, const char *synopsis, int argc, char **argv, const Opt *opts,
               int n) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(stdout, cmd, synopsis, opts, n);
            return 1;
        }
        if (strncmp(a, "--", 2)) {
            fprintf(stderr, "grpo %s: unexpected argument '%s'\n", cmd, a);
            print_help(stderr, cmd, synopsis, opts, n);
            return 2;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const Opt *o = NULL;
        for (int k = 0; k < n && !o; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, name, len)) o = &opts[k];
        if (!o) {
            fprintf(stderr, "grpo %s: unknown option '--%.*s' (see grpo %s --help)\n", cmd, (int)len, name, cmd);
            return 2;
        }
        if (o->kind == OPT_FLAG) {
            if (eq) {
                if (!strcmp(eq + 1, "true") || !strcmp(eq + 1, "1")) *(int *)o->dst = 1;
                else if (!strcmp(eq + 1, "false") || !strcmp(eq + 1, "0")) *(int *)o->dst = 0;
                else {
                    fprintf(stderr, "grpo %s: --%s takes true or false, not '%s'\n", cmd, o->name, eq + 1);
                    return 2;
                }
            } else {
                *(int *)o->dst = 1;
            }
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            fprintf(stderr, "grpo %s: --%s needs a value\n", cmd, o->name);
            return 2;
        }
        char *end;
        errno = 0;
        if (o->kind == OPT_STR) {
            *(const char **)o->dst = val;
        } else if (o->kind == OPT_INT) {
            long v = strtol(val, &end, 10);
            if (errno || end == val || *end) {
                fprintf(stderr, "grpo %s: --%s expects an integer, not '%s'\n", cmd, o->name, val);
                return 2;
            }
            *(long *)o->dst = v;
        } else {
            double v = strtod(val, &end);
            if (errno || end == val || *end) {
                fprintf(stderr, "grpo %s: --%s expects a number, not '%s'\n", cmd, o->name, val);
                return 2;
            }
            *(double *)o->dst = v;
        }
    }
    return 0;
}

int cli_fail(const char *cmd, const char *msg) {
    fprintf(stderr, "grpo %s: %s\n", cmd, msg);
    return 1;
}

void cli_setup_threads(void) {
    const char *s = getenv("GRPO_THREADS");
    if (s && atoi(s) > 0) gemm_set_threads(atoi(s));
}
