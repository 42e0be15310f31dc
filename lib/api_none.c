/* api_none.c - the mi_prof_* API of a build without the sampling engine (--disable-pprof).
 * Every function exists, so programs link against either build, and reports "not available":
 * false (or the documented failure value) with errno ENOTSUP. */
#include "internal.h"

#include <errno.h>

#include "mimalloc-prof.h"

static bool not_available(void)
{
  errno = ENOTSUP;
  return false;
}

int mi_prof_version(void) { return MI_PROF_VERSION; }
bool mi_prof_available(void) { return not_available(); }
bool mi_prof_start(size_t sample_rate) { (void)sample_rate; return not_available(); }
bool mi_prof_start_seeded(size_t sample_rate, uint64_t seed)
{
  (void)sample_rate;
  (void)seed;
  return not_available();
}
bool mi_prof_stop(void) { return not_available(); }
bool mi_prof_is_enabled(void) { return not_available(); }
bool mi_prof_reset(void) { return not_available(); }
bool mi_prof_stats(mi_prof_stats_t *stats, size_t size)
{
  (void)stats;
  (void)size;
  return not_available();
}
bool mi_prof_debug_stats(size_t *live_records, size_t *live_bytes)
{
  (void)live_records;
  (void)live_bytes;
  return not_available();
}
bool mi_prof_set_observer(mi_prof_sample_fn *on_sample, mi_prof_free_fn *on_free, void *arg)
{
  (void)on_sample;
  (void)on_free;
  (void)arg;
  return not_available();
}
bool mi_prof_visit(mi_prof_visit_fn *visitor, void *arg)
{
  (void)visitor;
  (void)arg;
  return not_available();
}
bool mi_prof_dump(const char *path)
{
  (void)path;
  return not_available();
}
bool mi_prof_dump_fd(int fd)
{
  (void)fd;
  return not_available();
}
