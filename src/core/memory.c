/* core/memory.c — the memory this process may still take (memory.h). */
#include "core/memory.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first number in file, or -1. */
static long long read_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    while (fgets(line, sizeof line, f)) {
        if (key && strncmp(line, key, strlen(key))) continue;
        char *end;
        long long x = strtoll(line + (key ? strlen(key) : 0), &end, 10);
        if (end != line + (key ? strlen(key) : 0)) v = x;
        break;
    }
    fclose(f);
    return v;
}

size_t mem_available_bytes(void) {
    size_t avail = SIZE_MAX;
    long long kb = read_number("/proc/meminfo", "MemAvailable:");
    if (kb > 0) avail = (size_t)kb * 1024;
    long long max = read_number("/sys/fs/cgroup/memory.max", NULL), cur = read_number("/sys/fs/cgroup/memory.current", NULL);
    if (max > 0 && cur >= 0 && max > cur && (size_t)(max - cur) < avail) avail = (size_t)(max - cur);
    const char *cap = getenv("GRPO_MEMORY_LIMIT_MB");
    if (cap && atoll(cap) > 0 && (size_t)atoll(cap) << 20 < avail) avail = (size_t)atoll(cap) << 20;
    return avail;
}
