/* reward/reward_plugin.c — reward functions as C shared libraries loaded with
 * dlopen: the fastest path, for rewards that are plain string work. The ABI
 * is reward/reward_plugin.h. Not here: plugin state or initialisation hooks,
 * reloading. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "io/fsutil.h"
#include "reward/reward_internal.h"
#include "reward/reward_plugin.h"

typedef struct {
    char *path, *symbol;
    void *handle;
    GrpoRewardFn fn;
} PluginState;

static int plugin_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    PluginState *p = f->state;
    GrpoRewardItem *items = xcalloc((size_t)(b->n ? b->n : 1), sizeof *items);
    char **rows = xcalloc((size_t)(b->n ? b->n : 1), sizeof *rows);
    for (int i = 0; i < b->n; i++) {
        const RewardItem *it = &b->items[i];
        /* the G completions of a prompt share a row: serialise it once */
        if (i > 0 && it->row == b->items[i - 1].row)
            rows[i] = NULL, items[i].row_json = items[i - 1].row_json;
        else {
            rows[i] = it->row ? json_dumps(it->row, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            items[i].row_json = rows[i] ? rows[i] : "{}";
        }
        items[i].prompt_text = it->prompt_text ? it->prompt_text : "";
        items[i].completion = it->completion;
        items[i].completion_bytes = strlen(it->completion);
        items[i].completion_ids = it->completion_ids;
        items[i].n_completion_ids = it->n_completion_ids;
        out[i] = NAN;
    }
    char msg[512] = {0};
    int rc = p->fn(items, b->n, out, msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    for (int i = 0; i < b->n; i++) free(rows[i]);
    free(rows);
    free(items);
    if (rc) { /* the plugin's own words, escaped: one line whatever it wrote */
        char path[512], why[1024];
        return err_set(err, "reward plugin '%s' (%s) failed: '%s'", text_escaped(path, sizeof path, p->path, 120),
                       p->symbol, msg[0] ? text_escaped(why, sizeof why, msg, 400) : "(no message)");
    }
    return 0;
}

static void plugin_destroy(RewardFunc *f) {
    PluginState *p = f->state;
    if (p->handle) dlclose(p->handle);
    free(p->path);
    free(p->symbol);
    free(p);
}

int reward_plugin_init(RewardFunc *f, const char *path, const char *symbol, GrpoErr *err) {
    /* a bare file name means the file here, not a search of the library path */
    char *load = strchr(path, '/') ? NULL : fs_join(".", path);
    dlerror();
    void *h = dlopen(load ? load : path, RTLD_NOW | RTLD_LOCAL);
    free(load);
    char shown[512];
    text_escaped(shown, sizeof shown, path, 120);
    if (!h) {
        const char *why = dlerror();
        return err_set(err, "reward plugin '%s': cannot load: %s", shown, why ? why : "dlopen failed");
    }
    dlerror();
    void *sym = dlsym(h, symbol);
    if (!sym) {
        dlclose(h);
        return err_set(err, "reward plugin '%s': no function '%s' (expected int %s(const GrpoRewardItem *, int, double *, char *, size_t); see reward/reward_plugin.h)",
                       shown, symbol, symbol);
    }
    PluginState *p = xcalloc(1, sizeof *p);
    p->path = xstrdup(path);
    p->symbol = xstrdup(symbol);
    p->handle = h;
    *(void **)&p->fn = sym; /* POSIX: object pointer to function pointer */
    f->state = p;
    f->compute = plugin_compute;
    f->destroy = plugin_destroy;
    return 0;
}
