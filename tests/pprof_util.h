/* pprof_util.h - what the heap profile suites share (test_pprof.c: the format; test_dump.c: dumps, triggers,
 * the leak report and the budget; test_profiler.c: the profiler thread, final signals, fork under the
 * loader lock).
 *
 * Profiles are decoded the way pprof reads them: gunzip (zlib), then protobuf-c's unpack with the code
 * generated from proto/profile.proto, and every decoded profile is checked against the rules of
 * profile.proto (profile_load does both).  Tests that need MIMALLOC_PROF_* options (read once, at load) run
 * tests/pprof_probe (MPROF_TEST_PPROF_PROBE) in a subprocess, with MIMALLOC_PROF_PREFIX in a temporary
 * directory.  `go tool pprof` is run when `go` is on PATH; without it, those checks are skipped and the rest
 * of the test still runs.  Every function asserts (ck_assert) on a failure.
 */
#ifndef MPROF_TEST_PPROF_UTIL_H
#define MPROF_TEST_PPROF_UTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF

#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile  profile_t;
typedef Perftools__Profiles__Mapping  mapping_t;
typedef Perftools__Profiles__Location location_t;
typedef Perftools__Profiles__Function function_t;
typedef Perftools__Profiles__Sample   sample_t;

/* The sample values, in the order the profile declares them: six, or eight with MIMALLOC_PROF_LIFETIMES. */
enum {
  V_ALLOC_OBJECTS, V_ALLOC_SPACE, V_INUSE_OBJECTS, V_INUSE_SPACE, V_PEAK_OBJECTS, V_PEAK_SPACE,
  V_FREED_OBJECTS, V_FREED_SPACE, N_VALUES
};

/* A dropped sample's function name starts so (lib/pprof.c). */
#define DROPPED_PREFIX "[mimalloc-prof: dropped ("

uint64_t realtime_ns(void);

/* Temporary directories: one per test (tmp_dir_make), inside one per run made and removed by the
 * unchecked fixture run_dir_setup/run_dir_teardown, which runs in Check's parent process, so the files go
 * even when a failed assertion ends a test's own process. */
void        run_dir_setup(void);
void        run_dir_teardown(void);
const char *tmp_dir_make(void);

/* Decoding and the rules of profile.proto. */
profile_t        *profile_decode(const unsigned char *gz, size_t len);   /* NULL: not one gzip'd Profile */
profile_t        *profile_load(const char *path);                       /* decoded and checked */
void              profile_assert_wellformed(const profile_t *p);
void              test_profile_free(profile_t *p);
const char       *test_pstr(const profile_t *p, int64_t i);                   /* string_table[i], checked */
void              profile_sums(const profile_t *p, int64_t sum[N_VALUES]);
const mapping_t  *mapping_by_id(const profile_t *p, uint64_t id);
const location_t *location_by_id(const profile_t *p, uint64_t id);
const mapping_t  *mapping_named(const profile_t *p, const char *tail);   /* filename ends with tail */
const char       *location_name(const profile_t *p, const location_t *l);   /* "" when unnamed */
const location_t *sample_leaf(const profile_t *p, const sample_t *s);    /* innermost location */
int64_t           leaf_total(const profile_t *p, const char *fn, int v); /* value v over leaves named fn */
/* The sample's label `key`: its string (NULL when it has none); its number (false when none). */
const char       *label_str(const profile_t *p, const sample_t *s, const char *key);
bool              label_num(const profile_t *p, const sample_t *s, const char *key, int64_t *out);
/* The number after " key=" in the comment that starts with head (false / failure when there is none). */
bool              comment_value(const profile_t *p, const char *head, const char *key, uint64_t *out);
uint64_t          comment_number(const profile_t *p, const char *head, const char *key);
bool              ends_with(const char *s, const char *tail);

/* tests/pprof_probe: `args` after its name, `vars` in its environment; with_stdin: a pipe to its stdin. */
probe_child_t start_probe(const char *const *vars, const char *const *args, bool with_stdin);
probe_run_t   run_probe(const char *const *vars, const char *const *args);
void          out_string(const probe_run_t *r, const char *key, char *buf, size_t len);   /* "key value" */
void          wait_ready(const probe_child_t *c);              /* reads its stdout up to a line "ready" */
/* tests/peak_probe MODE PATH RATE SEED (PATH: MODE.pb.gz in a fresh directory, into path[PATH_MAX]) with
 * `vars`; asserts it exited 0 quietly and loads its profile into *p. */
probe_run_t   run_peak_probe(const char *mode, const char *rate, const char *seed, const char *const *vars,
                             profile_t **p, char *path);

/* `go tool pprof`: go_find gives the path of `go` on PATH (false: none, skip). */
bool        go_find(char *out, size_t len);
probe_run_t go_pprof(const char *go, const char *const *args);
double      top_flat_percent(const char *top, const char *fn);   /* flat% in -top output; -1 if absent */

/* Automatic dump files <dir>/prof.<pid>.<seq>.<kind>.pb.gz. */
#define MAX_DUMPS 64
typedef struct dump_file_s {
  unsigned seq;
  char kind;
  char path[PATH_MAX];
} dump_file_t;

/* Every file in dir, sorted by sequence number; each must be such a file of this pid, of a documented
 * kind, and the sequence numbers must run 0 .. n-1. */
size_t dumps_list(const char *dir, pid_t pid, dump_file_t *out);
void   dumps_kinds(const dump_file_t *f, size_t n, char *kinds);   /* "iiis" */
void   set_var(char *buf, size_t len, const char *name, const char *value);   /* "NAME=value" */
void   prefix_var(char *buf, size_t len, const char *dir);   /* "MIMALLOC_PROF_PREFIX=dir/prof" */
/* Waits (inotify watch on the directory, IN_MOVED_TO) until `name` appears, complete, while the child
 * lives: its stdout's end means it died first. */
void   wait_closed(int watch, const probe_child_t *c, const char *name);

/* One allocation site (not inlined): every block it allocates has the same stack up to its caller. */
void alloc_into(void **out, size_t n, size_t size);
void free_all(void **blocks, size_t n);

#endif
#endif
