/* tokenizer/decode.c — ids -> text through tokenizer.json's decoder
 * (ByteLevel, ByteFallback, Fuse, Sequence), and the small accessors.
 *
 * Added tokens are written verbatim between decoded runs of model tokens (as
 * HF's decode does), so a special token never goes through the byte map.
 * The bytes are read as UTF-8 with U+FFFD for invalid sequences, like HF's
 * lossy conversion. tokenizer_config.json's clean_up_tokenization_spaces is
 * applied as transformers' decode applies it (so rewards see the text TRL's
 * would: " ," becomes "," for Llama 3); tok_set_clean_up_spaces turns it off
 * where decode(encode(x)) == x matters. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* Decoding's buffers (tokenizer.h's TokDecodeWork): the run of model tokens, the
 * decoder chain's second list, ByteLevel's / ByteFallback's bytes and their UTF-8,
 * the text, and tok_decode_generated's known ids. Each is emptied where it is used
 * and keeps its capacity. */
struct TokDecodeWork {
    TokPieces run, list;
    TokBuf bytes, utf8, text;
    int32_t *known;
    size_t known_cap;
};

TokDecodeWork *tok_decode_work_new(void) { return xcalloc(1, sizeof(TokDecodeWork)); }

void tok_decode_work_free(TokDecodeWork *w) {
    if (!w) return;
    pieces_free(&w->run), pieces_free(&w->list);
    tbuf_free(&w->bytes), tbuf_free(&w->utf8), tbuf_free(&w->text);
    free(w->known);
    free(w);
}

/* The decoder chain works on a list of strings, like HF's decode_chain; raw and txt
 * are its scratch bytes (w's). */
static void dec_apply(const TokDec *d, TokPieces *in, TokPieces *out, TokBuf *raw, TokBuf *txt) {
    switch (d->kind) {
    case DEC_SEQUENCE:
        for (int i = 0; i < d->n_children; i++) {
            dec_apply(&d->children[i], in, out, raw, txt);
            TokPieces t = *in; *in = *out; *out = t;
        }
        { TokPieces t = *in; *in = *out; *out = t; }
        return;
    case DEC_BYTELEVEL: {
        /* every token's chars back to bytes; a token with a char outside the
         * alphabet keeps its own bytes */
        raw->n = 0;
        for (size_t i = 0; i < in->n; i++) {
            const char *s = in->buf.p + in->off[i];
            size_t len = in->off[i + 1] - in->off[i], j = 0, mark = raw->n;
            int ok = 1;
            while (j < len) {
                uint32_t cp;
                int k = tok_utf8_next((const unsigned char *)s + j, len - j, &cp);
                if (k <= 0 || cp >= 512 || tok_cp_to_byte[cp] < 0) { ok = 0; break; }
                tbuf_putc(raw, (char)tok_cp_to_byte[cp]);
                j += (size_t)k;
            }
            if (!ok) { raw->n = mark; tbuf_put(raw, s, len); }
        }
        tok_utf8_sanitize(raw->p ? raw->p : "", raw->n, txt);
        pieces_reset(out);
        pieces_push(out, txt->p, txt->n);
        return;
    }
    case DEC_BYTEFALLBACK: {
        /* runs of <0xXX> tokens become their bytes, read as UTF-8 */
        pieces_reset(out);
        raw->n = 0;
        for (size_t i = 0; i <= in->n; i++) {
            const char *s = i < in->n ? in->buf.p + in->off[i] : "";
            size_t len = i < in->n ? in->off[i + 1] - in->off[i] : 0;
            unsigned v;
            if (len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && sscanf(s + 3, "%2x", &v) == 1) {
                tbuf_putc(raw, (char)v);
                continue;
            }
            if (raw->n) {
                tok_utf8_sanitize(raw->p, raw->n, txt);
                pieces_push(out, txt->p, txt->n);
                raw->n = 0;
            }
            if (i < in->n) pieces_push(out, s, len);
        }
        return;
    }
    case DEC_FUSE:
        pieces_reset(out);
        pieces_push(out, in->buf.p, in->buf.n);
        return;
    }
}

/* w's run of model tokens decoded onto w's text, the run emptied. */
static void flush_run(const Tokenizer *tok, TokDecodeWork *w) {
    TokPieces *run = &w->run;
    TokBuf *text = &w->text;
    if (!run->n) return;
    if (!tok->decoder) {
        for (size_t i = 0; i < run->n; i++) {
            if (text->n) tbuf_putc(text, ' ');
            tbuf_put(text, run->buf.p + run->off[i], run->off[i + 1] - run->off[i]);
        }
    } else {
        pieces_reset(&w->list);
        dec_apply(tok->decoder, run, &w->list, &w->bytes, &w->utf8);
        tbuf_put(text, w->list.buf.p, w->list.buf.n);
    }
    pieces_reset(run);
}

/* tok_decode on w's buffers: the text is left in w->text (NUL-terminated). */
static int decode_in(const Tokenizer *tok, TokDecodeWork *w, const int32_t *ids, size_t n, int skip_special,
                     GrpoErr *err) {
    TokBuf *out = &w->text;
    out->n = 0;
    pieces_reset(&w->run);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        size_t tl;
        const char *t = vocab_str(&tok->vocab, id, &tl);
        if (!t)
            return err_set(err, "%s: decode: id %d at position %zu is not in the vocabulary "
                           "(expected 0..%d)", tok->path, (int)id, i, (int)tok->vocab.n_ids - 1);
        if (tok->is_added[id]) {
            if (skip_special && tok->is_special[id]) continue;
            flush_run(tok, w);
            if (!tok->decoder && out->n) tbuf_putc(out, ' ');
            tbuf_put(out, t, tl);
            continue;
        }
        if (skip_special && tok->is_special[id]) continue;
        pieces_push(&w->run, t, tl);
    }
    flush_run(tok, w);
    tbuf_reserve(out, 1);
    out->p[out->n] = 0;
    if (tok->clean_up_spaces) out->n = tok_clean_up_spaces(out->p, out->n);
    return 0;
}

/* w's text handed over as a string of its own (the one allocation of a decode on a kept w). */
static void text_out(TokDecodeWork *w, char **text, size_t *len) {
    *text = xmalloc(w->text.n + 1);
    memcpy(*text, w->text.p, w->text.n + 1);
    if (len) *len = w->text.n;
}

int tok_decode(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, char **text,
               size_t *len, GrpoErr *err) {
    *text = NULL;
    if (len) *len = 0;
    TokDecodeWork *w = tok_decode_work_new();
    int rc = decode_in(tok, w, ids, n, skip_special, err);
    if (!rc) text_out(w, text, len);
    tok_decode_work_free(w);
    return rc;
}

/* transformers' clean_up_tokenization: each replacement in turn over the whole
 * text, left to right without overlaps, as Python's str.replace chain. */
size_t tok_clean_up_spaces(char *s, size_t n) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
    for (int r = 0; r < 10; r++) {
        size_t fl = strlen(from[r]), tl = strlen(to[r]), o = 0;
        for (size_t i = 0; i < n;) {
            if (i + fl <= n && !memcmp(s + i, from[r], fl)) {
                memmove(s + o, to[r], tl);
                o += tl, i += fl;
            } else {
                s[o++] = s[i++];
            }
        }
        n = o;
    }
    s[n] = 0;
    return n;
}

void tok_set_clean_up_spaces(Tokenizer *tok, int on) { tok->clean_up_spaces = !!on; }

int32_t tok_token_to_id(const Tokenizer *tok, const char *token, size_t len) {
    return vocab_find(&tok->vocab, token, len);
}

const char *tok_id_to_token(const Tokenizer *tok, int32_t id, size_t *len) {
    size_t l;
    const char *s = vocab_str(&tok->vocab, id, &l);
    if (s && len) *len = l;
    return s;
}

int32_t tok_vocab_size(const Tokenizer *tok) { return tok->vocab.n_ids; }

int tok_is_special(const Tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->vocab.n_ids && tok->is_special[id];
}

const TokSpecial *tok_special(const Tokenizer *tok) { return &tok->special; }
const char *tok_bos_token(const Tokenizer *tok) { return tok->bos_token; }
const char *tok_eos_token(const Tokenizer *tok) { return tok->eos_token; }

void dec_free(TokDec *d) {
    if (!d) return;
    for (int i = 0; i < d->n_children; i++) dec_free(&d->children[i]);
    free(d->children);
}

void post_free(TokPost *p) {
    if (!p) return;
    for (int i = 0; i < p->n_children; i++) post_free(&p->children[i]);
    free(p->children);
    for (int i = 0; i < p->n_items; i++) free(p->items[i].ids);
    free(p->items);
}

int tok_decode_generated_in(const Tokenizer *tok, TokDecodeWork *work, const int32_t *ids, size_t n,
                            int skip_special, char **text, size_t *len, GrpoErr *err) {
    *text = NULL;
    if (len) *len = 0;
    TokDecodeWork *w = work ? work : tok_decode_work_new();
    if (w->known_cap < n) {
        free(w->known);
        w->known = xmalloc(sizeof(int32_t) * n);
        w->known_cap = n;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tl;
        if (vocab_str(&tok->vocab, ids[i], &tl)) w->known[k++] = ids[i];
    }
    int rc = decode_in(tok, w, w->known, k, skip_special, err);
    if (!rc) text_out(w, text, len);
    if (!work) tok_decode_work_free(w);
    return rc;
}

int tok_decode_generated(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, char **text,
                         size_t *len, GrpoErr *err) {
    return tok_decode_generated_in(tok, NULL, ids, n, skip_special, text, len, err);
}
