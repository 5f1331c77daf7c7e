/* tests/grpo/test_dynamic_sampling.c — filter_groups (DAPO's dynamic sampling)
 * end to end on a tiny Qwen3-style model with the byte-level tokenizer. The
 * reward is a cmd: process that gives 0.5 to every completion of a prompt whose
 * `signal` column is 0 (a group with no signal) and a number read off the
 * completion's ids otherwise, so which groups have signal is known from the data:
 *  - batch composition: each step trains exactly the groups with signal, in the
 *    data order of the (shuffled) sampler, drawn in rounds of P prompts; the
 *    metrics count the rounds, the dropped groups and the unused ones, as an
 *    independent walk over the sampler predicts;
 *  - max_num_gen_batches: a generation batch that its rounds leave short stops the
 *    run at the step the walk predicts, with the completed steps kept;
 *  - on data where every group has signal, filter_groups changes nothing, bit for bit;
 *  - split invariance: micro-batches of 8, 4, 2, 1 give the same completions and
 *    weights within 1e-6 of the largest;
 *  - resume: from the middle of a generation batch, bit-identical weights and
 *    completions. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "grpo/trainer.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "model/model_io.h"
#include "grpo/tiny_run.h"
#include "testutil.h"

static char root[256];
static char reward_spec[600];

/* The prompts, in file order; the second character says whether its group has signal. */
static const char *const PROMPTS[] = {"a0", "b1", "c0", "d0", "e1", "f1", "g0", "h1", "i1", "j0", "k1", "l0"};
#define N_PROMPTS ((int)(sizeof PROMPTS / sizeof PROMPTS[0]))
static int has_signal(int ex) { return PROMPTS[ex][1] == '1'; }

static char *path(const char *name) { return fs_join(root, name); }

/* data: every prompt with its signal column (all_signal: 1 for every one). */
static void write_data(const char *file, int all_signal) {
    FILE *f = fopen(file, "w");
    for (int i = 0; i < N_PROMPTS; i++)
        fprintf(f, "{\"prompt\": \"%s\", \"signal\": %d}\n", PROMPTS[i], all_signal || has_signal(i));
    fclose(f);
}

static void base_config(TrainConfig *c, const char *model, const char *data, const char *out) {
    static const char *funcs[1];
    funcs[0] = reward_spec;
    train_config_default(c);
    c->train.model_dir = model;
    c->train.dataset = data;
    c->train.output_dir = out;
    c->rewards.funcs = (StrList){1, funcs};
    c->num_generations = 4;
    c->gen.max_completion_length = 8;
    c->train.learning_rate = 1e-3;
    c->train.max_steps = 3;
    c->train.logging_steps = 1;
    c->train.per_device_train_batch_size = 4;
    c->train.gradient_accumulation_steps = 2; /* a generation batch of 8: P = 2 prompts */
    c->log_completions = 1;
    c->train.save_steps = 0;
    c->train.quiet = 1;
    c->train.seed = 3;
    c->filter_groups = 1;
}

/* What each step should train: a walk over the sampler in rounds of P prompts. */
typedef struct {
    int example[8];
    int rounds, dropped, surplus;
} StepPlan;

/* The plan of up to n_steps steps; returns how many complete before a batch
 * would need more than max_rounds rounds (0: no bound). */
static int plan_steps(StepPlan *plan, int n_steps, int P, int max_rounds, int seed) {
    DatasetSampler s;
    dataset_sampler_init(&s, N_PROMPTS, 1, (uint64_t)seed);
    long pos = 0;
    int done = 0;
    for (; done < n_steps; done++) {
        StepPlan *sp = &plan[done];
        memset(sp, 0, sizeof *sp);
        int kept = 0;
        while (kept < P) {
            if (max_rounds > 0 && sp->rounds == max_rounds) goto out;
            sp->rounds++;
            for (int p = 0; p < P; p++) {
                int ex = dataset_sampler_index(&s, pos++);
                if (!has_signal(ex)) sp->dropped++;
                else if (kept == P) sp->surplus++;
                else sp->example[kept++] = ex;
            }
        }
    }
out:
    dataset_sampler_free(&s);
    return done;
}

/* The lines of dir/file as JSON objects (at most max); returns their count. */
static int read_lines(const char *dir, const char *file, json_t **out, int max) {
    char *text = tiny_run_file(dir, file);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < max; line = strtok(NULL, "\n"))
        out[n++] = json_loads(line, 0, NULL);
    free(text);
    return n;
}

static double num(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The steps trained exactly the groups with signal, in data order, with the metrics the walk predicts. */
static void composition(const char *model, const char *data) {
    TrainConfig c;
    char *out = path("composition");
    base_config(&c, model, data, out);
    c.train.max_steps = 4;
    GrpoErr err;
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "filter_groups run: %s", err.msg);
    StepPlan plan[4];
    int P = 2, G = 4;
    T_CHECK(plan_steps(plan, 4, P, 0, c.train.seed) == 4, "the plan");
    int dropped = 0, surplus = 0;
    for (int s = 0; s < 4; s++) dropped += plan[s].dropped, surplus += plan[s].surplus;
    T_CHECK(dropped > 0 && surplus > 0, "the data should make the run drop groups (%d) and leave some unused (%d)",
            dropped, surplus);
    json_t *rec[64] = {0};
    int nrec = read_lines(out, "completions.jsonl", rec, 64);
    T_CHECK(nrec == 4 * P * G, "completions.jsonl: %d records, want %d", nrec, 4 * P * G);
    for (int i = 0; i < nrec && nrec == 4 * P * G; i++) {
        int s = i / (P * G), k = (i % (P * G)) / G;
        const char *prompt = json_string_value(json_object_get(rec[i], "prompt"));
        T_CHECK(num(rec[i], "step") == s + 1, "record %d: step %g", i, num(rec[i], "step"));
        T_CHECK(prompt && !strcmp(prompt, PROMPTS[plan[s].example[k]]), "step %d group %d: prompt %s, want %s", s + 1, k,
                prompt ? prompt : "(none)", PROMPTS[plan[s].example[k]]);
        if (i % G == 0) { /* a trained group's rewards differ */
            int differ = 0;
            for (int j = 1; j < G; j++) differ |= num(rec[i + j], "reward") != num(rec[i], "reward");
            T_CHECK(differ, "step %d group %d (%s): equal rewards were trained on", s + 1, k, prompt ? prompt : "");
        }
    }
    json_t *m[16] = {0};
    int nm = read_lines(out, "metrics.jsonl", m, 16);
    T_CHECK(nm == 5, "metrics.jsonl: %d lines (4 steps and the closing one)", nm);
    for (int s = 0; s < 4 && s < nm; s++) {
        T_CHECK(num(m[s], "dynamic_sampling/gen_rounds") == plan[s].rounds &&
                    num(m[s], "dynamic_sampling/groups_dropped") == plan[s].dropped &&
                    num(m[s], "dynamic_sampling/groups_surplus") == plan[s].surplus,
                "step %d: rounds %g dropped %g surplus %g, want %d %d %d", s + 1, num(m[s], "dynamic_sampling/gen_rounds"),
                num(m[s], "dynamic_sampling/groups_dropped"), num(m[s], "dynamic_sampling/groups_surplus"),
                plan[s].rounds, plan[s].dropped, plan[s].surplus);
        T_CHECK(num(m[s], "frac_reward_zero_std") == 0, "step %d: a trained group without signal", s + 1);
    }
    for (int i = 0; i < nrec; i++) json_decref(rec[i]);
    for (int i = 0; i < nm; i++) json_decref(m[i]);
    /* without filter_groups the same run trains the prompts as they come, equal rewards included */
    c.filter_groups = 0;
    fs_rm_rf(out);
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "run without filter_groups: %s", err.msg);
    nm = read_lines(out, "metrics.jsonl", m, 16);
    T_CHECK(nm == 5 && !json_object_get(m[0], "dynamic_sampling/gen_rounds"), "no dynamic_sampling metrics without it");
    for (int i = 0; i < nm; i++) json_decref(m[i]);
    free(out);
}

/* max_num_gen_batches: the run stops where the walk says a batch stays short. */
static void bound(const char *model, const char *data) {
    StepPlan plan[6];
    for (int max = 1; max <= 2; max++) {
        int done = plan_steps(plan, 6, 2, max, 3);
        T_CHECK(done < 6, "max_num_gen_batches %d: the data should hit the bound within 6 steps", max);
        TrainConfig c;
        char *out = path("bound");
        fs_rm_rf(out);
        base_config(&c, model, data, out);
        c.train.max_steps = 6;
        c.max_num_gen_batches = max;
        GrpoErr err = {{0}};
        char want[100];
        snprintf(want, sizeof want, "after max_num_gen_batches (%d) rounds of 2 prompts", max);
        T_CHECK(trainer_run(&c, NULL, &err) == -1 && strstr(err.msg, want) && strstr(err.msg, "turn filter_groups off"),
                "max_num_gen_batches %d: %s", max, err.msg);
        json_t *m[16] = {0};
        int nm = read_lines(out, "metrics.jsonl", m, 16), steps = 0;
        for (int i = 0; i < nm; i++) {
            steps += json_object_get(m[i], "loss") != NULL;
            T_CHECK(!json_object_get(m[i], "loss") || num(m[i], "dynamic_sampling/gen_rounds") <= max, "rounds %g > %d",
                    num(m[i], "dynamic_sampling/gen_rounds"), max);
            json_decref(m[i]);
        }
        T_CHECK(steps == done, "max_num_gen_batches %d: %d steps completed, want %d", max, steps, done);
        if (done > 0) {
            char name[64];
            snprintf(name, sizeof name, "checkpoint-%d", done);
            char *ck = fs_join(out, name);
            T_CHECK(fs_is_dir(ck), "the completed steps are kept in %s", name);
            free(ck);
        }
        free(out);
    }
    /* a bound the data never reaches changes nothing */
    TrainConfig c;
    char *a = path("unbounded"), *b = path("bounded");
    base_config(&c, model, data, a);
    GrpoErr err;
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "unbounded: %s", err.msg);
    c.train.output_dir = b;
    c.max_num_gen_batches = 100;
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "max_num_gen_batches 100: %s", err.msg);
    size_t na, nb;
    float *wa = tiny_run_weights(a, &na), *wb = tiny_run_weights(b, &nb);
    T_CHECK(na == nb && !memcmp(wa, wb, sizeof(float) * na), "a bound never reached changed the weights");
    free(wa), free(wb), free(a), free(b);
}

/* Where every group has signal, filter_groups changes nothing, bit for bit. */
static void all_signal(const char *model, const char *data_all) {
    TrainConfig c;
    char *a = path("all_on"), *b = path("all_off");
    base_config(&c, model, data_all, a);
    c.loss.beta = 0.04;
    GrpoErr err;
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "all signal, filter on: %s", err.msg);
    c.filter_groups = 0;
    c.train.output_dir = b;
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "all signal, filter off: %s", err.msg);
    size_t na, nb;
    float *wa = tiny_run_weights(a, &na), *wb = tiny_run_weights(b, &nb);
    T_CHECK(na == nb && !memcmp(wa, wb, sizeof(float) * na), "filter_groups changed a run where every group has signal");
    char *ca = tiny_run_file(a, "completions.jsonl"), *cb = tiny_run_file(b, "completions.jsonl");
    T_CHECK(ca && cb && !strcmp(ca, cb), "filter_groups changed the completions where every group has signal");
    free(wa), free(wb), free(ca), free(cb), free(a), free(b);
}

static void split_invariance(const char *model, const char *data) {
    int sizes[] = {8, 4, 2, 1};
    float *w0 = NULL;
    char *comp0 = NULL;
    size_t n0 = 0;
    double worst = 0;
    for (int si = 0; si < 4; si++) {
        TrainConfig c;
        char *out = path("split");
        fs_rm_rf(out);
        base_config(&c, model, data, out);
        c.loss.beta = 0.04;
        c.train.adam.eps = 1e-2;
        c.train.per_device_train_batch_size = sizes[si];
        c.train.gradient_accumulation_steps = 8 / sizes[si];
        GrpoErr err;
        T_CHECK(trainer_run(&c, NULL, &err) == 0, "batch %d: %s", sizes[si], err.msg);
        size_t n;
        float *w = tiny_run_weights(out, &n);
        char *comp = tiny_run_file(out, "completions.jsonl");
        if (!w0) {
            w0 = w, comp0 = comp, n0 = n;
        } else {
            T_CHECK(comp && comp0 && !strcmp(comp, comp0), "completions differ for micro-batch %d", sizes[si]);
            double mx = 0, d = 0;
            for (size_t i = 0; i < n0 && n == n0; i++) mx = fmax(mx, fabs(w0[i])), d = fmax(d, fabs((double)w[i] - w0[i]));
            worst = fmax(worst, d / mx);
            T_CHECK(n == n0 && d <= 1e-6 * mx, "micro-batch %d: weights differ by %.3g (max |w| %.3g)", sizes[si], d, mx);
            free(w), free(comp);
        }
        free(out);
    }
    printf("split invariance with filter_groups: worst weight difference %.3g of max |w|\n", worst);
    free(w0), free(comp0);
}

/* A generation batch used over two steps (steps_per_generation 2): resuming from
 * checkpoint-3, in the middle of the second, equals the uninterrupted run. */
static void resume(const char *model, const char *data) {
    TrainConfig c;
    char *a = path("resume_a"), *b = path("resume_b");
    base_config(&c, model, data, a);
    c.train.max_steps = 4;
    c.train.gradient_accumulation_steps = 1;
    c.steps_per_generation = 2;
    c.loss.beta = 0.04;
    GrpoErr err;
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "uninterrupted: %s", err.msg);
    c.train.output_dir = b;
    c.train.save_steps = 1;
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "with checkpoints: %s", err.msg);
    char *ck3 = fs_join(b, "checkpoint-3"), *rollout = fs_join(ck3, "rollout.json"), *model_b = fs_join(b, "model.safetensors");
    T_CHECK(fs_exists(rollout), "checkpoint-3 holds the generation batch in use");
    unlink(model_b);
    c.train.resume_from_checkpoint = ck3;
    c.train.save_steps = 0;
    c.train.overwrite_output_dir = 1; /* checkpoint-4 of the run with checkpoints is later: removed */
    T_CHECK(trainer_run(&c, NULL, &err) == 0, "resume: %s", err.msg);
    c.train.overwrite_output_dir = 0;
    size_t na, nb;
    float *wa = tiny_run_weights(a, &na), *wb = tiny_run_weights(b, &nb);
    T_CHECK(na == nb && !memcmp(wa, wb, sizeof(float) * na), "the resumed run differs from the uninterrupted one");
    char *ma = tiny_run_file(a, "completions.jsonl"), *mb = tiny_run_file(b, "completions.jsonl");
    T_CHECK(ma && mb && !strcmp(ma, mb), "completions.jsonl differs after resume");
    free(wa), free(wb), free(ma), free(mb), free(ck3), free(rollout), free(model_b), free(a), free(b);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/grpo-test-dynsample-%d", (int)getpid());
    GrpoErr err;
    fs_mkdir_p(root, &err);
    char *model = path("model"), *data = path("data.jsonl"), *data_all = path("all.jsonl"), *script = path("reward.py");
    tiny_model_save(model);
    write_data(data, 0);
    write_data(data_all, 1);
    FILE *f = fopen(script, "w");
    fputs("import json, sys\n"
          "for line in sys.stdin:\n"
          "    q = json.loads(line)\n"
          "    r = [float(sum(ids) % 97) if s else 0.5 for ids, s in zip(q['completion_ids'], q['signal'])]\n"
          "    print(json.dumps({'rewards': r}), flush=True)\n",
          f);
    fclose(f);
    snprintf(reward_spec, sizeof reward_spec, "cmd:python3 %s", script);
    composition(model, data);
    bound(model, data);
    all_signal(model, data_all);
    split_invariance(model, data);
    resume(model, data);
    fs_rm_rf(root);
    free(model), free(data), free(data_all), free(script);
    return t_summary("grpo/test_dynamic_sampling");
}
