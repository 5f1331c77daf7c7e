/* core/version.c — the version text the Makefile compiles in (version.h). Not
 * here: reading VERSION or asking git, which the Makefile does once per build. */
#include "core/version.h"

#ifndef GRPO_VERSION
#define GRPO_VERSION "unknown"
#endif

const char *grpo_version(void) {
    return GRPO_VERSION;
}
