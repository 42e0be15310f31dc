/* test_options.c - the MIMALLOC_PROF_* environment options, seeds, the profiler memory budget and the
 * sampled-block arena reservation.  Options are read once, when the library loads, so every test runs
 * tests/prof_probe (MPROF_TEST_PROF_PROBE) in a subprocess with a chosen environment and reads what it
 * prints: "key value" lines on stdout, the library's warning lines on stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "mimalloc-prof.h"
#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF == 1

static const char warn_prefix[] = "mimalloc-prof: warning: ";

/* The documented bounds that are sizes of address space, for this platform's (mimalloc_prof(3)). */
#define ARENA_DEFAULT (sizeof(void *) == 8 ? (uint64_t)64 << 30 : (uint64_t)1 << 30)
#define BUDGET_MAX    (sizeof(void *) == 8 ? (uint64_t)1 << 40 : (uint64_t)2 << 30)

static const char no_rlimit_as[] = "RLIMIT_AS (ulimit -v) is not enforced here (qemu-user does not)";

/* Runs the probe with `args` (NULL-terminated, after the program name) and the environment `vars`;
 * as_limit != 0 sets RLIMIT_AS in the child before exec. */
static probe_run_t run_probe_limited(const char *const *vars, rlim_t as_limit, const char *const *args)
{
  probe_opts_t opts = {.env = vars, .as_limit = as_limit};
  return probe_run(probe_getenv("MPROF_TEST_PROF_PROBE"), args, &opts);
}

static probe_run_t run_probe(const char *const *vars, const char *const *args)
{
  return run_probe_limited(vars, 0, args);
}

/* Lines of stderr that are library warnings containing `needle` (NULL: any). */
static unsigned warnings_with(const probe_run_t *run, const char *needle)
{
  unsigned n = 0;
  for (const char *line = run->err; *line != '\0';) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char copy[1024];
    if (len >= sizeof copy) len = sizeof copy - 1;
    memcpy(copy, line, len);
    copy[len] = '\0';
    if (strncmp(copy, warn_prefix, sizeof warn_prefix - 1) == 0 && (needle == NULL || strstr(copy, needle)))
      n++;
    if (end == NULL) break;
    line = end + 1;
  }
  return n;
}

/* ---------------------------------------------------------------------------------------------------
   Malformed and valid values
--------------------------------------------------------------------------------------------------- */

typedef struct bad_case_s {
  const char *name, *value;
  uint64_t used;            /* the value the warning must say is used instead */
} bad_case_t;

static const bad_case_t bad_cases[] = {
  {"MIMALLOC_PROF_SAMPLE_RATE", "12x", MI_PROF_DEFAULT_SAMPLE_RATE},
  {"MIMALLOC_PROF", "maybe", 0},
  {"MIMALLOC_PROF_SEED", "-1", 0},
  {"MIMALLOC_PROF_MAX_BYTES", "1", 1u << 20},                  /* clipped up to the minimum */
  {"MIMALLOC_PROF_ARENA_SIZE", "lots", ARENA_DEFAULT},
  {"MIMALLOC_PROF_ACCUM", "2", 1},                             /* default 1 */
};

/* Whether stderr has exactly one line of the form
 * 'mimalloc-prof: warning: NAME="value" is <why>; using N'. */
static bool one_bad_value_warning(const probe_run_t *run, const bad_case_t *c)
{
  char head[256], tail[64];
  snprintf(head, sizeof head, "%s%s=\"%s\" is ", warn_prefix, c->name, c->value);
  snprintf(tail, sizeof tail, "; using %" PRIu64, c->used);
  unsigned found = 0;
  for (const char *line = run->err; *line != '\0';) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    size_t hl = strlen(head), tl = strlen(tail);
    if (len > hl + tl && strncmp(line, head, hl) == 0 && strncmp(line + len - tl, tail, tl) == 0) found++;
    if (end == NULL) break;
    line = end + 1;
  }
  return found == 1;
}

/* All malformed values at once: one warning line each (in any order), defaults used, exit 0. */
START_TEST(options_bad_values)
{
  enum { N = sizeof bad_cases / sizeof bad_cases[0] };
  char settings[N][128];
  const char *vars[N + 1] = {0};
  for (size_t i = 0; i < N; i++) {
    snprintf(settings[i], sizeof settings[i], "%s=%s", bad_cases[i].name, bad_cases[i].value);
    vars[i] = settings[i];
  }
  probe_run_t run = run_probe(vars, (const char *const[]){"stats", NULL});
  probe_assert_exit0(&run, NULL);
  for (size_t i = 0; i < N; i++)
    ck_assert_msg(one_bad_value_warning(&run, &bad_cases[i]), "want one warning for %s=\"%s\" using %" PRIu64
                  "; stderr:\n%s", bad_cases[i].name, bad_cases[i].value, bad_cases[i].used, run.err);
  ck_assert_uint_eq(probe_count_lines(run.err), N);
  ck_assert_uint_eq(probe_value(&run, "enabled_at_main"), 0);              /* MIMALLOC_PROF: 0 */
  ck_assert_uint_eq(probe_value(&run, "start"), 1);
  ck_assert_uint_eq(probe_value(&run, "sample_rate"), MI_PROF_DEFAULT_SAMPLE_RATE);
  ck_assert_uint_eq(probe_value(&run, "profiler_bytes_max"), 1u << 20);    /* clipped up */
  ck_assert_uint_eq(probe_value(&run, "arena_limit_bytes"), ARENA_DEFAULT);  /* the default */
  ck_assert_ptr_nonnull(strstr(run.out, "allocations ok\n"));
  probe_run_free(&run);
}
END_TEST

/* Out of range, one variable per run: REJECT rows fall back to the default, CLIP rows to the bound. */
START_TEST(options_out_of_range_values)
{
  static const struct {
    bad_case_t c;
    const char *key;        /* the probe's line that shows the value used */
  } cases[] = {
    {{"MIMALLOC_PROF_SAMPLE_RATE", "0", MI_PROF_DEFAULT_SAMPLE_RATE}, "sample_rate"},
    {{"MIMALLOC_PROF_SAMPLE_RATE", "2t", MI_PROF_DEFAULT_SAMPLE_RATE}, "sample_rate"},
    {{"MIMALLOC_PROF_SAMPLE_RATE", "99999999999999999999", MI_PROF_DEFAULT_SAMPLE_RATE}, "sample_rate"},
    {{"MIMALLOC_PROF_MAX_BYTES", "2t", BUDGET_MAX}, "profiler_bytes_max"},
    {{"MIMALLOC_PROF_ARENA_SIZE", "1m", (uint64_t)4 << 20}, "arena_limit_bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char setting[128];
    snprintf(setting, sizeof setting, "%s=%s", cases[i].c.name, cases[i].c.value);
    probe_run_t run = run_probe((const char *const[]){setting, NULL}, (const char *const[]){"stats", NULL});
    probe_assert_exit0(&run, NULL);
    ck_assert_msg(probe_count_lines(run.err) == 1 && one_bad_value_warning(&run, &cases[i].c),
                  "%s; stderr:\n%s", setting, run.err);
    ck_assert_uint_eq(probe_value(&run, cases[i].key), cases[i].c.used);
    probe_run_free(&run);
  }
}
END_TEST

/* The byte spellings options.c accepts, each without a word on stderr. */
START_TEST(options_good_values)
{
  static const struct {
    const char *setting;
    uint64_t rate;
  } rates[] = {
    {"MIMALLOC_PROF_SAMPLE_RATE=64k", 65536},  {"MIMALLOC_PROF_SAMPLE_RATE=64K", 65536},
    {"MIMALLOC_PROF_SAMPLE_RATE=64KiB", 65536}, {"MIMALLOC_PROF_SAMPLE_RATE=64kb", 65536},
    {"MIMALLOC_PROF_SAMPLE_RATE=4096", 4096},  {"MIMALLOC_PROF_SAMPLE_RATE=3m", 3u << 20},
    {"MIMALLOC_PROF_SAMPLE_RATE=1g", 1u << 30}, {"MIMALLOC_PROF_SAMPLE_RATE=1t", (uint64_t)1 << 40},
    {"MIMALLOC_PROF_SAMPLE_RATE=100b", 100},
  };
  for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
    probe_run_t run =
      run_probe((const char *const[]){rates[i].setting, NULL}, (const char *const[]){"stats", NULL});
    probe_assert_exit0(&run, NULL);
    ck_assert_msg(run.err[0] == '\0', "%s; stderr:\n%s", rates[i].setting, run.err);
    ck_assert_uint_eq(probe_value(&run, "enabled_at_main"), 0);
    ck_assert_uint_eq(probe_value(&run, "sample_rate"), rates[i].rate);
    probe_run_free(&run);
  }

  /* Every option valid at once; MIMALLOC_PROF=1 starts sampling before main, at the option's rate. */
  const char *all[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=64k", "MIMALLOC_PROF_SEED=42",
                       "MIMALLOC_PROF_MAX_BYTES=1m", "MIMALLOC_PROF_ACCUM=yes", "MIMALLOC_PROF_ARENA_SIZE=64m",
                       NULL};
  probe_run_t run = run_probe(all, (const char *const[]){"stats", NULL});
  probe_assert_exit0(&run, NULL);
  ck_assert_msg(run.err[0] == '\0', "stderr:\n%s", run.err);
  ck_assert_uint_eq(probe_value(&run, "enabled_at_main"), 1);
  ck_assert_uint_eq(probe_value(&run, "sample_rate"), 65536);
  ck_assert_uint_eq(probe_value(&run, "profiler_bytes_max"), 1u << 20);
  ck_assert_uint_eq(probe_value(&run, "arena_limit_bytes"), 64u << 20);
  probe_run_free(&run);

  /* The boolean spellings. */
  static const char *const on[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF=yes", "MIMALLOC_PROF=TRUE",
                                   "MIMALLOC_PROF=on"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
    run = run_probe((const char *const[]){on[i], NULL}, (const char *const[]){"stats", NULL});
    probe_assert_exit0(&run, NULL);
    ck_assert_msg(run.err[0] == '\0', "%s; stderr:\n%s", on[i], run.err);
    ck_assert_uint_eq(probe_value(&run, "enabled_at_main"), 1);
    ck_assert_uint_eq(probe_value(&run, "sample_rate"), MI_PROF_DEFAULT_SAMPLE_RATE);
    probe_run_free(&run);
  }
  run = run_probe((const char *const[]){"MIMALLOC_PROF=off", NULL}, (const char *const[]){"stats", NULL});
  probe_assert_exit0(&run, NULL);
  ck_assert_str_eq(run.err, "");
  ck_assert_uint_eq(probe_value(&run, "enabled_at_main"), 0);
  probe_run_free(&run);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Seeds
--------------------------------------------------------------------------------------------------- */

/* 20000 allocations of 1..4096 bytes (a fixed pattern, about uniform) at rate 4096: with u = s/4096
 * about uniform on (0, 1], E[1 - exp(-u)] = e^-1, so E[samples] ~ 20000 * 0.368 ~ 7360; two independent
 * seeds agree on a whole sequence that long with negligible probability. */
static probe_run_t run_sequence(const char *seed_setting)
{
  probe_run_t run = run_probe((const char *const[]){seed_setting, NULL},
                              (const char *const[]){"sequence", "4096", "20000", NULL});
  probe_assert_exit0(&run, NULL);
  ck_assert_str_eq(run.err, "");
  return run;
}

START_TEST(options_seed_determinism)
{
  probe_run_t a = run_sequence("MIMALLOC_PROF_SEED=12345");
  probe_run_t b = run_sequence("MIMALLOC_PROF_SEED=12345");
  probe_run_t c = run_sequence("MIMALLOC_PROF_SEED=54321");
  uint64_t n = probe_value(&a, "samples");
  /* n is a sum of independent Bernoulli draws, E ~ 7360, sigma < sqrt(7360) ~ 86: 4 sigma below E is
   * above 7000; the floor of 1000 is far looser and only guards against a probe that samples nothing. */
  ck_assert_uint_gt(n, 1000);
  ck_assert_str_eq(a.out, b.out);                 /* byte for byte: same indices, same sizes */
  ck_assert_str_ne(a.out, c.out);
  /* Seed 0 (the default) draws fresh entropy: two runs differ. */
  probe_run_t d = run_sequence("MIMALLOC_PROF_SEED=0");
  probe_run_t e = run_sequence("MIMALLOC_PROF_SEED=0");
  ck_assert_str_ne(d.out, e.out);
  probe_run_free(&a);
  probe_run_free(&b);
  probe_run_free(&c);
  probe_run_free(&d);
  probe_run_free(&e);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Profiler memory budget
--------------------------------------------------------------------------------------------------- */

/* Rate 1 samples every allocation (P(an interval exceeds 64 bytes) = e^-64), so 20000 live 64-byte
 * blocks want 20000 records of 64 bytes: 1.25 MiB of tables (more at the table's 70% load), over the
 * smallest budget, 1 MiB, of which a dump's fixed reserve is kept free. */
START_TEST(options_budget_drops)
{
  probe_run_t run = run_probe((const char *const[]){"MIMALLOC_PROF_MAX_BYTES=1m", NULL},
                              (const char *const[]){"budget", "1", "20000", "64", NULL});
  probe_assert_exit0(&run, NULL);
  ck_assert_uint_eq(probe_value(&run, "bad_blocks"), 0);
  ck_assert_uint_eq(probe_value(&run, "profiler_bytes_max"), 1u << 20);
  ck_assert_uint_le(probe_value(&run, "profiler_bytes_peak"), 1u << 20);
  ck_assert_uint_gt(probe_value(&run, "samples"), 0);
  ck_assert_uint_gt(probe_value(&run, "dropped_memory"), 0);
  /* Every block was either recorded or dropped: nothing lost between the two. */
  ck_assert_uint_ge(probe_value(&run, "samples") + probe_value(&run, "dropped_memory"), 20000);
  ck_assert_uint_eq(probe_value(&run, "live_after_free"), 0);
  ck_assert_msg(probe_count_lines(run.err) == 1 && warnings_with(&run, "dropping samples") == 1, "stderr:\n%s",
                run.err);
  ck_assert_uint_eq(warnings_with(&run, "MIMALLOC_PROF_MAX_BYTES"), 1);
  probe_run_free(&run);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Arena reservation
--------------------------------------------------------------------------------------------------- */

/* The arena reserves nothing: under an address-space limit of 8 GiB (1 GiB on 32-bit platforms) the
 * default window (64 GiB; 112 MiB) starts and maps chunks only as sampled blocks need them.  1000 x 512 B
 * at rate 4096: E[samples] = 1000 (1 - e^-0.125) = 117.5, sigma 10.2, so zero samples is > 11 sigma away;
 * at most 1000 x 512 B = 500 KiB of them are live at once, which fits one 1 MiB chunk. */
START_TEST(options_arena_under_rlimit)
{
  if (!probe_rlimit_as_enforced()) MPROF_TEST_SKIP(no_rlimit_as);
#if UINTPTR_MAX > 0xffffffffu
  rlim_t limit = (rlim_t)8 << 30;
#else
  rlim_t limit = (rlim_t)1 << 30;
#endif
  probe_run_t run = run_probe_limited(NULL, limit, (const char *const[]){"arena", "4096", NULL});
  probe_assert_exit0(&run, NULL);
  ck_assert_uint_eq(probe_value(&run, "start"), 1);
  ck_assert_uint_eq(probe_value(&run, "arena_limit_bytes"), ARENA_DEFAULT);
  ck_assert_uint_le(probe_value(&run, "arena_bytes"), (uint64_t)1 << 20);
  ck_assert_uint_gt(probe_value(&run, "samples"), 0);
  ck_assert_str_eq(run.err, "");
  probe_run_free(&run);
}
END_TEST

/* A program that allocates 64 KiB blocks until malloc fails, under `ulimit -v` 100000 and 200000 (KiB):
 * sampling from load (MIMALLOC_PROF=1, default rate) must leave it at least 95% of what it gets with the
 * library loaded and stopped, and never crash it.  (Each 64 KiB block is sampled with p = 1 - e^-1/8 =
 * 11.8%: those blocks live in the arena instead of mimalloc, so the arena's own cost is its chunk map,
 * its bookkeeping pages and at most one partly used chunk - about 1% of 100 MB.) */
static uint64_t fill_bytes(rlim_t limit, bool sampling)
{
  const char *const vars[] = {sampling ? "MIMALLOC_PROF=1" : "MIMALLOC_PROF=0", NULL};
  probe_opts_t opts = {.env = vars, .as_limit = limit, .watchdog_s = 60};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_PROF_PROBE"), (const char *const[]){"fill", "65536", NULL},
                              &opts);
  probe_assert_exit0(&run, sampling ? "fill, sampling" : "fill, stopped");
  ck_assert_uint_eq(probe_value(&run, "enabled"), sampling ? 1 : 0);
  if (sampling) ck_assert_uint_gt(probe_value(&run, "samples"), 0);
  uint64_t bytes = probe_value(&run, "bytes");
  probe_run_free(&run);
  return bytes;
}

START_TEST(options_arena_keeps_headroom)
{
  if (!probe_rlimit_as_enforced()) MPROF_TEST_SKIP(no_rlimit_as);   /* the fill would never end */
  static const rlim_t limits_kib[] = {100000, 200000};
  for (size_t i = 0; i < 2; i++) {
    rlim_t limit = limits_kib[i] << 10;
    uint64_t stopped = fill_bytes(limit, false), sampling = fill_bytes(limit, true);
    ck_assert_msg(stopped > (16u << 20), "ulimit -v %lu: only %" PRIu64 " bytes stopped", (unsigned long)limits_kib[i],
                  stopped);
    ck_assert_msg(sampling * 100 >= stopped * 95, "ulimit -v %lu: %" PRIu64 " bytes sampling, %" PRIu64 " stopped",
                  (unsigned long)limits_kib[i], sampling, stopped);
  }
}
END_TEST

/* Interval dumps in a program that closes every descriptor and reuses the numbers (daemons): its own
 * pipe must carry its own bytes, and the program must not hang (the request path is descriptor-free).
 * The probe's working directory is a fresh temporary directory, emptied afterwards. */
START_TEST(options_dump_requests_use_no_descriptor)
{
  char dir[] = "/tmp/mprof-closefds.XXXXXX", prefix[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX=%s/p", dir);
  probe_run_t run = run_probe((const char *const[]){"MIMALLOC_PROF=1", "MIMALLOC_PROF_INTERVAL=1m", prefix, NULL},
                              (const char *const[]){"closefds", NULL});
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  int rc = system(cmd);
  probe_assert_exit0(&run, NULL);
  ck_assert_uint_eq(probe_value(&run, "same"), 1);
  ck_assert_int_eq(rc, 0);
  probe_run_free(&run);
}
END_TEST

Suite *options_suite(void)
{
  Suite *s = suite_create("options");
  TCase *tc = tcase_create("options");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, options_bad_values);
  tcase_add_test(tc, options_out_of_range_values);
  tcase_add_test(tc, options_good_values);
  tcase_add_test(tc, options_seed_determinism);
  tcase_add_test(tc, options_budget_drops);
  tcase_add_test(tc, options_arena_under_rlimit);
  tcase_add_test(tc, options_arena_keeps_headroom);
  tcase_add_test(tc, options_dump_requests_use_no_descriptor);
  suite_add_tcase(s, tc);
  return s;
}

#endif
