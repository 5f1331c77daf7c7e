/* cli/args.c — option parsing shared by the subcommands (see args.h). */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "core/check.h"
#include "ops/gemm.h"

/* Strings and lists allocated while parsing (YAML values, list arrays). */
static void **arena;
static int arena_n, arena_cap;

static void *keep(void *p) {
    if (arena_n == arena_cap) arena = xrealloc(arena, sizeof(void *) * (arena_cap = arena_cap ? arena_cap * 2 : 32));
    arena[arena_n++] = p;
    return p;
}

void args_free(void) {
    for (int i = 0; i < arena_n; i++) free(arena[i]);
    free(arena);
    arena = NULL;
    arena_n = arena_cap = 0;
}

static void print_help(FILE *out, const char *cmd, const char *synopsis, const Opt *opts, int n) {
    fprintf(out, "usage: grpo %s %s\n\noptions:\n", cmd, synopsis);
    for (int i = 0; i < n; i++) {
        const char *arg = opts[i].kind == OPT_FLAG ? "" : opts[i].kind == OPT_STR ? " VALUE"
                          : opts[i].kind == OPT_YAML ? " FILE.yaml"
                          : opts[i].kind == OPT_LIST ? " V [V...]" : " N";
        char left[64];
        snprintf(left, sizeof left, "--%s%s", opts[i].name, arg);
        fprintf(out, "  %-28s %s\n", left, opts[i].help);
    }
}

/* Sets a scalar option from text; `src` names where it came from for messages. */
static int set_value(const char *cmd, const char *src, const Opt *o, const char *val) {
    char *end;
    errno = 0;
    if (o->kind == OPT_FLAG) {
        if (!strcmp(val, "true") || !strcmp(val, "1") || !strcmp(val, "True")) *(int *)o->dst = 1;
        else if (!strcmp(val, "false") || !strcmp(val, "0") || !strcmp(val, "False")) *(int *)o->dst = 0;
        else {
            fprintf(stderr, "grpo %s: %s%s takes true or false, not '%s'\n", cmd, src, o->name, val);
            return 2;
        }
    } else if (o->kind == OPT_STR || o->kind == OPT_YAML) {
        *(const char **)o->dst = val;
    } else if (o->kind == OPT_LIST) {
        StrList *l = o->dst;
        l->v = keep(xmalloc(sizeof(char *)));
        l->v[0] = val;
        l->n = 1;
    } else if (o->kind == OPT_INT) {
        long v = strtol(val, &end, 10);
        if (errno || end == val || *end) {
            fprintf(stderr, "grpo %s: %s%s expects an integer, not '%s'\n", cmd, src, o->name, val);
            return 2;
        }
        *(long *)o->dst = v;
    } else {
        double v = strtod(val, &end);
        if (errno || end == val || *end) {
            fprintf(stderr, "grpo %s: %s%s expects a number, not '%s'\n", cmd, src, o->name, val);
            return 2;
        }
        *(double *)o->dst = v;
    }
    return 0;
}

static const Opt *find_opt(const Opt *opts, int n, const char *name, size_t len) {
    for (int k = 0; k < n; k++)
        if (strlen(opts[k].name) == len && !strncmp(opts[k].name, name, len)) return &opts[k];
    return NULL;
}

/* Applies a YAML mapping file to the options. */
static int apply_yaml(const char *cmd, const char *path, const Opt *opts, int n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "grpo %s: %s: cannot open the config file\n", cmd, path);
        return 2;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    int rc = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        fprintf(stderr, "grpo %s: %s:%zu: invalid YAML: %s\n", cmd, path, parser.problem_mark.line + 1,
                parser.problem ? parser.problem : "?");
        yaml_parser_delete(&parser);
        fclose(f);
        return 2;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    char src[600];
    if (root && root->type != YAML_MAPPING_NODE) {
        fprintf(stderr, "grpo %s: %s: expected a mapping of option names to values\n", cmd, path);
        rc = 2;
    }
    for (yaml_node_pair_t *p = root && !rc ? root->data.mapping.pairs.start : NULL;
         p && p < root->data.mapping.pairs.top && !rc; p++) {
        yaml_node_t *k = yaml_document_get_node(&doc, p->key), *v = yaml_document_get_node(&doc, p->value);
        if (k->type != YAML_SCALAR_NODE) continue;
        const char *key = (const char *)k->data.scalar.value;
        const Opt *o = find_opt(opts, n, key, strlen(key));
        if (!o || o->kind == OPT_YAML) {
            fprintf(stderr, "grpo %s: %s:%zu: unknown option '%s' (see grpo %s --help)\n", cmd, path,
                    k->start_mark.line + 1, key, cmd);
            rc = 2;
            break;
        }
        snprintf(src, sizeof src, "%s:%zu: ", path, k->start_mark.line + 1);
        if (v->type == YAML_SCALAR_NODE) {
            const char *val = (const char *)v->data.scalar.value;
            if (v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && (!strcmp(val, "null") || !strcmp(val, "~") || !*val))
                continue;
            rc = set_value(cmd, src, o, keep(xstrdup(val)));
        } else if (v->type == YAML_SEQUENCE_NODE && o->kind == OPT_LIST) {
            StrList *l = o->dst;
            int cnt = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
            l->v = keep(xmalloc(sizeof(char *) * (cnt ? cnt : 1)));
            l->n = 0;
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = yaml_document_get_node(&doc, *it);
                if (e->type != YAML_SCALAR_NODE) {
                    fprintf(stderr, "grpo %s: %s%s: list entries must be scalars\n", cmd, src, key);
                    rc = 2;
                    break;
                }
                l->v[l->n++] = keep(xstrdup((const char *)e->data.scalar.value));
            }
        } else {
            fprintf(stderr, "grpo %s: %s%s: expected a %s\n", cmd, src, key,
                    o->kind == OPT_LIST ? "list or a single value" : "single value");
            rc = 2;
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

int args_parse(const char *cmd, const char *synopsis, int argc, char **argv, const Opt *opts,
               int n) {
    /* the YAML file first, so that the command line wins */
    for (int k = 0; k < n; k++) {
        if (opts[k].kind != OPT_YAML) continue;
        size_t len = strlen(opts[k].name);
        for (int i = 1; i < argc; i++) {
            const char *path = NULL, *a = argv[i];
            if (strncmp(a, "--", 2) || strncmp(a + 2, opts[k].name, len)) continue;
            if (!a[2 + len] && i + 1 < argc) path = argv[i + 1];
            else if (a[2 + len] == '=') path = a + 3 + len;
            if (path) {
                int rc = apply_yaml(cmd, path, opts, n);
                if (rc) return rc;
            }
        }
    }
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
        const Opt *o = find_opt(opts, n, name, len);
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
            } else if (i + 1 < argc && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false"))) {
                /* `--flag true|false`, as TRL's command line accepts */
                *(int *)o->dst = !strcmp(argv[++i], "true");
            } else {
                *(int *)o->dst = 1;
            }
            continue;
        }
        if (o->kind == OPT_LIST && !eq) {
            StrList *l = o->dst;
            int cnt = 0;
            while (i + 1 + cnt < argc && strncmp(argv[i + 1 + cnt], "--", 2)) cnt++;
            if (cnt == 0) {
                fprintf(stderr, "grpo %s: --%s needs at least one value\n", cmd, o->name);
                return 2;
            }
            l->v = keep(xmalloc(sizeof(char *) * cnt));
            for (l->n = 0; l->n < cnt; l->n++) l->v[l->n] = argv[i + 1 + l->n];
            i += cnt;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            fprintf(stderr, "grpo %s: --%s needs a value\n", cmd, o->name);
            return 2;
        }
        int rc = set_value(cmd, "--", o, val);
        if (rc) return rc;
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
