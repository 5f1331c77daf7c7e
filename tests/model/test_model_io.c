/* tests/model/test_model_io.c — HF model directories: load, save, reload.
 *  - load then save reproduces every tensor's bytes exactly (F32 and BF16 fixtures),
 *    and config.json's fields;
 *  - a sharded save (small shard limit) reloads to identical parameters; saving
 *    over an earlier save leaves only the weight files of the new one;
 *  - bad directories: each gives -1 and one line naming the file and the problem;
 *  - a failed save leaves no directory behind. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/model_io.h"
#include "testutil.h"

static char tmp_root[256];

static char *tmp_path(const char *name) {
    return fs_join(tmp_root, name);
}

/* The weight files in dir: how many shards (model-*.safetensors), all named by
 * the index (-1 when one is not), and whether model.safetensors is there. */
static int count_shards(const char *dir, int *single) {
    char *p = fs_join(dir, "model.safetensors.index.json");
    json_t *idx = json_load_file(p, 0, NULL);
    free(p);
    json_t *wm = json_object_get(idx, "weight_map");
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    *single = 0;
    while (d && (e = readdir(d))) {
        *single |= !strcmp(e->d_name, "model.safetensors");
        if (strncmp(e->d_name, "model-", 6)) continue;
        int named = 0;
        const char *k;
        json_t *v;
        json_object_foreach(wm, k, v) named |= !strcmp(json_string_value(v), e->d_name);
        n = n < 0 || !named ? -1 : n + 1;
    }
    if (d) closedir(d);
    json_decref(idx);
    return n;
}

static void check_bitwise_roundtrip(const char *fixture) {
    char src[128];
    snprintf(src, sizeof src, "tests/fixtures/%s", fixture);
    GrpoErr err;
    Model m;
    T_CHECK(model_load(&m, src, &err) == 0, "%s", err.msg);
    char *out = tmp_path(fixture);
    ModelSaveOpts o;
    model_save_opts_default(&o);
    T_CHECK(model_save(&m, out, &o, &err) == 0, "%s", err.msg);
    StSet a, b;
    T_CHECK(stset_open_dir(&a, src, &err) == 0, "%s", err.msg);
    T_CHECK(stset_open_dir(&b, out, &err) == 0, "%s", err.msg);
    int same = 1, count = 0;
    for (int i = 0; i < m.table.n; i++) {
        const StFile *fa, *fb;
        const StTensor *ta = stset_find(&a, m.table.entries[i].name, &fa);
        const StTensor *tb = stset_find(&b, m.table.entries[i].name, &fb);
        if (!ta || !tb || ta->dtype != tb->dtype || ta->end - ta->begin != tb->end - tb->begin ||
            memcmp(fa->data + ta->begin, fb->data + tb->begin, ta->end - ta->begin)) {
            same = 0;
            fprintf(stderr, "tensor %s differs after load+save\n", m.table.entries[i].name);
        }
        count++;
    }
    T_CHECK(same && count == m.table.n, "%s: load+save is not bit-identical", fixture);
    /* config.json round trip keeps the architecture */
    ModelConfig c2;
    T_CHECK(config_load(&c2, out, &err) == 0, "%s", err.msg);
    T_CHECK(c2.hidden_size == m.cfg.hidden_size && c2.n_kv_heads == m.cfg.n_kv_heads &&
            c2.rope_llama3 == m.cfg.rope_llama3 && c2.tie_word_embeddings == m.cfg.tie_word_embeddings &&
            c2.head_dim == m.cfg.head_dim, "%s: config changed in round trip", fixture);
    config_free(&c2);
    stset_close(&a);
    stset_close(&b);

    /* sharded: tiny shard limit -> several files + index; reload gives the same floats */
    char *sh = tmp_path("sharded");
    o.max_shard_bytes = 20000;
    T_CHECK(model_save(&m, sh, &o, &err) == 0, "%s", err.msg);
    char *idx = fs_join(sh, "model.safetensors.index.json"), *one = fs_join(sh, "model.safetensors");
    T_CHECK(fs_exists(idx) && !fs_exists(one), "%s: sharded save wrote no index", fixture);
    Model m2;
    T_CHECK(model_load(&m2, sh, &err) == 0, "%s", err.msg);
    T_CHECK(memcmp(m.params, m2.params, sizeof(float) * m.table.total) == 0, "%s: sharded reload differs", fixture);
    /* saving over it with fewer shards removes the extra ones, and over a
     * single file removes that */
    int single, n_many = count_shards(sh, &single);
    o.max_shard_bytes = 30000;
    T_CHECK(model_save(&m2, sh, &o, &err) == 0, "%s", err.msg);
    int n_few = count_shards(sh, &single);
    T_CHECK(n_many > n_few && n_few > 1 && !single, "%s: %d shards, then %d (single %d)", fixture, n_many, n_few,
            single);
    /* saving over it unsharded replaces the shards */
    o.max_shard_bytes = 0;
    T_CHECK(model_save(&m2, sh, &o, &err) == 0, "%s", err.msg);
    T_CHECK(fs_exists(one) && !fs_exists(idx), "%s: unsharded save over sharded left the index", fixture);
    T_CHECK(count_shards(sh, &single) == 0 && single, "%s: shards left after an unsharded save", fixture);
    o.max_shard_bytes = 20000;
    T_CHECK(model_save(&m2, sh, &o, &err) == 0, "%s", err.msg);
    T_CHECK(count_shards(sh, &single) == n_many && !single, "%s: model.safetensors left after a sharded save",
            fixture);
    model_free(&m2);
    Model m3;
    T_CHECK(model_load(&m3, sh, &err) == 0, "%s", err.msg);
    if (m3.params) model_free(&m3);
    fs_rm_rf(sh);
    free(sh), free(idx), free(one), free(out);
    model_free(&m);
}

/* Writes DIR/config.json with `edit` applied to the qwen2 fixture's config. */
static char *make_dir(const char *name, const char *key, json_t *value, int copy_weights) {
    char *dir = tmp_path(name);
    fs_rm_rf(dir);
    GrpoErr err;
    fs_mkdir_p(dir, &err);
    json_error_t je;
    json_t *cfg = json_load_file("tests/fixtures/qwen2/config.json", 0, &je);
    if (key) {
        if (value) json_object_set_new(cfg, key, value);
        else json_object_del(cfg, key);
    }
    char *p = fs_join(dir, "config.json");
    json_dump_file(cfg, p, 0);
    free(p);
    json_decref(cfg);
    if (copy_weights) {
        char *w = fs_join(dir, "model.safetensors");
        fs_copy_file("tests/fixtures/qwen2/model.safetensors", w, &err);
        free(w);
    }
    return dir;
}

static void expect_load_error(const char *dir, const char *needle1, const char *needle2) {
    GrpoErr err = {{0}};
    Model m;
    int rc = model_load(&m, dir, &err);
    T_CHECK(rc == -1, "load of %s should fail (%s)", dir, needle1);
    if (rc == 0) {
        model_free(&m);
        return;
    }
    T_CHECK(strstr(err.msg, needle1) && (!needle2 || strstr(err.msg, needle2)) && !strchr(err.msg, '\n'),
            "error for %s lacks '%s'/'%s': %s", dir, needle1, needle2 ? needle2 : "", err.msg);
}

static void check_bad_configs(void) {
    char *d;
    d = make_dir("bad_type", "model_type", json_string("gpt2"), 1);
    expect_load_error(d, "config.json", "model_type 'gpt2' is not supported");
    free(d);
    d = make_dir("bad_heads", "hidden_size", json_integer(30), 1);
    expect_load_error(d, "config.json", "must divide hidden_size");
    free(d);
    d = make_dir("bad_kv", "num_key_value_heads", json_integer(3), 1);
    expect_load_error(d, "config.json", "num_key_value_heads (3) must divide");
    free(d);
    d = make_dir("missing_field", "num_hidden_layers", NULL, 1);
    expect_load_error(d, "config.json", "missing field 'num_hidden_layers'");
    free(d);
    d = make_dir("bad_rope", "rope_scaling", json_pack("{s:s,s:f}", "rope_type", "yarn", "factor", 4.0), 1);
    expect_load_error(d, "config.json", "rope_scaling type 'yarn'");
    free(d);
    d = make_dir("neg_vocab", "vocab_size", json_integer(-5), 1);
    expect_load_error(d, "config.json", "must be positive");
    free(d);
    d = make_dir("str_field", "hidden_size", json_string("32"), 1);
    expect_load_error(d, "config.json", "'hidden_size' must be an integer");
    free(d);
    /* weights that do not match the config */
    d = make_dir("more_layers", "num_hidden_layers", json_integer(3), 1);
    expect_load_error(d, "missing tensor 'model.layers.2.", NULL);
    free(d);
    d = make_dir("wider_mlp", "intermediate_size", json_integer(64), 1);
    expect_load_error(d, "model.safetensors", "mlp.gate_proj.weight' has shape [48, 32]; config.json implies [64, 32]");
    free(d);
    d = make_dir("no_weights", NULL, NULL, 0);
    expect_load_error(d, "model.safetensors", NULL);
    free(d);
    expect_load_error("tests/fixtures/does-not-exist", "config.json", "no such file");
}

/* A weight stored as I64 is a dtype error naming the tensor. */
static void check_bad_dtype(void) {
    char *d = make_dir("int_weights", NULL, NULL, 0);
    GrpoErr err;
    Model m;
    T_CHECK(model_load(&m, "tests/fixtures/qwen2", &err) == 0, "%s", err.msg);
    StWriteTensor *wt = calloc(m.table.n, sizeof *wt);
    int64_t *ints = calloc(m.table.entries[0].numel, sizeof(int64_t));
    for (int i = 0; i < m.table.n; i++) {
        ParamEntry *e = &m.table.entries[i];
        wt[i].name = e->name;
        wt[i].ndim = e->ndim;
        wt[i].shape[0] = e->shape[0];
        wt[i].shape[1] = e->shape[1];
        wt[i].dtype = i == 0 ? ST_I64 : ST_F32;
        wt[i].data = i == 0 ? NULL : m.params + e->offset;
        wt[i].raw = i == 0 ? (const void *)ints : NULL;
    }
    T_CHECK(st_write_dir(d, wt, m.table.n, 0, &err) == 0, "%s", err.msg);
    expect_load_error(d, "model.embed_tokens.weight' has dtype I64", "expected F32, BF16 or F16");
    free(ints), free(wt), free(d);
    model_free(&m);
}

/* Saving under a path whose parent is a file fails without leaving anything. */
static void check_failed_save(void) {
    GrpoErr err;
    Model m;
    T_CHECK(model_load(&m, "tests/fixtures/qwen3", &err) == 0, "%s", err.msg);
    char *file = tmp_path("plainfile");
    FILE *f = fopen(file, "w");
    fputs("x", f);
    fclose(f);
    char *out = fs_join(file, "model");
    ModelSaveOpts o;
    model_save_opts_default(&o);
    T_CHECK(model_save(&m, out, &o, &err) == -1, "save under a file should fail");
    T_CHECK(!fs_exists(out), "failed save left %s", out);
    free(out), free(file);
    model_free(&m);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/grpo-test-model-io-%d", (int)getpid());
    GrpoErr err;
    fs_mkdir_p(tmp_root, &err);
    check_bitwise_roundtrip("qwen2");
    check_bitwise_roundtrip("llama");
    check_bitwise_roundtrip("qwen3");
    check_bad_configs();
    check_bad_dtype();
    check_failed_save();
    fs_rm_rf(tmp_root);
    return t_summary("test_model_io");
}
