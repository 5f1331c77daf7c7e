/* cli/crash.h — what a crash leaves on stderr.
 *
 * A fault in grpo itself (SIGSEGV, SIGBUS, SIGILL, SIGFPE, or abort()) would end
 * the process with nothing said. crash_report_install makes it first write one
 * line naming the signal and the version, then the call stack as addresses in
 * the binary (`addr2line -f -e grpo 0x...` names them), and then die of the
 * same signal, so the exit status is the one the signal gives (139 for SIGSEGV).
 * A fault on an overflowed stack is reported too (the handler has a stack of its
 * own). Under mpirun each rank reports its own. Not under AddressSanitizer,
 * whose own report says more. */
#ifndef GRPO_CLI_CRASH_H
#define GRPO_CLI_CRASH_H

void crash_report_install(void);

#endif
