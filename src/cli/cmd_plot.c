/* cli/cmd_plot.c — `grpo plot RUN_DIR|METRICS.jsonl [-o FILE.svg] [--metrics A,B]`:
 * draws a training run's metrics.jsonl (a directory: its metrics.jsonl, as a TRL user
 * names the run by its output_dir) as a standalone SVG, one panel per metric (the
 * drawing is log/plot.c), by default next to the metrics file (metrics.svg).
 * Default panels: reward (with its ±reward_std band), eval_reward (±eval_reward_std)
 * when the run evaluated, and completions/mean_length. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "core/text.h"
#include "cli/commands.h"
#include "core/check.h"
#include "io/fsutil.h"
#include "log/plot.h"

#define SYNOPSIS "RUN_DIR|METRICS.jsonl [-o FILE.svg] [--metrics NAME[,NAME...]]"

static const char *const DEFAULT_METRICS[] = {"reward", "eval_reward", "completions/mean_length"};
#define N_DEFAULT_METRICS (int)(sizeof DEFAULT_METRICS / sizeof DEFAULT_METRICS[0])

typedef struct {
    const char *output, *metrics;
} PlotArgs;

static const OptSpec plot_options[] = {
    {"output", OPT_STR, offsetof(PlotArgs, output), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "the SVG file to write (also -o FILE; default: METRICS.svg beside the metrics file)"},
    {"metrics", OPT_STR, offsetof(PlotArgs, metrics), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "comma-separated metric names, one panel each (default: reward,eval_reward,completions/mean_length, those "
     "the file has)"},
};

/* argv without the positional METRICS file (*input) and with -o as --output, into
 * av (argc + 1 entries); its count, or -1 after a usage line on an unexpected argument. */
static int plot_argv(int argc, char **argv, char **av, const char **input) {
    int ac = 0;
    av[ac++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o")) {
            av[ac++] = "--output";
            if (i + 1 < argc) av[ac++] = argv[++i];
        } else if (!strncmp(a, "--", 2) || !strcmp(a, "-h")) {
            av[ac++] = argv[i];
            int takes_value = strcmp(a, "--help") && strcmp(a, "-h") && !strchr(a, '=');
            if (takes_value && i + 1 < argc) av[ac++] = argv[++i];
        } else if (!*input && a[0] != '-') {
            *input = a;
        } else {
            char shown[200];
            fprintf(stderr, "grpo plot: unexpected argument '%s' (usage: grpo plot %s)\n",
                    text_escaped(shown, sizeof shown, a, 80), SYNOPSIS);
            return -1;
        }
    }
    av[ac] = NULL;
    return ac;
}

/* list (a copy of --metrics, given) split at commas in place into req; the count,
 * or -1 after a usage line on an empty name. */
static int split_metrics(char *list, const char *given, const char **req) {
    int n = 0;
    for (char *p = list;; p++) {
        char *c = strchr(p, ',');
        if (c) *c = 0;
        if (!*p) {
            char shown[200];
            fprintf(stderr, "grpo plot: --metrics '%s' has an empty name\n", text_escaped(shown, sizeof shown, given, 80));
            return -1;
        }
        req[n++] = p;
        if (!c) return n;
        p = c;
    }
}

int cmd_plot(int argc, char **argv) {
    const char *input = NULL;
    PlotArgs pa;
    OptGroup g = OPT_GROUP(plot_options, 0);
    opts_defaults(&g, 1, &pa);
    /* args_parse knows only --options: take out the positional file and map -o */
    char **av = xmalloc(sizeof(char *) * (argc + 1));
    int ac = plot_argv(argc, argv, av, &input);
    if (ac < 0) {
        free(av);
        return 2;
    }
    int rc = args_parse("plot", SYNOPSIS, ac, av, &g, 1, &pa);
    free(av);
    if (rc) return rc == 1 ? 0 : rc;
    const char *output = pa.output, *metrics = pa.metrics;
    if (!input) {
        fprintf(stderr, "grpo plot: a run directory or a METRICS.jsonl file is required (usage: grpo plot %s)\n", SYNOPSIS);
        return 2;
    }
    char *run_metrics = fs_is_dir(input) ? fs_join(input, "metrics.jsonl") : NULL; /* run/ -> run/metrics.jsonl */
    if (run_metrics) input = run_metrics;
    char *default_output = NULL; /* run/metrics.jsonl -> run/metrics.svg */
    if (!output) {
        size_t n = strlen(input);
        if (n > 6 && !strcmp(input + n - 6, ".jsonl")) n -= 6;
        else if (n > 5 && !strcmp(input + n - 5, ".json")) n -= 5;
        default_output = xmalloc(n + 5);
        memcpy(default_output, input, n);
        memcpy(default_output + n, ".svg", 5);
        output = default_output;
    }
    /* the requested names, split at commas */
    char *list = metrics ? xstrdup(metrics) : NULL;
    const char **req = xmalloc(sizeof(char *) * (metrics ? strlen(metrics) + 1 : 2));
    int n_req = list ? split_metrics(list, metrics, req) : 0;
    if (n_req < 0) {
        free(list), free(req);
        free(default_output), free(run_metrics);
        return 2;
    }

    GrpoErr err;
    PlotLog log;
    if (plot_log_load(&log, input, &err)) {
        free(list), free(req), free(default_output), free(run_metrics);
        return cli_fail("plot", err.msg);
    }
    int *idx = xmalloc(sizeof(int) * (n_req + N_DEFAULT_METRICS)), n = 0;
    rc = 0;
    for (int k = 0; k < n_req && !rc; k++)
        if ((idx[n++] = plot_log_require(&log, req[k], &err)) < 0) rc = 1;
    if (!metrics) {
        /* defaults: those the file has */
        for (int k = 0; k < N_DEFAULT_METRICS; k++)
            for (int i = 0; i < log.n_names; i++)
                if (!strcmp(log.names[i], DEFAULT_METRICS[k])) idx[n++] = i;
        if (!n) {
            plot_log_require(&log, DEFAULT_METRICS[0], &err);
            rc = 1;
        }
    }
    if (!rc && plot_svg_write(&log, idx, n, output, &err)) rc = 1;
    if (!rc) {
        char evals[64] = "";
        if (log.n_eval_rows) snprintf(evals, sizeof evals, ", %d evaluation%s", log.n_eval_rows, log.n_eval_rows == 1 ? "" : "s");
        char shown[300];
        fprintf(stderr, "grpo plot: wrote %s (%d panel%s, %d logged steps%s)\n", text_escaped(shown, sizeof shown, output, 200), n, n == 1 ? "" : "s",
                plot_log_train_rows(&log), evals);
    } else
        cli_fail("plot", err.msg);
    free(idx), free(list), free(req), free(default_output), free(run_metrics);
    plot_log_free(&log);
    return rc;
}
