/* tokenizer/load.c — tokenizer.json, tokenizer_config.json and
 * generation_config.json into a Tokenizer.
 *
 * Every field is checked on the way in; an error names the file, the
 * component's JSON path (e.g. "pre_tokenizer.pretokenizers[0]") and what was
 * expected, and lists what is supported when a component type is unknown.
 * Encoding and decoding themselves live in encode.c / decode.c. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "io/fsutil.h"
#include "tokenizer/tok_internal.h"

/* ---- small JSON helpers ---------------------------------------------------- */
/* Config files may hold integers beyond 64 bits (Llama 3's model_max_length is
 * 1e30 written out), so they are read with every number as a double. */
static int read_json(const char *path, json_t **out, int optional, int numbers_as_real,
                     GrpoErr *err) {
    *out = NULL;
    if (optional && !fs_exists(path)) return 0;
    char *text;
    size_t len;
    if (fs_read_file(path, &text, &len, err)) return -1;
    json_error_t je;
    *out = json_loadb(text, len, JSON_ALLOW_NUL | (numbers_as_real ? JSON_DECODE_INT_AS_REAL : 0), &je);
    free(text);
    if (!*out)
        return err_set(err, "%s: invalid JSON at line %d column %d: %s", path, je.line, je.column,
                       je.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return err_set(err, "%s: expected a JSON object at the top level", path);
    }
    return 0;
}

static int jbool(const json_t *o, const char *key, int dflt) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return dflt;
    return json_is_true(v);
}

/* A type name: "type" field of a component object. */
static const char *jtype(const json_t *o) {
    const json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

typedef struct {
    Tokenizer *tok;
    GrpoErr *err;
} Ld;

#define LD_FAIL(ld, where, ...)                                                        \
    (err_set((ld)->err, __VA_ARGS__), err_prefix((ld)->err, "%s: %s", (ld)->tok->path, where))

/* A component loader: fills *out (a TokNormalizer, TokPre, TokPost or TokDec) from j. */
typedef int (*LoadFn)(Ld *ld, const json_t *j, const char *path, void *out);

/* The children of a "Sequence" component: j[key] is an array, each element loaded
 * with load (paths "path.key[i]") into a new zeroed array of *n elements of size
 * bytes. The array is returned even when *rc is -1, so the caller's free sees it. */
static void *load_sequence(Ld *ld, const json_t *j, const char *path, const char *key, LoadFn load,
                           size_t size, int *n, int *rc) {
    const json_t *a = json_object_get(j, key);
    *n = 0;
    *rc = -1;
    if (!json_is_array(a)) {
        LD_FAIL(ld, path, "Sequence: expected an array \"%s\"", key);
        return NULL;
    }
    *n = (int)json_array_size(a);
    char *children = xcalloc((size_t)*n + 1, size);
    for (int i = 0; i < *n; i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s.%s[%d]", path, key, i);
        if (load(ld, json_array_get(a, (size_t)i), sub, children + (size_t)i * size)) return children;
    }
    *rc = 0;
    return children;
}

/* ---- normalizers ----------------------------------------------------------- */
static int load_normalizer(Ld *ld, const json_t *j, const char *path, void *out) {
    TokNormalizer *n = out;
    memset(n, 0, sizeof *n);
    const char *t = json_is_object(j) ? jtype(j) : NULL;
    if (!t) return LD_FAIL(ld, path, "expected an object with a \"type\"");
    if (!strcmp(t, "NFC")) n->kind = NORM_NFC;
    else if (!strcmp(t, "NFD")) n->kind = NORM_NFD;
    else if (!strcmp(t, "NFKC")) n->kind = NORM_NFKC;
    else if (!strcmp(t, "NFKD")) n->kind = NORM_NFKD;
    else if (!strcmp(t, "Lowercase")) n->kind = NORM_LOWERCASE;
    else if (!strcmp(t, "Strip")) {
        n->kind = NORM_STRIP;
        n->strip_left = jbool(j, "strip_left", 1);
        n->strip_right = jbool(j, "strip_right", 1);
    } else if (!strcmp(t, "Prepend")) {
        n->kind = NORM_PREPEND;
        const json_t *p = json_object_get(j, "prepend");
        if (!json_is_string(p)) return LD_FAIL(ld, path, "Prepend: expected a string \"prepend\"");
        n->content = xstrdup(json_string_value(p));
    } else if (!strcmp(t, "Replace")) {
        n->kind = NORM_REPLACE;
        const json_t *pat = json_object_get(j, "pattern"), *c = json_object_get(j, "content");
        const json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
        if (!json_is_string(c) || !(json_is_string(s) || json_is_string(r)))
            return LD_FAIL(ld, path, "Replace: expected \"pattern\": {\"String\"|\"Regex\": ...} "
                           "and a string \"content\"");
        n->content = xstrdup(json_string_value(c));
        if (json_is_string(s)) n->pattern = xstrdup(json_string_value(s));
        else {
            char why[256];
            if (tok_regex_compile(&n->regex, json_string_value(r), json_string_length(r), 0, why,
                                  sizeof why))
                return LD_FAIL(ld, path, "Replace: bad regex: %s", why);
        }
    } else if (!strcmp(t, "Sequence")) {
        int rc;
        n->kind = NORM_SEQUENCE;
        n->children = load_sequence(ld, j, path, "normalizers", load_normalizer, sizeof *n->children,
                                    &n->n_children, &rc);
        if (rc) return -1;
    } else
        return LD_FAIL(ld, path, "unsupported normalizer type '%s' (supported: NFC, NFD, NFKC, "
                       "NFKD, Lowercase, Strip, Prepend, Replace, Sequence)", t);
    return 0;
}

/* ---- pre-tokenizers -------------------------------------------------------- */
static int load_pre(Ld *ld, const json_t *j, const char *path, void *out) {
    TokPre *p = out;
    memset(p, 0, sizeof *p);
    const char *t = json_is_object(j) ? jtype(j) : NULL;
    if (!t) return LD_FAIL(ld, path, "expected an object with a \"type\"");
    if (!strcmp(t, "Split")) {
        p->kind = PRE_SPLIT;
        const json_t *pat = json_object_get(j, "pattern");
        const json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
        if (!json_is_string(s) && !json_is_string(r))
            return LD_FAIL(ld, path, "Split: expected \"pattern\": {\"String\"|\"Regex\": ...}");
        const json_t *pj = json_is_string(r) ? r : s;
        char why[256];
        if (tok_regex_compile(&p->regex, json_string_value(pj), json_string_length(pj),
                              !json_is_string(r), why, sizeof why))
            return LD_FAIL(ld, path, "Split: bad regex: %s", why);
        const json_t *b = json_object_get(j, "behavior");
        const char *bs = json_is_string(b) ? json_string_value(b) : "";
        if (!strcmp(bs, "Removed")) p->behavior = SPLIT_REMOVED;
        else if (!strcmp(bs, "Isolated")) p->behavior = SPLIT_ISOLATED;
        else if (!strcmp(bs, "MergedWithPrevious")) p->behavior = SPLIT_MERGED_PREV;
        else if (!strcmp(bs, "MergedWithNext")) p->behavior = SPLIT_MERGED_NEXT;
        else if (!strcmp(bs, "Contiguous")) p->behavior = SPLIT_CONTIGUOUS;
        else return LD_FAIL(ld, path, "Split: unsupported behavior '%s' (supported: Removed, "
                            "Isolated, MergedWithPrevious, MergedWithNext, Contiguous)", bs);
        p->invert = jbool(j, "invert", 0);
    } else if (!strcmp(t, "ByteLevel")) {
        p->kind = PRE_BYTELEVEL;
        p->add_prefix_space = jbool(j, "add_prefix_space", 1);
        p->use_regex = jbool(j, "use_regex", 1);
    } else if (!strcmp(t, "Digits")) {
        p->kind = PRE_DIGITS;
        p->individual_digits = jbool(j, "individual_digits", 0);
    } else if (!strcmp(t, "Sequence")) {
        int rc;
        p->kind = PRE_SEQUENCE;
        p->children = load_sequence(ld, j, path, "pretokenizers", load_pre, sizeof *p->children,
                                    &p->n_children, &rc);
        if (rc) return -1;
    } else
        return LD_FAIL(ld, path, "unsupported pre-tokenizer type '%s' (supported: Split, "
                       "ByteLevel, Digits, Sequence)", t);
    return 0;
}

/* ---- post-processors ------------------------------------------------------- */
static int load_post(Ld *ld, const json_t *j, const char *path, void *out) {
    TokPost *p = out;
    memset(p, 0, sizeof *p);
    const char *t = json_is_object(j) ? jtype(j) : NULL;
    if (!t) return LD_FAIL(ld, path, "expected an object with a \"type\"");
    if (!strcmp(t, "ByteLevel")) p->kind = POST_BYTELEVEL;
    else if (!strcmp(t, "Sequence")) {
        int rc;
        p->kind = POST_SEQUENCE;
        p->children = load_sequence(ld, j, path, "processors", load_post, sizeof *p->children,
                                    &p->n_children, &rc);
        if (rc) return -1;
    } else if (!strcmp(t, "TemplateProcessing")) {
        p->kind = POST_TEMPLATE;
        const json_t *single = json_object_get(j, "single"), *sp = json_object_get(j, "special_tokens");
        if (!json_is_array(single))
            return LD_FAIL(ld, path, "TemplateProcessing: expected an array \"single\"");
        p->n_items = (int)json_array_size(single);
        p->items = xcalloc((size_t)p->n_items + 1, sizeof *p->items);
        for (int i = 0; i < p->n_items; i++) {
            const json_t *it = json_array_get(single, (size_t)i);
            const json_t *st = json_object_get(it, "SpecialToken"), *sq = json_object_get(it, "Sequence");
            if (sq) { p->items[i].n_ids = -1; continue; }
            const json_t *name = json_object_get(st, "id");
            const json_t *def = json_is_string(name) ? json_object_get(sp, json_string_value(name)) : NULL;
            const json_t *ids = json_object_get(def, "ids");
            if (!json_is_array(ids))
                return LD_FAIL(ld, path, "TemplateProcessing: single[%d]: expected a SpecialToken "
                               "listed in \"special_tokens\" with \"ids\", or a Sequence", i);
            p->items[i].n_ids = (int)json_array_size(ids);
            p->items[i].ids = xcalloc((size_t)p->items[i].n_ids + 1, sizeof(int32_t));
            for (int k = 0; k < p->items[i].n_ids; k++) {
                const json_t *v = json_array_get(ids, (size_t)k);
                json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
                if (id < 0 || id >= ld->tok->vocab.n_ids)
                    return LD_FAIL(ld, path, "TemplateProcessing: special token '%s': id out of "
                                   "range (expected 0..%d)", json_string_value(name),
                                   (int)ld->tok->vocab.n_ids - 1);
                p->items[i].ids[k] = (int32_t)id;
            }
        }
    } else
        return LD_FAIL(ld, path, "unsupported post-processor type '%s' (supported: ByteLevel, "
                       "TemplateProcessing, Sequence)", t);
    return 0;
}

/* ---- decoders -------------------------------------------------------------- */
static int load_dec(Ld *ld, const json_t *j, const char *path, void *out) {
    TokDec *d = out;
    memset(d, 0, sizeof *d);
    const char *t = json_is_object(j) ? jtype(j) : NULL;
    if (!t) return LD_FAIL(ld, path, "expected an object with a \"type\"");
    if (!strcmp(t, "ByteLevel")) d->kind = DEC_BYTELEVEL;
    else if (!strcmp(t, "ByteFallback")) d->kind = DEC_BYTEFALLBACK;
    else if (!strcmp(t, "Fuse")) d->kind = DEC_FUSE;
    else if (!strcmp(t, "Sequence")) {
        int rc;
        d->kind = DEC_SEQUENCE;
        d->children = load_sequence(ld, j, path, "decoders", load_dec, sizeof *d->children,
                                    &d->n_children, &rc);
        if (rc) return -1;
    } else
        return LD_FAIL(ld, path, "unsupported decoder type '%s' (supported: ByteLevel, "
                       "ByteFallback, Fuse, Sequence)", t);
    return 0;
}

/* ---- the model -------------------------------------------------------------- */
/* The largest id in model.vocab and added_tokens (each checked to be in
 * 0..2^24-1, added tokens also to carry a string content) into *max_id. */
static int model_max_id(Ld *ld, const json_t *vocab, const json_t *added, size_t n_added,
                        json_int_t *max_id) {
    *max_id = -1;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        if (id < 0 || id >= (1 << 24))
            return LD_FAIL(ld, "model.vocab", "token '%s': expected an id in 0..16777215", key);
        if (id > *max_id) *max_id = id;
    }
    for (size_t i = 0; i < n_added; i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 24) ||
            !json_is_string(c)) {
            char p[64];
            snprintf(p, sizeof p, "added_tokens[%zu]", i);
            return LD_FAIL(ld, p, "expected {\"id\": 0..16777215, \"content\": string, ...}");
        }
        if (json_integer_value(id) > *max_id) *max_id = json_integer_value(id);
    }
    return 0;
}

/* model.vocab (ids already checked by model_max_id) into tok->vocab, sized for
 * n_ids ids and the added tokens still to come. */
static int load_vocab(Ld *ld, const json_t *vocab, int32_t n_ids, size_t n_added) {
    Tokenizer *tok = ld->tok;
    vocab_init(&tok->vocab, n_ids, json_object_size(vocab) + n_added);
    tok->is_added = xcalloc((size_t)n_ids + 1, 1);
    tok->is_special = xcalloc((size_t)n_ids + 1, 1);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        int r = vocab_add(&tok->vocab, (int32_t)json_integer_value(val), key, strlen(key));
        if (r == -2)
            return LD_FAIL(ld, "model.vocab", "token '%s': id %d is used twice", key,
                           (int)json_integer_value(val));
    }
    return 0;
}

/* added_tokens (shapes already checked by model_max_id) into tok->added, the
 * vocabulary and the is_added / is_special flags. */
static int load_added_tokens(Ld *ld, const json_t *added, size_t n_added) {
    Tokenizer *tok = ld->tok;
    tok->n_added = (int)n_added;
    tok->added = xcalloc(n_added + 1, sizeof *tok->added);
    for (size_t i = 0; i < n_added; i++) {
        const json_t *a = json_array_get(added, i);
        TokAdded *ad = &tok->added[i];
        ad->id = (int32_t)json_integer_value(json_object_get(a, "id"));
        const json_t *c = json_object_get(a, "content");
        ad->len = (uint32_t)json_string_length(c);
        ad->content = xmalloc(ad->len + 1);
        memcpy(ad->content, json_string_value(c), ad->len + 1);
        ad->special = jbool(a, "special", 0);
        ad->lstrip = jbool(a, "lstrip", 0);
        ad->rstrip = jbool(a, "rstrip", 0);
        ad->single_word = jbool(a, "single_word", 0);
        ad->normalized = jbool(a, "normalized", !ad->special);
        int r = vocab_add(&tok->vocab, ad->id, ad->content, ad->len);
        size_t have_len = 0;
        const char *have = vocab_str(&tok->vocab, ad->id, &have_len);
        if (r == -2 && (have_len != ad->len || memcmp(have, ad->content, ad->len))) {
            char p[64];
            snprintf(p, sizeof p, "added_tokens[%zu]", i);
            return LD_FAIL(ld, p, "id %d is '%.*s' in model.vocab but '%s' here", (int)ad->id,
                           (int)have_len, have, ad->content);
        }
        /* a token that the vocabulary already holds keeps being a model token
         * for BPE; only ids outside it are added-only */
        if (r != -2) tok->is_added[ad->id] = 1;
        if (ad->special) tok->is_special[ad->id] = 1;
    }
    return 0;
}

/* The two sides of merge e: a "a b" string (old format) or an ["a", "b"] pair;
 * -1 when e is neither. */
static int merge_sides(const json_t *e, const char **a, size_t *la, const char **b, size_t *lb) {
    if (json_is_string(e)) {
        *a = json_string_value(e);
        const char *sp = strchr(*a + ((*a)[0] == ' ' ? 1 : 0), ' ');
        if (!sp) return -1;
        *la = (size_t)(sp - *a);
        *b = sp + 1;
        *lb = strlen(*b);
        return 0;
    }
    if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
        json_is_string(json_array_get(e, 1))) {
        *a = json_string_value(json_array_get(e, 0));
        *la = json_string_length(json_array_get(e, 0));
        *b = json_string_value(json_array_get(e, 1));
        *lb = json_string_length(json_array_get(e, 1));
        return 0;
    }
    return -1;
}

/* model.merges into tok->merges, ranked by position; both sides and their
 * concatenation must be in the vocabulary. */
static int load_merges(Ld *ld, const json_t *merges) {
    Tokenizer *tok = ld->tok;
    size_t n_merges = json_array_size(merges);
    merges_init(&tok->merges, n_merges);
    TokBuf cat = {0};
    int rc = 0;
    char p[64];
    for (size_t i = 0; i < n_merges; i++) {
        const char *a, *b;
        size_t la, lb;
        if (merge_sides(json_array_get(merges, i), &a, &la, &b, &lb)) {
            snprintf(p, sizeof p, "model.merges[%zu]", i);
            rc = LD_FAIL(ld, p, "expected \"left right\" or [\"left\", \"right\"]");
            break;
        }
        int32_t ia = vocab_find(&tok->vocab, a, la), ib = vocab_find(&tok->vocab, b, lb);
        cat.n = 0;
        tbuf_put(&cat, a, la);
        tbuf_put(&cat, b, lb);
        int32_t im = vocab_find(&tok->vocab, cat.p, cat.n);
        if (ia < 0 || ib < 0 || im < 0) {
            const char *what = ia < 0 ? a : ib < 0 ? b : cat.p;
            int wl = (int)(ia < 0 ? la : ib < 0 ? lb : cat.n);
            snprintf(p, sizeof p, "model.merges[%zu]", i);
            rc = LD_FAIL(ld, p, "token '%.*s' is not in model.vocab", wl, what);
            break;
        }
        merges_put(&tok->merges, ia, ib, (int32_t)i, im);
    }
    tbuf_free(&cat);
    return rc;
}

/* The BPE model's switches: byte_fallback, ignore_merges, unk_token (and the
 * <0xXX> byte tokens byte_fallback uses); dropout and subword affixes are refused. */
static int load_bpe_options(Ld *ld, const json_t *m) {
    Tokenizer *tok = ld->tok;
    tok->byte_fallback = jbool(m, "byte_fallback", 0);
    tok->ignore_merges = jbool(m, "ignore_merges", 0);
    const json_t *unk = json_object_get(m, "unk_token");
    tok->unk_id = json_is_string(unk) ? vocab_find(&tok->vocab, json_string_value(unk),
                                                   json_string_length(unk)) : -1;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        tok->byte_ids[b] = vocab_find(&tok->vocab, name, 6);
    }
    const json_t *dp = json_object_get(m, "dropout");
    if (json_is_number(dp) && json_number_value(dp) > 0)
        return LD_FAIL(ld, "model.dropout", "BPE dropout is not supported (expected null)");
    const json_t *cs = json_object_get(m, "continuing_subword_prefix");
    const json_t *ew = json_object_get(m, "end_of_word_suffix");
    if ((json_is_string(cs) && json_string_length(cs)) || (json_is_string(ew) && json_string_length(ew)))
        return LD_FAIL(ld, "model", "continuing_subword_prefix / end_of_word_suffix are not "
                       "supported (expected null or \"\")");
    return 0;
}

/* The BPE model and added_tokens: ids 0 .. the largest of either, then the
 * vocabulary, the added tokens, the merges and the model's switches. */
static int load_model(Ld *ld, const json_t *root) {
    const json_t *m = json_object_get(root, "model");
    if (!json_is_object(m)) return LD_FAIL(ld, "model", "expected an object");
    const char *t = jtype(m);
    if (t && strcmp(t, "BPE"))
        return LD_FAIL(ld, "model", "unsupported model type '%s' (supported: BPE)", t);
    const json_t *vocab = json_object_get(m, "vocab"), *merges = json_object_get(m, "merges");
    if (!json_is_object(vocab))
        return LD_FAIL(ld, "model.vocab", "expected an object mapping tokens to ids");
    if (!json_object_size(vocab)) return LD_FAIL(ld, "model.vocab", "is empty (expected tokens mapped to ids)");
    if (!json_is_array(merges)) return LD_FAIL(ld, "model.merges", "expected an array");
    const json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added) && !json_is_null(added))
        return LD_FAIL(ld, "added_tokens", "expected an array");
    size_t n_added = added ? json_array_size(added) : 0;
    json_int_t max_id;
    if (model_max_id(ld, vocab, added, n_added, &max_id) ||
        load_vocab(ld, vocab, (int32_t)(max_id + 1), n_added) ||
        load_added_tokens(ld, added, n_added) || load_merges(ld, merges))
        return -1;
    return load_bpe_options(ld, m);
}

/* ---- tokenizer_config.json / generation_config.json -------------------------- */
/* A special token in tokenizer_config.json: a string or {"content": ...}. */
static char *config_token(const json_t *cfg, const char *key) {
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

static int load_config(Tokenizer *tok, const json_t *cfg, const char *path, GrpoErr *err) {
    /* transformers' decode applies its clean-up when this is true; absent means
     * false, transformers' default since 4.45 (tokenizers.js would assume true) */
    const json_t *cu = json_object_get(cfg, "clean_up_tokenization_spaces");
    if (cu && !json_is_boolean(cu) && !json_is_null(cu))
        return err_set(err, "%s: clean_up_tokenization_spaces: expected true or false", path);
    tok->clean_up_spaces = json_is_true(cu);
    tok->bos_token = config_token(cfg, "bos_token");
    tok->eos_token = config_token(cfg, "eos_token");
    tok->pad_token = config_token(cfg, "pad_token");
    const char *names[3] = {tok->bos_token, tok->eos_token, tok->pad_token};
    int32_t *ids[3] = {&tok->special.bos, &tok->special.eos, &tok->special.pad};
    /* A name that is not a token leaves its id at -1; the string still
     * reaches chat templates. */
    for (int i = 0; i < 3; i++)
        if (names[i]) *ids[i] = vocab_find(&tok->vocab, names[i], strlen(names[i]));
    const json_t *ct = json_object_get(cfg, "chat_template");
    if (json_is_string(ct)) tok->chat_template = xstrdup(json_string_value(ct));
    else if (json_is_array(ct)) { /* [{"name": "default", "template": ...}, ...] */
        size_t i;
        const json_t *e;
        json_array_foreach(ct, i, e) {
            const json_t *nm = json_object_get(e, "name"), *tp = json_object_get(e, "template");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), "default") && json_is_string(tp))
                tok->chat_template = xstrdup(json_string_value(tp));
        }
    }
    const json_t *extra = json_object_get(cfg, "additional_special_tokens");
    if (json_is_array(extra)) {
        size_t i;
        const json_t *e;
        json_array_foreach(extra, i, e) {
            if (json_is_object(e)) e = json_object_get(e, "content");
            if (!json_is_string(e)) continue;
            int32_t id = vocab_find(&tok->vocab, json_string_value(e), json_string_length(e));
            if (id >= 0) tok->is_special[id] = 1;
        }
    }
    return 0;
}

/* Appends id to the eos ids unless present; fails past TOK_MAX_EOS (path names the file). */
static int add_eos(Tokenizer *tok, int32_t id, const char *path, GrpoErr *err) {
    for (int i = 0; i < tok->special.n_eos; i++)
        if (tok->special.eos_ids[i] == id) return 0;
    if (tok->special.n_eos == TOK_MAX_EOS)
        return err_set(err, "%s: eos_token_id: more than %d distinct eos ids", path, TOK_MAX_EOS);
    tok->special.eos_ids[tok->special.n_eos++] = id;
    return 0;
}

static int load_generation_config(Tokenizer *tok, const char *path, GrpoErr *err) {
    json_t *g;
    if (read_json(path, &g, 1, 1, err)) return -1;
    if (!g) return 0;
    const json_t *e = json_object_get(g, "eos_token_id");
    int rc = 0;
    if (json_is_number(e)) rc = add_eos(tok, (int32_t)json_number_value(e), path, err);
    else if (json_is_array(e)) {
        size_t i;
        const json_t *v;
        json_array_foreach(e, i, v) {
            if (json_is_number(v)) rc = add_eos(tok, (int32_t)json_number_value(v), path, err);
            if (rc) break;
        }
    }
    if (rc) {
        json_decref(g);
        return -1;
    }
    const json_t *b = json_object_get(g, "bos_token_id"), *p = json_object_get(g, "pad_token_id");
    if (tok->special.bos < 0 && json_is_number(b)) tok->special.bos = (int32_t)json_number_value(b);
    if (tok->special.pad < 0 && json_is_number(p)) tok->special.pad = (int32_t)json_number_value(p);
    json_decref(g);
    return 0;
}

/* ---- entry points ----------------------------------------------------------- */
int tok_load_files(Tokenizer **out, const char *tokenizer_json, const char *config_path,
                   GrpoErr *err) {
    *out = NULL;
    tok_bytelevel_init();
    Tokenizer *tok = xcalloc(1, sizeof *tok);
    tok->path = xstrdup(tokenizer_json);
    tok->special.bos = tok->special.eos = tok->special.pad = -1;
    Ld ld = {tok, err};
    json_t *root = NULL, *cfg = NULL;
    if (read_json(tokenizer_json, &root, 0, 0, err)) goto fail;
    if (load_model(&ld, root)) goto fail;
    const json_t *j;
    if ((j = json_object_get(root, "normalizer")) && !json_is_null(j)) {
        tok->normalizer = xcalloc(1, sizeof *tok->normalizer);
        if (load_normalizer(&ld, j, "normalizer", tok->normalizer)) goto fail;
    }
    if ((j = json_object_get(root, "pre_tokenizer")) && !json_is_null(j)) {
        tok->pre = xcalloc(1, sizeof *tok->pre);
        if (load_pre(&ld, j, "pre_tokenizer", tok->pre)) goto fail;
    }
    if ((j = json_object_get(root, "post_processor")) && !json_is_null(j)) {
        tok->post = xcalloc(1, sizeof *tok->post);
        if (load_post(&ld, j, "post_processor", tok->post)) goto fail;
    }
    if ((j = json_object_get(root, "decoder")) && !json_is_null(j)) {
        tok->decoder = xcalloc(1, sizeof *tok->decoder);
        if (load_dec(&ld, j, "decoder", tok->decoder)) goto fail;
    }
    json_decref(root);
    root = NULL;
    if (config_path) {
        tok->config_path = xstrdup(config_path);
        if (read_json(config_path, &cfg, 1, 1, err)) goto fail;
        if (cfg && load_config(tok, cfg, config_path, err)) goto fail;
    }
    if (tok->special.eos >= 0 && add_eos(tok, tok->special.eos, config_path, err)) goto fail;
    added_build_index(tok);
    cache_init(&tok->cache, 1 << 16);
    tok->region = onig_region_new();
    json_decref(cfg);
    *out = tok;
    return 0;
fail:
    json_decref(root);
    json_decref(cfg);
    tok_free(tok);
    return -1;
}

int tok_load(Tokenizer **out, const char *model_dir, GrpoErr *err) {
    char *tj = fs_join(model_dir, "tokenizer.json"), *cj = fs_join(model_dir, "tokenizer_config.json");
    char *gj = fs_join(model_dir, "generation_config.json");
    int rc = tok_load_files(out, tj, cj, err);
    if (!rc) {
        (*out)->model_dir = xstrdup(model_dir);
        if (load_generation_config(*out, gj, err)) {
            tok_free(*out);
            *out = NULL;
            rc = -1;
        }
    }
    free(tj);
    free(cj);
    free(gj);
    return rc;
}

void tok_free(Tokenizer *tok) {
    if (!tok) return;
    free(tok->path);
    free(tok->config_path);
    free(tok->model_dir);
    vocab_free(&tok->vocab);
    merges_free(&tok->merges);
    free(tok->is_special);
    free(tok->is_added);
    for (int i = 0; i < tok->n_added; i++) free(tok->added[i].content);
    free(tok->added);
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < 256; c++) free(tok->cand[k][c]);
    if (tok->normalizer) { norm_free(tok->normalizer); free(tok->normalizer); }
    if (tok->pre) { pre_free(tok->pre); free(tok->pre); }
    if (tok->post) { post_free(tok->post); free(tok->post); }
    if (tok->decoder) { dec_free(tok->decoder); free(tok->decoder); }
    free(tok->bos_token);
    free(tok->eos_token);
    free(tok->pad_token);
    free(tok->chat_template);
    cache_free(&tok->cache);
    if (tok->region) onig_region_free(tok->region, 1);
    if (tok->bytelevel_regex) onig_free(tok->bytelevel_regex);
    tbuf_free(&tok->norm_buf);
    tbuf_free(&tok->sanitize_buf);
    tbuf_free(&tok->word_buf);
    tbuf_free(&tok->prefix_buf);
    pieces_free(&tok->pieces[0]);
    pieces_free(&tok->pieces[1]);
    free(tok->spans);
    free(tok->syms);
    free(tok->heap);
    free(tok);
}
