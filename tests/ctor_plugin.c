/* ctor_plugin.c - a module whose constructor runs while dlopen() holds the dynamic loader's lock
 * (tests/loader_probe.c loads it).  The constructor tells the probe it is running, waits until the probe
 * lets it go on, then calls the profiler's API and allocates: the first-start-against-a-constructor case
 * of the unwind suite.  The descriptors and the call come from CTOR_PLUGIN="ENTERED_FD GO_FD CALL", CALL
 * being "stats" (mi_prof_stats) or "start" (mi_prof_start at rate 1, then 8 allocations).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mimalloc-prof.h"

int ctor_plugin_ok = -1;          /* 1: the API call succeeded (a start may also find one running) */

__attribute__((constructor)) static void ctor_plugin_init(void)
{
  const char *spec = getenv("CTOR_PLUGIN");
  int entered, go;
  char call[16], c = 'e';
  if (spec == NULL || sscanf(spec, "%d %d %15s", &entered, &go, call) != 3) return;
  if (write(entered, &c, 1) != 1 || read(go, &c, 1) != 1) return;
  if (strcmp(call, "stats") == 0) {
    mi_prof_stats_t st;
    ctor_plugin_ok = mi_prof_stats(&st, sizeof st);
  } else {
    ctor_plugin_ok = mi_prof_start(1) || errno == EALREADY;
    for (int i = 0; i < 8; i++) free(malloc(100));
  }
}
