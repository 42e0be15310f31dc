/* tool_util.h - helpers for the tests of the mimalloc-prof command (test_tool_*.c, test_symbolize.c,
 * test_flame.c): running it, temporary directories, reading profiles (with the command's own reader,
 * tools/profile.c, compiled into the test runner; go tool pprof checks them independently), and
 * synthetic profiles with known values (tools/pbuild.c). */
#ifndef MPROF_TEST_TOOL_UTIL_H
#define MPROF_TEST_TOOL_UTIL_H

#include "subprocess.h"
#include "tool.h"

/* A fresh directory for one test, inside one made and removed for the whole run by tool_dirs_setup and
 * tool_dirs_teardown (an unchecked fixture: it runs in Check's parent, so the files go even when a
 * test's process fails). */
void        tool_dirs_setup(void);
void        tool_dirs_teardown(void);
const char *tool_tmpdir(char *buf, size_t len);

/* mimalloc-prof ARGS... (NULL-terminated), with extra environment `env` (as probe_opts_t.env). */
probe_run_t tool_run(const char *const *args, const char *const *env);

/* Asserts a usage error: exit status 2, and stderr = "mimalloc-prof CMD: MESSAGE" + the --help hint,
 * with MESSAGE containing `words`. */
void tool_assert_usage_error(const probe_run_t *r, const char *cmd, const char *words);

/* Reads a profile; fails the test when it cannot. */
profile_t *tool_profile(const char *path);

/* The function name of a location's line k ("" when none). */
const char *tool_line_name(const profile_t *p, const pindex_t *ix, const location_t *l, size_t k);

/* Whether the file at path exists. */
bool tool_exists(const char *path);
/* The whole file at path, NUL-terminated (malloc'd; the test fails when it cannot be read). */
char *tool_file_text(const char *path);

/* A synthetic profile: four sample types (alloc_objects, alloc_space, inuse_objects, inuse_space) and
 * stacks given as "outer;...;inner" with alloc and inuse bytes (objects = bytes / 1024); one mapping
 * for `file` (NULL: "/synthetic/prog", build ID 0123456789abcdef) at `start` whose locations are named by the frames; a frame "[dropped]" becomes
 * the library's dropped-sample location (no mapping). */
typedef struct tool_stack_s {
  const char *frames;
  int64_t     alloc_bytes, inuse_bytes;
} tool_stack_t;
void tool_synthetic(const char *path, const tool_stack_t *stacks, size_t n, uint64_t start, const char *file);

/* A synthetic profile of the library's full format (doc/design/profiles.md): sample types
 * alloc_, inuse_, peak_ objects and space, and with `lifetimes` freed_objects and freed_space (objects =
 * bytes / 1024); labels thread (when not NULL), bytes (when above 0) and, on a sample with freed bytes,
 * lifetime (ns, when not negative); the NULL-terminated comments (NULL: none) and the timeline (NULL:
 * none).  The session started at TOOL_SYNTHETIC_T0 (CLOCK_REALTIME ns) and the profile was written 1 s
 * later. */
#define TOOL_SYNTHETIC_T0 1700000000000000000ll
typedef struct tool_sample_s {
  const char *frames;
  int64_t     alloc, inuse, peak, freed;   /* bytes */
  const char *thread;
  int64_t     bytes, lifetime;
} tool_sample_t;
void tool_synthetic_labelled(const char *path, const tool_sample_t *samples, size_t n, bool lifetimes,
                             const char *const *comments, const timeline_t *timeline);

#endif
