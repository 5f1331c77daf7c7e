/* tests/io/test_digest.c — io/digest: equal files give equal fingerprints, a
 * changed byte a different one (read whole up to DIGEST_WHOLE_BYTES; above it in
 * a .safetensors header, a sampled block, the last bytes, the size); a
 * directory's fingerprint follows its files and their names; what cannot be
 * read is an error naming the path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/digest.h"
#include "io/fsutil.h"
#include "testutil.h"

static char g_dir[64];

static void write_bytes(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    T_CHECK(f && fwrite(p, 1, n, f) == n, "%s", path);
    if (f) fclose(f);
}

static Digest of(const char *path) {
    Digest d;
    digest_init(&d);
    GrpoErr err;
    T_CHECK(digest_path(&d, path, &err) == 0, "%s", err.msg);
    return d;
}

static int same(Digest a, Digest b) { return a.h[0] == b.h[0] && a.h[1] == b.h[1]; }

static void test_bytes(void) {
    Digest a, b, c;
    digest_init(&a), digest_init(&b), digest_init(&c);
    digest_add_str(&a, NULL), digest_add_str(&b, ""), digest_add_str(&c, "");
    T_CHECK(!same(a, b) && same(b, c), "NULL and \"\" must differ, \"\" twice must not");
    digest_init(&a), digest_init(&b);
    digest_add(&a, "abcdefghi", 9), digest_add(&b, "abcdefghj", 9);
    T_CHECK(!same(a, b), "one byte");
    digest_init(&a), digest_init(&b);
    digest_add_u64(&a, 1), digest_add_u64(&b, 2);
    T_CHECK(!same(a, b), "u64");
}

/* A file of n bytes (a pattern), with byte at flipped (when < n) changed. */
static Digest file_with(const char *name, size_t n, size_t at, const unsigned char *header, size_t header_n) {
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + (i >> 12));
    if (header) memcpy(p, header, header_n);
    if (at < n) p[at] ^= 1;
    char *path = fs_join(g_dir, name);
    write_bytes(path, p, n);
    Digest d = of(path);
    free(path), free(p);
    return d;
}

static void test_files(void) {
    size_t small = 100000, big = (size_t)DIGEST_WHOLE_BYTES + 5 * 65536 + 7;
    Digest s0 = file_with("s", small, small, NULL, 0), s1 = file_with("s", small, small, NULL, 0);
    T_CHECK(same(s0, s1), "the same small file");
    T_CHECK(!same(s0, file_with("s", small, 54321, NULL, 0)), "a small file: any byte counts");
    T_CHECK(!same(s0, file_with("s", small - 1, small, NULL, 0)), "a shorter file");
    Digest b0 = file_with("b.bin", big, big, NULL, 0);
    T_CHECK(same(b0, file_with("b.bin", big, big, NULL, 0)), "the same big file");
    T_CHECK(!same(b0, file_with("b.bin", big, 1000, NULL, 0)), "a big file: its first MiB");
    T_CHECK(!same(b0, file_with("b.bin", big, big / 64 * 10 + 5, NULL, 0)), "a big file: a sampled block");
    T_CHECK(!same(b0, file_with("b.bin", big, big - 3, NULL, 0)), "a big file: its last bytes");
    T_CHECK(!same(b0, file_with("b.bin", big + 1, big + 1, NULL, 0)), "a big file: its size");
    /* a .safetensors header of 3 MiB: read whole, past the first MiB */
    unsigned char head[8];
    uint64_t hn = 3u << 20;
    memcpy(head, &hn, 8);
    Digest t0 = file_with("w.safetensors", big, big, head, 8);
    T_CHECK(!same(t0, file_with("w.safetensors", big, (2u << 20) + 12345, head, 8)), "a safetensors header");
}

static void test_dirs(void) {
    char sub[128];
    snprintf(sub, sizeof sub, "%s/m", g_dir);
    GrpoErr err;
    T_CHECK(fs_mkdir_p(sub, &err) == 0, "%s", err.msg);
    char *a = fs_join(sub, "config.json"), *b = fs_join(sub, "tokenizer.json"), *hidden = fs_join(sub, ".lock");
    write_bytes(a, (const unsigned char *)"{\"h\": 1}", 8);
    write_bytes(b, (const unsigned char *)"{}", 2);
    Digest d0 = of(sub);
    write_bytes(hidden, (const unsigned char *)"x", 1);
    T_CHECK(same(d0, of(sub)), "a hidden file is not part of a directory");
    write_bytes(a, (const unsigned char *)"{\"h\": 2}", 8);
    T_CHECK(!same(d0, of(sub)), "a file's contents");
    write_bytes(a, (const unsigned char *)"{\"h\": 1}", 8);
    T_CHECK(same(d0, of(sub)), "back as it was");
    char *c = fs_join(sub, "tokenizer2.json");
    rename(b, c);
    T_CHECK(!same(d0, of(sub)), "a file's name");
    rename(c, b);
    char *e = fs_join(sub, "extra.txt");
    write_bytes(e, (const unsigned char *)"", 0);
    T_CHECK(!same(d0, of(sub)), "one more (empty) file");
    Digest d;
    digest_init(&d);
    char *missing = fs_join(g_dir, "nope");
    T_CHECK(digest_path(&d, missing, &err) == -1 && strstr(err.msg, "nope: cannot open"), "%s", err.msg);
    free(a), free(b), free(c), free(e), free(hidden), free(missing);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/test_digest_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    test_bytes();
    test_files();
    test_dirs();
    fs_rm_rf(g_dir);
    return t_summary("digest");
}
