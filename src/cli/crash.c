/* cli/crash.c — a crash's report on stderr (crash.h). The handler uses only
 * async-signal-safe calls (write, signal, raise) and backtrace_symbols_fd, whose
 * first use loads libgcc's unwinder: crash_report_install calls backtrace once so
 * that the loading happens here, not in the handler. */
#include "cli/crash.h"

#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/version.h"

static char g_line[256]; /* written in full by the handler: made before any fault */

static const struct {
    int sig;
    const char *name;
} fatal[] = {{SIGSEGV, "SIGSEGV (invalid memory access)"}, {SIGBUS, "SIGBUS (bad memory access)"},
             {SIGILL, "SIGILL (illegal instruction)"},     {SIGFPE, "SIGFPE (arithmetic fault)"},
             {SIGABRT, "SIGABRT (abort)"}};

static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

static void on_fatal(int sig) {
    const char *name = "a fatal signal";
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
        if (fatal[i].sig == sig) name = fatal[i].name;
    put(g_line);
    put(name);
    put("; a bug: please report it with the command line and these lines\n");
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig); /* die of it: the status the signal gives */
}

void crash_report_install(void) {
#ifdef __SANITIZE_ADDRESS__
    return; /* AddressSanitizer's own report says more */
#endif
    size_t n = 0;
    const char *parts[] = {"grpo ", grpo_version(), ": internal error: "};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        for (const char *s = parts[k]; *s && n + 1 < sizeof g_line; s++) g_line[n++] = *s;
    g_line[n] = 0;
    void *warm[1];
    backtrace(warm, 1);
    static char alt[1 << 16]; /* a stack for the handler, should the fault be an overflow */
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) sigaction(fatal[i].sig, &sa, NULL);
}
