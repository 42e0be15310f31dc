/* probe_util.h - what the probe programs (tests/prof_probe.c, tests/stack_probe.c, tests/pprof_probe.c)
 * share: how they fail, how they read numeric arguments and the stats.  Each probe defines PROBE_NAME
 * (its name, for its error lines) before including this.  static inline: each probe is one source file
 * and uses only some of these.
 */
#ifndef MPROF_TEST_PROBE_UTIL_H
#define MPROF_TEST_PROBE_UTIL_H

#ifndef PROBE_NAME
#error "define PROBE_NAME before including probe_util.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "mimalloc-prof.h"

/* Something the test cannot see went wrong: one line "PROBE_NAME: what (errno E)" on stderr and exit
 * status 1.  A probe writes nothing else to stderr: it belongs to the library's warnings, which the
 * tests read. */
static inline _Noreturn void die(const char *what)
{
  fprintf(stderr, PROBE_NAME ": %s (errno %d)\n", what, errno);
  exit(1);
}

/* A decimal argument; anything else is the test's mistake, so it ends the probe. */
static inline size_t arg_size(const char *s)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') die("bad numeric argument");
  return (size_t)v;
}

static inline mi_prof_stats_t stats_now(void)
{
  mi_prof_stats_t st;
  if (!mi_prof_stats(&st, sizeof st)) die("mi_prof_stats failed");
  return st;
}

#endif
