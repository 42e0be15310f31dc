/* test_real_programs.c - real programs from Debian under LD_PRELOAD with sampling at rate 4096
 * (catalogue E39): python3 (with PYTHONMALLOC=malloc, so its objects come from malloc),
 * sort, perl and sqlite3 print exactly what they print without the library, and the profile each writes
 * at exit decodes and follows the rules of profile.proto.  Frequent samples (rate 4096: thousands per
 * run) put every slow path of the library under a program that was not written for it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprof_util.h"

#if MPROF_PPROF

typedef struct program_s {
  const char *name;
  const char *const *argv;        /* after the program's path */
  const char *path;
  const char *input;              /* fed on stdin, or NULL */
} program_t;

static const char *const python_args[] = {
  "-c",
  "import json, collections\n"
  "d = {str(i): [i, str(i) * 3, {'k': i}] for i in range(30000)}\n"
  "s = json.dumps(d, sort_keys=True)\n"
  "c = collections.Counter(s)\n"
  "print(len(s), sorted(c.items())[:8], sum(len(v[1]) for v in json.loads(s).values()))\n",
  NULL};
static const char *const sort_args[] = {"-n", NULL};
static const char *const perl_args[] = {
  "-e", "my %h; $h{$_} = $_ x 3 for 1 .. 50000; my @k = sort keys %h; print scalar(@k), \" @k[0..5]\\n\";",
  NULL};
static const char *const sqlite_args[] = {
  ":memory:",
  "create table t(a integer, b text);"
  "with recursive c(x) as (select 1 union all select x + 1 from c limit 20000) "
  "insert into t select x, printf('%08d', x * 7919 % 100003) from c;"
  "create index i on t(b); select count(*), sum(a), min(b), max(b) from t;",
  NULL};

static char sort_input[200000];

static const program_t programs[] = {
  {"python3", python_args, "/usr/bin/python3", NULL},
  {"sort", sort_args, "/usr/bin/sort", sort_input},
  {"perl", perl_args, "/usr/bin/perl", NULL},
  {"sqlite3", sqlite_args, "/usr/bin/sqlite3", NULL},
};

static probe_run_t run_program(const program_t *p, const char *const *vars)
{
  probe_opts_t o = {.env = vars, .with_stdin = p->input != NULL, .watchdog_s = 120};
  probe_child_t c = probe_start(p->path, p->argv, &o);
  if (p->input != NULL) {
    size_t len = strlen(p->input), off = 0;
    while (off < len) {
      ssize_t w = write(c.in, p->input + off, len - off);
      ck_assert_int_gt(w, 0);
      off += (size_t)w;
    }
  }
  return probe_finish(&c);
}

START_TEST(real_programs_same_output)
{
  uint64_t x = 0x9e3779b97f4a7c15ull;
  size_t n = 0;
  for (int i = 0; i < 20000 && n + 24 < sizeof sort_input; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    n += (size_t)snprintf(sort_input + n, sizeof sort_input - n, "%llu\n", (unsigned long long)(x % 1000000007));
  }
  size_t ran = 0;
  for (size_t k = 0; k < sizeof programs / sizeof programs[0]; k++) {
    const program_t *p = &programs[k];
    if (access(p->path, X_OK) != 0) {
      fprintf(stderr, "real_programs: %s not installed, skipped\n", p->path);
      continue;
    }
    if (!probe_same_arch(p->path)) {
      fprintf(stderr, "real_programs: %s is another architecture's program, skipped\n", p->path);
      continue;
    }
    ran++;
    const char *dir = tmp_dir_make();
    char preload[PATH_MAX + 16], prefix[PATH_MAX + 32];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", probe_getenv("MPROF_TEST_LIB"));
    snprintf(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX=%s/p", dir);
    const char *plain[] = {"PYTHONMALLOC=malloc", NULL};
    const char *profiled[] = {"PYTHONMALLOC=malloc", preload, "MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096",
                              "MIMALLOC_PROF_FINAL=1", prefix, NULL};
    probe_run_t a = run_program(p, plain), b = run_program(p, profiled);
    probe_assert_exit0(&a, p->name);
    probe_assert_exit0(&b, p->name);
    ck_assert_msg(strcmp(a.out, b.out) == 0, "%s: output differs:\n%s\n---\n%s", p->name, a.out, b.out);
    ck_assert_msg(b.err[0] == '\0', "%s: stderr:\n%s", p->name, b.err);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/p.%d.000000.f.pb.gz", dir, (int)b.pid);
    profile_t *prof = profile_load(path);            /* decoded and checked against profile.proto */
    int64_t sum[N_VALUES];
    profile_sums(prof, sum);
    ck_assert_msg(sum[V_ALLOC_OBJECTS] > 0, "%s: nothing sampled", p->name);
    test_profile_free(prof);
    probe_run_free(&a);
    probe_run_free(&b);
  }
  if (ran == 0 && !probe_same_arch(programs[0].path))
    MPROF_TEST_SKIP("the build machine's programs are of another architecture (a cross build): the library "
                    "built here cannot be preloaded into them");
}
END_TEST

Suite *real_programs_suite(void)
{
  Suite *s = suite_create("real_programs");
  TCase *tc = tcase_create("real_programs");
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, real_programs_same_output);
  suite_add_tcase(s, tc);
  return s;
}

#endif
