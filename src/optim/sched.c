/* optim/sched.c — learning-rate schedules of transformers' get_scheduler
 * (optimization.py: every SchedulerType but reduce_lr_on_plateau) as pure
 * functions of the optimizer step, and their lr_scheduler_kwargs read from a
 * JSON object with each argument checked by name. Is not: stateful (the caller
 * passes the step), or a reader of YAML or argv (cli/ hands over the object). */
#include "optim/optim.h"

#include <math.h>
#include <string.h>

#include "io/jsonl.h"

const char *const sched_names[] = {"linear", "cosine", "constant", "constant_with_warmup", "cosine_with_restarts",
                                   "polynomial", "inverse_sqrt", "cosine_with_min_lr", "cosine_warmup_with_min_lr",
                                   "warmup_stable_decay", NULL};
#define N_SCHED ((int)(sizeof sched_names / sizeof sched_names[0]) - 1)

/* The keyword arguments each schedule's transformers function takes through
 * lr_scheduler_kwargs, by SchedType ("" = none: get_scheduler passes constant,
 * constant_with_warmup and inverse_sqrt no kwargs at all). */
static const char *const sched_kwargs[] = {
    "", "num_cycles", "", "", "num_cycles", "lr_end, power", "", "num_cycles, min_lr, min_lr_rate",
    "num_cycles, min_lr, min_lr_rate, warmup_lr_rate",
    "num_decay_steps, num_stable_steps, warmup_type, decay_type, min_lr_ratio, num_cycles"};

static const char *const shape_names[] = {"linear", "cosine", "1-sqrt", NULL};

int sched_parse(const char *name, SchedType *out) {
    for (int i = 0; i < N_SCHED; i++)
        if (!strcmp(name, sched_names[i])) {
            *out = (SchedType)i;
            return 0;
        }
    return -1;
}

const char *sched_name(SchedType t) {
    return (unsigned)t < (unsigned)N_SCHED ? sched_names[t] : "?";
}

long long sched_warmup_steps(long long warmup_steps, double warmup_ratio, long long total_steps) {
    if (warmup_steps > 0) return warmup_steps;
    return (long long)ceil((double)total_steps * warmup_ratio);
}

/* One kwarg's number (finite), or -1 with a message naming it. */
static int kw_number(const char *name, const json_t *v, double min, double *out, GrpoErr *err) {
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < min)
        return err_set(err, "lr_scheduler_kwargs: %s must be a number >= %g, got %s", name, min,
                       json_is_number(v) ? "a smaller one" : json_kind(v));
    *out = json_number_value(v);
    return 0;
}

static int kw_steps(const char *name, const json_t *v, long long *out, GrpoErr *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return err_set(err, "lr_scheduler_kwargs: %s must be a whole number of steps >= 0, got %s", name,
                       json_is_integer(v) ? "a negative one" : json_kind(v));
    *out = (long long)json_integer_value(v);
    return 0;
}

static int kw_shape(const char *name, const json_t *v, int *out, GrpoErr *err) {
    for (int i = 0; json_is_string(v) && shape_names[i]; i++)
        if (!strcmp(json_string_value(v), shape_names[i])) {
            *out = i;
            return 0;
        }
    return err_set(err, "lr_scheduler_kwargs: %s must be 'linear', 'cosine' or '1-sqrt'", name);
}

/* name is one of the comma-separated list */
static int takes(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ',' || !p[n])) return 1;
    return 0;
}

int sched_init(Schedule *s, SchedType t, const json_t *kwargs, double base_lr, long long warmup_steps,
               long long total_steps, GrpoErr *err) {
    memset(s, 0, sizeof *s);
    s->type = t;
    s->warmup_steps = warmup_steps;
    s->total_steps = total_steps;
    s->num_cycles = t == SCHED_COSINE_WITH_RESTARTS ? 1.0 : 0.5;
    s->power = 1.0;
    s->lr_end_rate = base_lr > 0 ? 1e-7 / base_lr : 0; /* polynomial's lr_end 1e-7 */
    s->warmup_lr_rate = NAN;
    s->num_decay_steps = -1;
    s->num_stable_steps = -1;
    s->decay_shape = SCHED_SHAPE_COSINE;
    if ((unsigned)t >= (unsigned)N_SCHED) return err_set(err, "lr_scheduler_type %d: unknown", (int)t);
    if (kwargs && !json_is_object(kwargs)) return err_set(err, "lr_scheduler_kwargs: a mapping expected");
    double min_lr = NAN, min_lr_rate = NAN, lr_end = 1e-7;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)kwargs, key, v) {
        if (!takes(sched_kwargs[t], key))
            return err_set(err, "lr_scheduler_kwargs: '%s' is not an argument of %s (%s%s)", key, sched_names[t],
                           *sched_kwargs[t] ? "it takes " : "it takes none", sched_kwargs[t]);
        int rc = !strcmp(key, "num_cycles")          ? kw_number(key, v, 0, &s->num_cycles, err)
                 : !strcmp(key, "min_lr")            ? kw_number(key, v, 0, &min_lr, err)
                 : !strcmp(key, "min_lr_rate")       ? kw_number(key, v, 0, &min_lr_rate, err)
                 : !strcmp(key, "warmup_lr_rate")    ? kw_number(key, v, 0, &s->warmup_lr_rate, err)
                 : !strcmp(key, "lr_end")            ? kw_number(key, v, 0, &lr_end, err)
                 : !strcmp(key, "power")             ? kw_number(key, v, -INFINITY, &s->power, err)
                 : !strcmp(key, "min_lr_ratio")      ? kw_number(key, v, 0, &s->min_lr_ratio, err)
                 : !strcmp(key, "num_decay_steps")   ? kw_steps(key, v, &s->num_decay_steps, err)
                 : !strcmp(key, "num_stable_steps")  ? kw_steps(key, v, &s->num_stable_steps, err)
                 : !strcmp(key, "warmup_type")       ? kw_shape(key, v, &s->warmup_shape, err)
                                                     : kw_shape(key, v, &s->decay_shape, err);
        if (rc) return -1;
    }
    if (t == SCHED_POLYNOMIAL) {
        if (!(base_lr > lr_end))
            return err_set(err, "lr_scheduler_kwargs: lr_end (%g) must be smaller than learning_rate (%g)", lr_end,
                           base_lr);
        s->lr_end_rate = lr_end / base_lr;
    }
    if (t == SCHED_COSINE_WITH_MIN_LR || t == SCHED_COSINE_WARMUP_WITH_MIN_LR) {
        if (!isnan(min_lr) && !isnan(min_lr_rate))
            return err_set(err, "lr_scheduler_kwargs: give min_lr or min_lr_rate, not both (%s)", sched_names[t]);
        if (isnan(min_lr) && isnan(min_lr_rate))
            return err_set(err, "lr_scheduler_type %s needs lr_scheduler_kwargs min_lr_rate (a fraction of "
                           "learning_rate) or min_lr", sched_names[t]);
        if (!isnan(min_lr) && !(base_lr > 0))
            return err_set(err, "lr_scheduler_kwargs: min_lr needs learning_rate > 0");
        s->min_lr_rate = !isnan(min_lr) ? min_lr / base_lr : min_lr_rate;
    }
    if (t == SCHED_WARMUP_STABLE_DECAY) {
        if (s->num_decay_steps < 0)
            return err_set(err, "lr_scheduler_type warmup_stable_decay needs lr_scheduler_kwargs num_decay_steps");
        if (s->num_stable_steps < 0) s->num_stable_steps = total_steps - warmup_steps - s->num_decay_steps;
    }
    return 0;
}

/* A warmup's or decay's shape at progress x in [0, 1] (warmup_stable_decay). */
static double wsd_shape(int shape, double x, double num_cycles, int rising) {
    if (shape == SCHED_SHAPE_LINEAR) return rising ? x : 1.0 - x;
    if (shape == SCHED_SHAPE_COSINE) return rising ? 0.5 * (1.0 - cos(M_PI * x)) : 0.5 * (1.0 + cos(M_PI * num_cycles * 2.0 * x));
    return rising ? 1.0 - sqrt(1.0 - x) : 1.0 - sqrt(x);
}

static double at_least0(double f) {
    return f > 0.0 ? f : 0.0;
}

double sched_lr_factor(const Schedule *s, long long step) {
    long long warmup = s->warmup_steps, total = s->total_steps;
    double w1 = (double)(warmup > 1 ? warmup : 1), span = (double)(total - warmup > 1 ? total - warmup : 1);
    switch (s->type) {
    case SCHED_CONSTANT:
        return 1.0;
    case SCHED_COSINE_WARMUP_WITH_MIN_LR: { /* its warmup and progress start one step later */
        if (step < warmup) {
            if (isnan(s->warmup_lr_rate)) return (double)(step + 1) / w1;
            return s->warmup_lr_rate + (1.0 - s->warmup_lr_rate) * (double)step / (double)(warmup - 1 > 1 ? warmup - 1 : 1);
        }
        double progress = (double)(step - warmup + 1) / span;
        double f = 0.5 * (1.0 + cos(M_PI * s->num_cycles * 2.0 * progress));
        return at_least0(f * (1.0 - s->min_lr_rate) + s->min_lr_rate);
    }
    case SCHED_WARMUP_STABLE_DECAY: {
        long long stable_end = warmup + s->num_stable_steps, decay_end = stable_end + s->num_decay_steps;
        double f;
        if (step < warmup) f = wsd_shape(s->warmup_shape, (double)step / w1, s->num_cycles, 1);
        else if (step < stable_end) return 1.0;
        else if (step < decay_end)
            f = wsd_shape(s->decay_shape,
                          (double)(step - stable_end) / (double)(s->num_decay_steps > 1 ? s->num_decay_steps : 1),
                          s->num_cycles, 0);
        else return s->min_lr_ratio;
        return at_least0(f * (1.0 - s->min_lr_ratio) + s->min_lr_ratio);
    }
    default:
        break;
    }
    if (step < warmup) return (double)step / w1;
    double progress = (double)(step - warmup) / span;
    switch (s->type) {
    case SCHED_LINEAR:
        return at_least0((double)(total - step) / span);
    case SCHED_COSINE:
        return at_least0(0.5 * (1.0 + cos(M_PI * s->num_cycles * 2.0 * progress)));
    case SCHED_COSINE_WITH_MIN_LR: {
        double f = 0.5 * (1.0 + cos(M_PI * s->num_cycles * 2.0 * progress));
        return at_least0(f * (1.0 - s->min_lr_rate) + s->min_lr_rate);
    }
    case SCHED_COSINE_WITH_RESTARTS:
        if (progress >= 1.0) return 0.0;
        return at_least0(0.5 * (1.0 + cos(M_PI * fmod(s->num_cycles * progress, 1.0))));
    case SCHED_POLYNOMIAL: {
        if (step > total) return s->lr_end_rate;
        double remaining = 1.0 - (double)(step - warmup) / (double)(total - warmup > 0 ? total - warmup : 1);
        return (1.0 - s->lr_end_rate) * pow(remaining, s->power) + s->lr_end_rate;
    }
    case SCHED_INVERSE_SQRT: { /* timescale: warmup, or 10000 without one (get_scheduler passes none) */
        double timescale = warmup ? (double)warmup : 10000.0;
        return 1.0 / sqrt(((double)step + timescale - (double)warmup) / timescale);
    }
    default: /* constant_with_warmup after its warmup */
        return 1.0;
    }
}

double sched_lr(const Schedule *s, double base_lr, long long step) {
    return base_lr * sched_lr_factor(s, step);
}
