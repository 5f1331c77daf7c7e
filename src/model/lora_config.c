/* model/lora_config.c — a PEFT adapter's adapter_config.json read and checked
 * (lora.h): peft_type, task_type, r, lora_alpha, lora_dropout, use_rslora, the
 * features this does not implement, and target_modules / exclude_modules matched
 * against a module's name as PEFT matches them (check_target_module_exists: a
 * list entry equal to the name or its last dotted parts, a string a regular
 * expression the whole name must match). Not here: the tensors (lora.c) and
 * whether the targets agree with them (lora_load). */
#include <float.h>
#include <math.h>
#include <oniguruma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "io/fsutil.h"
#include "model/lora.h"

/* A field PEFT may set that this does not implement: absent, null, false, "none",
 * an empty list or mapping are fine. */
static int refuse_feature(const json_t *cfg, const char *key, const char *path, GrpoErr *err) {
    const json_t *v = json_object_get(cfg, key);
    int unset = !v || json_is_null(v) || json_is_false(v) || (json_is_string(v) && !strcmp(json_string_value(v), "none")) ||
                (json_is_array(v) && json_array_size(v) == 0) || (json_is_object(v) && json_object_size(v) == 0);
    if (unset) return 0;
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT), shown[80];
    err_set(err, "%s: %s %s is not supported (plain LoRA only: no DoRA, biases, fan_in_fan_out, modules_to_save, "
            "rank or alpha patterns, target_parameters)", path, key, text_escaped(shown, sizeof shown, text ? text : "?", 60));
    free(text);
    return -1;
}

/* A Python regular expression that the whole module name must match (PEFT:
 * re.fullmatch): Oniguruma's Python syntax, anchored at the end by \Z and
 * matched from the start (module names hold no newline). */
static int compile_fullmatch(regex_t **re, const char *py, char *why, size_t cap) {
    static int ready;
    if (!ready) {
        OnigEncoding encs[1] = {ONIG_ENCODING_UTF8};
        onig_initialize(encs, 1);
        ready = 1;
    }
    size_t n = strlen(py);
    char *pat = xmalloc(n + 8);
    snprintf(pat, n + 8, "(?:%s)\\Z", py);
    OnigErrorInfo einfo;
    int r = onig_new(re, (const UChar *)pat, (const UChar *)pat + strlen(pat), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                     ONIG_SYNTAX_PYTHON, &einfo);
    free(pat);
    if (r == ONIG_NORMAL) return 0;
    UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &einfo);
    snprintf(why, cap, "%s", (char *)msg);
    *re = NULL;
    return -1;
}

/* target_modules or exclude_modules (key) into mt: absent or null is dflt (a list,
 * NULL for none), a list of strings, or a string (a regular expression, or
 * "all-linear"). */
static int read_match(LoraMatch *mt, const json_t *cfg, const char *key, const char *const *dflt, const char *path,
                      GrpoErr *err) {
    const json_t *v = json_object_get(cfg, key);
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL, raw[110];
    if (json_is_string(v)) /* as written, not JSON-escaped once more: a regex's backslashes stay single */
        snprintf(mt->shown, sizeof mt->shown, "\"%s\"", text_escaped(raw, sizeof raw, json_string_value(v), 100));
    else text_escaped(mt->shown, sizeof mt->shown, text ? text : "null", 100);
    free(text);
    if (!v || json_is_null(v)) {
        mt->kind = dflt ? LORA_MATCH_LIST : LORA_MATCH_NONE;
        for (int i = 0; dflt && dflt[i]; i++) {
            mt->names = xrealloc(mt->names, sizeof(char *) * (size_t)(mt->n + 1));
            mt->names[mt->n++] = xstrdup(dflt[i]);
        }
        if (dflt) snprintf(mt->shown, sizeof mt->shown, "null (PEFT's default for these models: q_proj, v_proj)");
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "all-linear")) { /* PEFT: every linear layer but the output layer */
            mt->kind = LORA_MATCH_LIST;
            for (int i = 0; lora_module_names[i]; i++) {
                mt->names = xrealloc(mt->names, sizeof(char *) * (size_t)(mt->n + 1));
                mt->names[mt->n++] = xstrdup(lora_module_names[i]);
            }
            return 0;
        }
        char why[ONIG_MAX_ERROR_MESSAGE_LEN];
        regex_t *re;
        if (compile_fullmatch(&re, s, why, sizeof why))
            return err_set(err, "%s: %s %s: not a regular expression (PEFT matches a string as one): %s", path, key,
                           mt->shown, why);
        mt->re = re;
        mt->kind = LORA_MATCH_REGEX;
        return 0;
    }
    if (!json_is_array(v))
        return err_set(err, "%s: %s %s: expected a list of module names or a string (a regular expression)", path,
                       key, mt->shown);
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x) {
        if (!json_is_string(x) || !json_string_length(x))
            return err_set(err, "%s: %s %s: entry %zu is not a module name (a non-empty string)", path, key, mt->shown, i);
        mt->names = xrealloc(mt->names, sizeof(char *) * (size_t)(mt->n + 1));
        mt->names[mt->n++] = xstrdup(json_string_value(x));
    }
    mt->kind = LORA_MATCH_LIST;
    if (mt->n == 0 && dflt) /* PEFT: "Target modules [] not found in the base model" */
        return err_set(err, "%s: %s []: names no module (PEFT refuses it too)", path, key);
    return 0;
}

static int match(const LoraMatch *mt, const char *module) {
    if (mt->kind == LORA_MATCH_REGEX) {
        const UChar *s = (const UChar *)module, *end = s + strlen(module);
        return onig_match(mt->re, s, end, s, NULL, ONIG_OPTION_NONE) >= 0;
    }
    size_t len = strlen(module);
    for (int i = 0; i < mt->n; i++) {
        size_t k = strlen(mt->names[i]);
        if (!strcmp(module, mt->names[i]) ||
            (k < len && module[len - k - 1] == '.' && !strcmp(module + len - k, mt->names[i])))
            return 1;
    }
    return 0;
}

int lora_config_targets(const LoraAdapter *a, const char *module) {
    return match(&a->target, module) && !(a->exclude.kind != LORA_MATCH_NONE && match(&a->exclude, module));
}

static void match_free(LoraMatch *mt) {
    for (int i = 0; i < mt->n; i++) free(mt->names[i]);
    free(mt->names);
    if (mt->re) onig_free(mt->re);
    memset(mt, 0, sizeof *mt);
}

void lora_config_free(LoraAdapter *a) {
    match_free(&a->target);
    match_free(&a->exclude);
}

int lora_config_read(LoraAdapter *a, const char *dir, GrpoErr *err) {
    char *path = fs_join(dir, "adapter_config.json");
    json_t *cfg = fs_load_json(path, 0, err);
    int rc = cfg ? 0 : -1;
    const json_t *pt = cfg ? json_object_get(cfg, "peft_type") : NULL, *r = cfg ? json_object_get(cfg, "r") : NULL;
    const json_t *alpha = cfg ? json_object_get(cfg, "lora_alpha") : NULL, *rs = cfg ? json_object_get(cfg, "use_rslora") : NULL;
    const json_t *task = cfg ? json_object_get(cfg, "task_type") : NULL;
    char shown[80];
    if (!rc && !json_is_object(cfg)) rc = err_set(err, "%s: expected a JSON object", path);
    if (!rc && !(json_is_string(pt) && !strcmp(json_string_value(pt), "LORA")))
        rc = err_set(err, "%s: peft_type must be \"LORA\"", path);
    /* PEFT: null (a PeftModel of no task) or a task; only a causal LM's is this model */
    if (!rc && task && !json_is_null(task) && !(json_is_string(task) && !strcmp(json_string_value(task), "CAUSAL_LM"))) {
        char *text = json_dumps(task, JSON_ENCODE_ANY | JSON_COMPACT);
        rc = err_set(err, "%s: task_type %s: expected \"CAUSAL_LM\" or null (an adapter for a causal language model)",
                     path, text_escaped(shown, sizeof shown, text ? text : "?", 60));
        free(text);
    }
    if (!rc && !(json_is_integer(r) && json_integer_value(r) > 0 && json_integer_value(r) <= 65536))
        rc = err_set(err, "%s: r must be an integer in [1, 65536]", path);
    if (!rc && !(json_is_number(alpha) && isfinite(json_number_value(alpha))))
        rc = err_set(err, "%s: lora_alpha must be a number", path);
    if (!rc && rs && !json_is_boolean(rs) && !json_is_null(rs)) rc = err_set(err, "%s: use_rslora must be true or false", path);
    const json_t *dr = cfg ? json_object_get(cfg, "lora_dropout") : NULL;
    if (!rc && dr && !json_is_null(dr) && !(json_is_number(dr) && json_number_value(dr) >= 0 && json_number_value(dr) < 1))
        rc = err_set(err, "%s: lora_dropout must be a number in [0, 1)", path);
    static const char *const unsupported[] = {"use_dora",      "fan_in_fan_out",      "modules_to_save", "rank_pattern",
                                              "alpha_pattern", "layers_to_transform", "use_qalora",      "lora_bias",
                                              "bias",          "target_parameters"};
    for (int i = 0; !rc && i < (int)(sizeof unsupported / sizeof *unsupported); i++)
        rc = refuse_feature(cfg, unsupported[i], path, err);
    if (!rc) {
        a->r = (int)json_integer_value(r);
        a->alpha = json_number_value(alpha);
        a->use_rslora = json_is_true(rs);
        a->dropout = json_is_number(dr) ? json_number_value(dr) : 0.0;
        a->scaling = a->use_rslora ? a->alpha / sqrt(a->r) : a->alpha / a->r;
        /* the adapters compute in fp32: a scaling beyond its range is Inf there */
        if (!(fabs(a->scaling) <= FLT_MAX))
            rc = err_set(err, "%s: lora_alpha %g gives the scaling %g (lora_alpha / %s), beyond fp32's range", path,
                         a->alpha, a->scaling, a->use_rslora ? "sqrt(r)" : "r");
    }
    static const char *const peft_default[] = {"q_proj", "v_proj", NULL};
    if (!rc) rc = read_match(&a->target, cfg, "target_modules", peft_default, path, err);
    if (!rc) rc = read_match(&a->exclude, cfg, "exclude_modules", NULL, path, err);
    if (rc) lora_config_free(a);
    json_decref(cfg);
    free(path);
    return rc;
}
