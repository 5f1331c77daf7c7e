/* core/memory.h — how much memory this process may still take, for refusing a
 * plan at start (with the plan and the numbers) instead of aborting on an
 * allocation later. */
#ifndef GRPO_CORE_MEMORY_H
#define GRPO_CORE_MEMORY_H

#include <stddef.h>

/* The smaller of the system's MemAvailable (/proc/meminfo) and what the cgroup
 * limit leaves (memory.max - memory.current, cgroup v2), in bytes; SIZE_MAX when
 * neither can be read. GRPO_MEMORY_LIMIT_MB, when set, caps it (for tests and
 * for sharing a machine). */
size_t mem_available_bytes(void);

#endif
