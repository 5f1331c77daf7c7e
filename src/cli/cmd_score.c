/* cli/cmd_score.c — `grpo score`: per-token log-probabilities of given completions.
 * Reads JSON lines {"prompt_ids": [...], "completion_ids": [...]} and writes one line
 * {"logprobs": [...]} per input line, in order: the natural-log probability of each
 * completion token given everything before it (likelihood evaluation, and the
 * contract that tests the forward pass from outside). Lines are batched up to
 * --batch_tokens padded tokens per forward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/batch.h"
#include "model/model_io.h"

typedef struct {
    int32_t *ids;       /* prompt then completion */
    int n_prompt, n;
} ScoreItem;

/* Parses one line into it; errors name FILE:LINE and the field. */
static int parse_item(const char *line, const char *file, long lineno, int V, ScoreItem *it,
                      GrpoErr *err) {
    json_error_t je;
    json_t *root = json_loads(line, 0, &je);
    if (!root) return err_set(err, "%s:%ld: not valid JSON: %s", file, lineno, je.text);
    int rc = 0;
    json_t *lists[2] = {json_object_get(root, "prompt_ids"), json_object_get(root, "completion_ids")};
    const char *names[2] = {"prompt_ids", "completion_ids"};
    if (!json_is_object(root)) rc = err_set(err, "%s:%ld: expected a JSON object", file, lineno);
    for (int k = 0; k < 2 && !rc; k++)
        if (!json_is_array(lists[k]))
            rc = err_set(err, "%s:%ld: missing '%s' (a list of token ids)", file, lineno, names[k]);
    if (!rc) {
        size_t np = json_array_size(lists[0]), nc = json_array_size(lists[1]);
        if (np == 0 && nc > 0)
            rc = err_set(err, "%s:%ld: prompt_ids is empty: the first completion token needs a context", file, lineno);
        it->n_prompt = (int)np;
        it->n = (int)(np + nc);
        it->ids = xmalloc(sizeof(int32_t) * (it->n ? it->n : 1));
        for (int k = 0, pos = 0; k < 2 && !rc; k++) {
            for (size_t i = 0; i < json_array_size(lists[k]) && !rc; i++, pos++) {
                json_t *v = json_array_get(lists[k], i);
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= V)
                    rc = err_set(err, "%s:%ld: %s[%zu] must be a token id in 0..%d", file, lineno, names[k], i, V - 1);
                else
                    it->ids[pos] = (int32_t)json_integer_value(v);
            }
        }
        if (rc) free(it->ids);
    }
    json_decref(root);
    return rc;
}

/* Scores items[n] in one forward and prints their lines in order. An item with
 * no tokens at all (both lists empty) has nothing to score and stays out of
 * the batch. */
static void score_batch(Model *m, Activations *a, const ScoreItem *items, int n, float inv_temp) {
    BatchSeq *seqs = xmalloc(sizeof(BatchSeq) * n);
    int S = 0;
    for (int i = 0; i < n; i++)
        if (items[i].n) seqs[S++] = (BatchSeq){items[i].ids, items[i].n, NULL, 0, items[i].n_prompt};
    PaddedBatch pb = {0};
    float *lp = NULL;
    if (S) {
        padded_batch_build(&pb, seqs, S);
        lp = xmalloc(sizeof(float) * (pb.offsets[S] + 1));
        padded_batch_logprobs(m, a, &pb, inv_temp, lp, NULL);
    }
    for (int i = 0, k = 0; i < n; i++) {
        fputs("{\"logprobs\": [", stdout);
        if (items[i].n) {
            for (int j = pb.offsets[k]; j < pb.offsets[k + 1]; j++)
                printf("%s%.8g", j > pb.offsets[k] ? ", " : "", lp[j]);
            k++;
        }
        fputs("]}\n", stdout);
    }
    fflush(stdout);
    if (S) padded_batch_free(&pb);
    free(seqs), free(lp);
}

int cmd_score(int argc, char **argv) {
    const char *model_dir = NULL, *data = NULL;
    long batch_tokens = 4096;
    double temperature = 1.0;
    int ckpt = 0;
    Opt opts[] = {
        {"model", OPT_STR, &model_dir, "model directory (HF layout) (required)"},
        {"data", OPT_STR, &data, "JSON lines {prompt_ids, completion_ids}; - for stdin (required)"},
        {"temperature", OPT_FLOAT, &temperature, "score softmax(logits / temperature) (default 1)"},
        {"batch_tokens", OPT_INT, &batch_tokens, "padded tokens per forward pass (default 4096)"},
        {"gradient_checkpointing", OPT_FLAG, &ckpt, "plan activations as training would (no effect on results)"},
    };
    int rc = args_parse("score", "--model DIR --data FILE.jsonl [options]", argc, argv, opts,
                        sizeof opts / sizeof opts[0]);
    if (rc) return rc == 1 ? 0 : rc;
    if (!model_dir || !data) {
        fprintf(stderr, "grpo score: --model and --data are required\n");
        return 2;
    }
    if (!(temperature > 0) || batch_tokens < 1) {
        fprintf(stderr, "grpo score: --temperature must be > 0 and --batch_tokens >= 1\n");
        return 2;
    }
    cli_setup_threads();
    FILE *in = strcmp(data, "-") ? fopen(data, "r") : stdin;
    if (!in) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: cannot open for reading", data);
        return cli_fail("score", msg);
    }
    GrpoErr err;
    Model m;
    if (model_load(&m, model_dir, &err)) {
        if (in != stdin) fclose(in);
        return cli_fail("score", err.msg);
    }
    Activations a;
    acts_create(&a, &m.cfg, (int)batch_tokens, ckpt, 32);
    int cap = 64, n = 0, Tmax = 0;
    ScoreItem *items = xmalloc(sizeof(ScoreItem) * cap);
    char *line = NULL;
    size_t linecap = 0;
    long lineno = 0;
    rc = 0;
    while (getline(&line, &linecap, in) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        ScoreItem it;
        if (parse_item(line, data, lineno, m.cfg.vocab_size, &it, &err)) {
            rc = 1;
            break;
        }
        if (it.n > batch_tokens) {
            err_set(&err, "%s:%ld: %d tokens exceed --batch_tokens %ld", data, lineno, it.n, batch_tokens);
            free(it.ids);
            rc = 1;
            break;
        }
        int T = it.n > Tmax ? it.n : Tmax;
        if (n > 0 && (long)(n + 1) * T > batch_tokens) {
            score_batch(&m, &a, items, n, (float)(1.0 / temperature));
            for (int i = 0; i < n; i++) free(items[i].ids);
            n = 0;
            T = it.n;
        }
        if (n == cap) items = xrealloc(items, sizeof(ScoreItem) * (cap *= 2));
        items[n++] = it;
        Tmax = T;
    }
    if (!rc && n > 0) score_batch(&m, &a, items, n, (float)(1.0 / temperature));
    for (int i = 0; i < n; i++) free(items[i].ids);
    free(items);
    free(line);
    if (in != stdin) fclose(in);
    acts_free(&a);
    model_free(&m);
    return rc ? cli_fail("score", err.msg) : 0;
}
