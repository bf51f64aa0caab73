#include "runtime/crash_report.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "runtime/text.h"

_Thread_local ro_crash_ctx_t ro__crash_ctx;

/* Async-signal-safe formatting: no stdio in a signal handler. */
static size_t put_str(char *buf, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap)
        buf[at++] = *s++;
    return at;
}

static size_t put_u64(char *buf, size_t at, size_t cap, uint64_t v)
{
    char digits[RO_TEXT_U64_MAX + 1];
    *ro__text_u64(digits, v) = '\0';
    return put_str(buf, at, cap, digits);
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGILL:
        return "SIGILL";
    default:
        return "a fatal signal";
    }
}

static void on_fatal(int sig)
{
    char buf[512];
    size_t at = 0;
    const ro_crash_ctx_t *c = &ro__crash_ctx;
    at = put_str(buf, at, sizeof buf, "rollout: fatal: ");
    at = put_str(buf, at, sizeof buf, sig_name(sig));
    if (c->env_name) {
        at = put_str(buf, at, sizeof buf, " in env '");
        at = put_str(buf, at, sizeof buf, c->env_name);
        at = put_str(buf, at, sizeof buf, "' during ");
        at = put_str(buf, at, sizeof buf, c->what ? c->what : "?");
        at = put_str(buf, at, sizeof buf, " of env ");
        at = put_u64(buf, at, sizeof buf, c->env);
        at = put_str(buf, at, sizeof buf, ", episode ");
        at = put_u64(buf, at, sizeof buf, c->episode);
        at = put_str(buf, at, sizeof buf, ", step ");
        at = put_u64(buf, at, sizeof buf, c->step);
        at = put_str(buf, at, sizeof buf, "; the process stops (env memory may be corrupt)");
    } else {
        at = put_str(buf, at, sizeof buf, " outside env code");
    }
    at = put_str(buf, at, sizeof buf, "\n");
    ssize_t ignored = write(STDERR_FILENO, buf, at);
    (void)ignored;
    /* The default action: core dump and the signal's exit status. */
    signal(sig, SIG_DFL);
    raise(sig);
}

void ro__crash_report_install(void)
{
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND; /* a second fault takes the default at once */
        sigaction(sigs[i], &sa, NULL);
    }
}
