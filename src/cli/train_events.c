/* cli/train_events.c — the training loop's events on stderr, and stopping on
 * SIGINT/SIGTERM (train_events.h). */
#include "cli/train_events.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/text.h"
#include "dist/dist.h"
#include "reward/reward.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) {
    if (stop_signal) {
        /* a second signal: stop now, as without a handler */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig;
}

static void finish_line(TrainEvents *e) {
    if (e->line_open) progress_done(e->tty);
    e->line_open = 0;
}

static void print_event(const TrainEvent *ev, void *ctx) {
    TrainEvents *e = ctx;
    if (ev->kind != TRAIN_EVENT_STEP) finish_line(e);
    switch (ev->kind) {
    case TRAIN_EVENT_PLAN:
        for (const char *s = ev->text; *s;) {
            size_t n = strcspn(s, "\n");
            fprintf(stderr, "grpo %s: %.*s\n", e->cmd, (int)n, s);
            s += n + (s[n] == '\n');
        }
        break;
    case TRAIN_EVENT_RESUMED:
        fprintf(stderr, "grpo %s: resumed from %s at step %ld\n", e->cmd, ev->path, ev->step);
        break;
    case TRAIN_EVENT_STEP:
        progress_print(&(Progress){ev->step, ev->total_steps, ev->reward, ev->loss, ev->tokens_per_s, ev->elapsed_s,
                                   ev->eta_s, ev->logged},
                       e->tty);
        e->line_open = e->tty;
        break;
    case TRAIN_EVENT_NONFINITE:
        fprintf(stderr, "grpo %s: step %ld: loss or gradient is NaN/Inf; the update was not applied\n", e->cmd, ev->step);
        break;
    case TRAIN_EVENT_WARNING: { /* a warning may quote a file's text: one line, escaped */
        char line[1200];
        fprintf(stderr, "grpo %s: warning: %s\n", e->cmd, text_one_line(line, sizeof line, ev->text, 0));
        break;
    }
    case TRAIN_EVENT_CHECKPOINT:
        fprintf(stderr, "grpo %s: wrote %s\n", e->cmd, ev->path);
        break;
    case TRAIN_EVENT_STOPPED:
        break; /* train_events_end says where to resume */
    case TRAIN_EVENT_KEPT: /* said after the error, by train_events_end */
        if (ev->path)
            snprintf(e->kept, sizeof e->kept, "the %ld completed step(s) are kept in %s: continue with "
                     "--resume_from_checkpoint latest", ev->step, ev->path);
        else
            snprintf(e->kept, sizeof e->kept, "the %ld completed step(s) could not be kept: %s", ev->step, ev->text);
        break;
    case TRAIN_EVENT_EVAL: /* the eval dict on one line, as TRL prints it, with how it was made */
        fprintf(stderr, "grpo %s: eval at step %ld", e->cmd, ev->step);
        if (ev->text) fprintf(stderr, " (%s)", ev->text);
        fputc(':', stderr);
        for (int i = 0; i < ev->metrics->n; i++) {
            const Metric *m = &ev->metrics->m[i];
            fprintf(stderr, "%s%s %.4g", i ? ", " : " ", m->name, m->count ? m->sum / m->count : NAN);
        }
        fputc('\n', stderr);
        break;
    case TRAIN_EVENT_SAVED:
        fprintf(stderr, "grpo %s: saved the trained %s to %s\n", e->cmd, ev->text ? ev->text : "model", ev->path);
        break;
    }
}

TrainHooks train_events_start(TrainEvents *e, const char *cmd) {
    e->cmd = cmd;
    e->tty = isatty(2);
    e->line_open = 0;
    e->kept[0] = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    reward_watch_stop(&stop_signal); /* a reward that does not answer does not hold the stop up */
    return (TrainHooks){print_event, e, &stop_signal};
}

int train_events_end(TrainEvents *e, int rc, const GrpoErr *err) {
    finish_line(e);
    if (rc == 0) return 0;
    if (dist_size() > 1 && rc != TRAIN_STOPPED && !dist_error_shared()) {
        /* an error only this process met, outside the points where ranks compare notes:
         * the others may be waiting for it in a collective, so the whole job stops */
        fprintf(stderr, "grpo %s: rank %d: %s\n", e->cmd, dist_rank(), err->msg);
        dist_abort(1);
    }
    if (dist_rank() == 0) fprintf(stderr, "grpo %s: %s\n", e->cmd, err->msg);
    if (dist_rank() == 0 && e->kept[0]) fprintf(stderr, "grpo %s: %s\n", e->cmd, e->kept);
    return rc == TRAIN_STOPPED ? 128 + stop_signal : 1;
}
