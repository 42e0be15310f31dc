/* options.c - the MIMALLOC_PROF_* environment options (rows in options.def).
 *
 * Read once, by the library constructor, before any thread of ours exists; afterwards the values are
 * only read.  A malformed or out-of-range value never aborts: one warning line names the variable, the
 * value given and the value used instead (the default, or the clipped value for MPROF_CLIP rows).
 *
 * Secure mode.  In a process the kernel marks AT_SECURE (set-user-ID, set-group-ID, or capabilities
 * gained at exec) the environment belongs to whoever started it, not to the program, so none of these
 * variables is read: every option keeps its default, nothing starts at load, no file, socket, thread or
 * signal handler comes from them, and only the program's own calls (mi_prof_start, mi_prof_dump with a
 * path) profile.  If any MIMALLOC_PROF_* variable is set, one fixed warning line says they were ignored:
 * it names no variable and echoes no value, so it tells the caller only what a failed profile would
 * tell them anyway, and glibc has opened descriptors 0-2 on /dev/null if the caller closed them
 * (doc/design/files-and-privileges.md).
 */
#include "options.h"
#include "warn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

typedef enum {
  OPT_BOOL, OPT_UINT, OPT_BYTES, OPT_UNWINDER, OPT_STRING, OPT_SIGNAL, OPT_SIGNALS, OPT_CONTROL
} opt_kind_t;
typedef enum { MPROF_REJECT, MPROF_CLIP } opt_range_t;

typedef struct opt_desc_s {
  const char *name;      /* environment variable */
  opt_kind_t  kind;
  uint64_t    dflt;
  uint64_t    min;
  uint64_t    max;
  opt_range_t range;     /* what an out-of-range value gets: the default, or the nearest bound */
} opt_desc_t;

static const opt_desc_t opt_desc[MPROF_OPT_COUNT] = {
#define OPT(id, name, kind, dflt, min, max, range) [MPROF_OPT_##id] = {name, kind, dflt, min, max, range},
#include "options.def"
#undef OPT
};

static uint64_t opt_value[MPROF_OPT_COUNT] = {
#define OPT(id, name, kind, dflt, min, max, range) [MPROF_OPT_##id] = dflt,
#include "options.def"
#undef OPT
};

/* Parses a boolean: 0/1, yes/no, true/false, on/off. */
static bool parse_bool(const char *s, uint64_t *out)
{
  static const char *const yes[] = {"1", "yes", "true", "on"}, *const no[] = {"0", "no", "false", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = 1, true;
    if (strcasecmp(s, no[i]) == 0) return *out = 0, true;
  }
  return false;
}

/* Parses a decimal count; with bytes, an optional binary suffix k, m, g or t (KiB .. TiB), and an
 * optional trailing 'b' or "ib" (so 512k, 512K, 512KiB and 512kb all mean 524288). */
static bool parse_uint(const char *s, bool bytes, uint64_t *out)
{
  if (*s < '0' || *s > '9') return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno == ERANGE) return false;     /* more than 64 bits: not a value any option takes */
  if (bytes && *end != '\0') {
    unsigned shift = 0;
    switch (*end | 0x20) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    case 'b': shift = 0; end--; break;   /* a bare "b" */
    default: return false;
    }
    end++;
    if (shift != 0 && (*end | 0x20) == 'i') end++;
    if (*end != '\0' && (*end | 0x20) == 'b') end++;
    if (v > (UINT64_MAX >> shift)) return false;
    v <<= shift;
  }
  if (*end != '\0') return false;
  *out = v;
  return true;
}

/* Parses an unwinder name; the values are mprof_unwinder_t's. */
static bool parse_unwinder(const char *s, uint64_t *out)
{
  static const char *const names[] = {
    [MPROF_UNWIND_FP] = "fp", [MPROF_UNWIND_LIBUNWIND] = "libunwind", [MPROF_UNWIND_LIBGCC] = "libgcc",
    [MPROF_UNWIND_TABLE] = "table", [MPROF_UNWIND_AUTO] = "auto"};
  for (uint64_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcasecmp(s, names[i]) == 0) return *out = i, true;
  }
  return false;
}

/* Parses a signal: a name with or without "SIG" (USR2, SIGUSR2; RTMIN+3 is not supported) or a number
 * 1..64.  Never the signals a fault raises (a handler that returns would re-run the faulting instruction
 * forever), nor those that cannot be caught.  With `terminating`, only signals whose default action ends
 * the process (MIMALLOC_PROF_FINAL_SIGNALS): not CHLD, CONT, the stop signals, URG, WINCH, nor SYS (seccomp
 * raises it for a system call, as a fault). */
static bool parse_signal_as(const char *s, bool terminating, uint64_t *out)
{
  static const struct { const char *name; int sig; } names[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},
    {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}, {"URG", SIGURG}, {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR}, {"SYS", SIGSYS}};
  static const int refused[] = {SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT};
  static const int not_terminating[] = {SIGCHLD, SIGCONT, SIGTSTP, SIGTTIN,
                                        SIGTTOU, SIGURG, SIGWINCH, SIGSYS};
  uint64_t v = 0;
  if (strncasecmp(s, "SIG", 3) == 0) s += 3;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && v == 0; i++)
    if (strcasecmp(s, names[i].name) == 0) v = (uint64_t)names[i].sig;
  if (v == 0 && (!parse_uint(s, false, &v) || v < 1 || v > 64)) return false;
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (v == (uint64_t)refused[i]) return false;
  for (size_t i = 0; terminating && i < sizeof not_terminating / sizeof not_terminating[0]; i++)
    if (v == (uint64_t)not_terminating[i]) return false;
  return *out = v, true;
}

static bool parse_signal(const char *s, uint64_t *out) { return parse_signal_as(s, false, out); }

/* Parses a comma-separated list of terminating signals (TERM,INT,HUP), or "none", into a mask with bit
 * sig - 1 for each. */
static bool parse_signals(const char *s, uint64_t *out)
{
  if (strcasecmp(s, "none") == 0) return *out = 0, true;
  uint64_t mask = 0;
  for (;;) {
    const char *comma = strchr(s, ',');
    size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);
    char one[16];
    uint64_t sig;
    if (n == 0 || n >= sizeof one) return false;
    memcpy(one, s, n);
    one[n] = '\0';
    if (!parse_signal_as(one, true, &sig)) return false;
    mask |= (uint64_t)1 << (sig - 1);
    if (comma == NULL) break;
    s = comma + 1;
  }
  return *out = mask, true;
}

/* MIMALLOC_PROF_CONTROL: a boolean (1: the default directory), or the absolute path of a directory, kept as
 * a pointer to the text (a pointer is never 0 or 1). */
static bool parse_control(const char *s, uint64_t *out)
{
  if (parse_bool(s, out)) return true;
  if (s[0] != '/') return false;
  *out = (uint64_t)(uintptr_t)s;
  return true;
}

static const char *kind_word(opt_kind_t kind)
{
  switch (kind) {
  case OPT_STRING: return "empty";
  case OPT_SIGNAL: return "not a signal that can be caught (a name such as USR2, or a number)";
  case OPT_SIGNALS: return "not a list of terminating signals (names such as TERM,INT,HUP, numbers, or none)";
  case OPT_BOOL: return "not a boolean (0/1, yes/no, true/false, on/off)";
  case OPT_BYTES: return "not a byte count";
  case OPT_UNWINDER: return "not an unwinder (table, fp, libunwind, libgcc or auto)";
  case OPT_CONTROL: return "neither a boolean nor an absolute directory path";
  default: return "not a number";
  }
}

static bool parse_value(const opt_desc_t *d, const char *s, uint64_t *v)
{
  switch (d->kind) {
  case OPT_BOOL: return parse_bool(s, v);
  case OPT_UNWINDER: return parse_unwinder(s, v);
  case OPT_SIGNAL: return parse_signal(s, v);
  case OPT_SIGNALS: return parse_signals(s, v);
  case OPT_CONTROL: return parse_control(s, v);
  case OPT_STRING: return *v = (uint64_t)(uintptr_t)s, s[0] != '\0';
  default: return parse_uint(s, d->kind == OPT_BYTES, v);
  }
}

/* The default as a warning shows it: a number, or the name it stands for. */
static const char *default_text(const opt_desc_t *d, char *buf, size_t len)
{
  switch (d->kind) {
  case OPT_STRING: return d == &opt_desc[MPROF_OPT_PREFIX] ? "mimalloc-prof" : "\"\"";
  case OPT_UNWINDER: return "auto";
  case OPT_SIGNAL:
  case OPT_SIGNALS: return "none";
  case OPT_CONTROL: return "0";
  default: snprintf(buf, len, "%llu", (unsigned long long)d->dflt); return buf;
  }
}

static bool in_range(const opt_desc_t *d, uint64_t v)
{
  return d->kind == OPT_STRING || d->kind == OPT_CONTROL || (v >= d->min && v <= d->max);
}

static void read_option(mprof_option_t id)
{
  const opt_desc_t *d = &opt_desc[id];
  const char *s = getenv(d->name);
  if (s == NULL) return;
  uint64_t v;
  char buf[32];
  if (!parse_value(d, s, &v)) {
    mprof_warn("%s=\"%s\" is %s; using %s", d->name, s, kind_word(d->kind), default_text(d, buf, sizeof buf));
    return;
  }
  if (!in_range(d, v)) {
    uint64_t used = d->range == MPROF_CLIP ? (v < d->min ? d->min : d->max) : d->dflt;
    mprof_warn("%s=\"%s\" is outside %llu..%llu; using %llu", d->name, s, (unsigned long long)d->min,
               (unsigned long long)d->max, (unsigned long long)used);
    v = used;
  }
  opt_value[id] = v;
}

static bool secure;
static bool given;                        /* a MIMALLOC_PROF variable is set, and read */

/* Whether the environment has a variable named MIMALLOC_PROF or MIMALLOC_PROF_*: names only, no value
 * is looked at. */
MPROF_LOAD_TEXT static bool any_set(void)
{
  extern char **environ;
  /* Not const: in .data, so a process that sets no option reads no page of .rodata (doc/design.md,
   * "Pages a stopped process maps"). */
  static char head[] = "MIMALLOC_PROF";
  const size_t n = sizeof head - 1;
  for (char **e = environ; e != NULL && *e != NULL; e++)
    if (strncmp(*e, head, n) == 0 && ((*e)[n] == '=' || (*e)[n] == '_')) return true;
  return false;
}

MPROF_COLD MPROF_LOAD_TEXT void mprof_options_init(void)
{
  secure = getauxval(AT_SECURE) != 0;
  if (secure) {
    if (any_set())
      mprof_warn("secure mode (a set-user-ID, set-group-ID or capability-gaining program): the MIMALLOC_PROF "
                 "variables are ignored");
    return;
  }
  if (!any_set()) return;                 /* every option keeps its default: no name is looked up */
  given = true;
  for (int id = 0; id < MPROF_OPT_COUNT; id++) read_option((mprof_option_t)id);
}

bool mprof_options_secure(void) { return secure; }

MPROF_LOAD_TEXT bool mprof_options_given(void) { return given; }

MPROF_LOAD_TEXT uint64_t mprof_option(mprof_option_t id) { return opt_value[id]; }

/* A string option: the environment's value (environment strings live as long as the process), or its
 * default. */
const char *mprof_option_str(mprof_option_t id)
{
  if (opt_value[id] != 0) return (const char *)(uintptr_t)opt_value[id];
  return id == MPROF_OPT_PREFIX ? "mimalloc-prof" : "";
}

/* For the mimalloc-prof command, which compiles this file in to check values before it starts a
 * program: the same parsing and range check as at start-up, but nothing is clipped or replaced. */
int mprof_option_parse(const char *name, const char *text, uint64_t *value, char *why, size_t why_len)
{
  const opt_desc_t *d = NULL;
  for (int id = 0; id < MPROF_OPT_COUNT && d == NULL; id++) {
    if (strcmp(opt_desc[id].name, name) == 0) d = &opt_desc[id];
  }
  if (d == NULL) return -1;
  uint64_t v;
  if (!parse_value(d, text, &v)) {
    snprintf(why, why_len, "is %s", kind_word(d->kind));
    return 0;
  }
  if (!in_range(d, v)) {
    snprintf(why, why_len, "is outside %llu..%llu", (unsigned long long)d->min, (unsigned long long)d->max);
    return 0;
  }
  *value = v;
  return 1;
}
