/* io/hf_cache.c — Hub ids resolved in the local Hugging Face cache (hf_cache.h),
 * and the ids this process resolved, by directory. Not here: downloading. */
#include "io/hf_cache.h"

#include "core/check.h"
#include "io/fsutil.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int hf_is_repo_id(const char *s) {
    struct stat sb;
    if (!*s || s[0] == '.' || s[0] == '-' || stat(s, &sb) == 0) return 0;
    int slashes = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '/') {
            if (++slashes > 1 || p == s || !p[1] || p[1] == '.' || p[1] == '-') return 0;
        } else if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
            return 0;
        }
    }
    return strlen(s) <= 200 && !strstr(s, "..");
}

char *hf_cache_dir(void) {
    const char *e = getenv("HF_HUB_CACHE");
    if (!e || !*e) e = getenv("HUGGINGFACE_HUB_CACHE");
    if (e && *e) return xstrdup(e);
    if ((e = getenv("HF_HOME")) && *e) return fs_join(e, "hub");
    char *base;
    if ((e = getenv("XDG_CACHE_HOME")) && *e) base = xstrdup(e);
    else base = fs_join((e = getenv("HOME")) && *e ? e : "/", ".cache");
    char *dir = fs_join(base, "huggingface/hub");
    free(base);
    return dir;
}

/* The first line of path (a commit hash), or NULL. */
static char *read_ref(const char *path) {
    GrpoErr err;
    FILE *f = fs_fopen_regular(path, &err);
    if (!f) return NULL;
    char buf[128];
    char *line = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!line) return NULL;
    buf[strcspn(buf, "\r\n")] = 0;
    for (const char *p = buf; *p; p++)
        if (!isalnum((unsigned char)*p)) return NULL;
    return *buf ? xstrdup(buf) : NULL;
}

/* The directories hf_cache_model_dir returned, with their ids: a handful per
 * process (one per model option), kept for its life. */
static struct {
    char *dir, *id;
} resolved[16];
static int n_resolved;

static void remember(const char *dir, const char *id) {
    for (int i = 0; i < n_resolved; i++)
        if (!strcmp(resolved[i].dir, dir) && !strcmp(resolved[i].id, id)) return;
    if (n_resolved == (int)(sizeof resolved / sizeof resolved[0])) return; /* beyond: recorded as paths */
    resolved[n_resolved].dir = xstrdup(dir);
    resolved[n_resolved].id = xstrdup(id);
    n_resolved++;
}

const char *hf_cache_repo_id_of(const char *dir) {
    for (int i = 0; dir && i < n_resolved; i++)
        if (!strcmp(resolved[i].dir, dir)) return resolved[i].id;
    return NULL;
}

char *hf_cache_model_dir(const char *repo_id, const char *revision) {
    if (!hf_is_repo_id(repo_id)) return NULL;
    char name[256 + 8] = "models--";
    size_t n = strlen(name);
    for (const char *p = repo_id; *p && n + 2 < sizeof name; p++) {
        if (*p == '/') name[n++] = '-', name[n++] = '-';
        else name[n++] = *p;
    }
    name[n] = 0;
    char *cache = hf_cache_dir(), *repo = fs_join(cache, name), *refs = fs_join(repo, "refs");
    char *ref_path = fs_join(refs, revision ? revision : "main"), *commit = read_ref(ref_path);
    char *snaps = fs_join(repo, "snapshots"), *dir = fs_join(snaps, commit ? commit : (revision ? revision : "main"));
    char *cfg = fs_join(dir, "config.json");
    struct stat sb;
    if (stat(cfg, &sb) != 0 || !S_ISREG(sb.st_mode)) free(dir), dir = NULL;
    if (dir) remember(dir, repo_id);
    free(cfg), free(snaps), free(commit), free(ref_path), free(refs), free(repo), free(cache);
    return dir;
}
