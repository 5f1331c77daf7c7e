/* core/version.h — which grpo.c this is: the VERSION file's number, and where the
 * build was made from a git checkout, its `git describe` (the Makefile passes both
 * in as GRPO_VERSION). */
#ifndef GRPO_CORE_VERSION_H
#define GRPO_CORE_VERSION_H

/* "0.1.0", or "0.1.0 (git v0.1.0-3-g0eb5e88-dirty)" when built from a checkout;
 * "unknown" from a build that did not pass it in. */
const char *grpo_version(void);

#endif
