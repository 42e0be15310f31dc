/* test_tool_memtime.c - the heap over time in mimalloc-prof's reports, on synthetic profiles of the
 * library's format whose values are known exactly (tool_synthetic_labelled): top's header with the peak,
 * the peak_space and peak_objects sample types in every report, top --temporary, --by and --tag, the
 * timeline's text chart and its SVG in headless Chromium.  test_tool_memreal.c runs the same views on
 * real programs. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chromium.h"
#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

#define MiB (1024 * 1024)
#define MS  1000000ll

/* The transient program's profile: build made 100 MiB and freed it within microseconds of each
 * allocation (lifetime bucket 4096 ns), keep holds 10 MiB to the end, cache freed 5 MiB after seconds
 * (bucket 2^31 ns), edge freed 2 MiB in the bucket [2^19, 2^20) ns that holds 1 ms.  At the peak (500 ms
 * after the start), build held 100 MiB and cache 4 MiB. */
static const tool_sample_t transient[] = {
  {"main;build", 100 * MiB, 0, 100 * MiB, 0, "builder", 1 * MiB, -1},
  {"main;build", 0, 0, 0, 100 * MiB, "builder", 1 * MiB, 4096},
  {"main;keep", 10 * MiB, 10 * MiB, 0, 0, "keeper", 4096, -1},
  {"main;cache", 5 * MiB, 0, 4 * MiB, 0, "builder", 48, -1},
  {"main;cache", 0, 0, 0, 5 * MiB, "builder", 48, 1ll << 31},
  {"main;edge", 2 * MiB, 0, 0, 0, "keeper", 100, -1},
  {"main;edge", 0, 0, 0, 2 * MiB, "keeper", 100, 1 << 19},
};
#define N_TRANSIENT (sizeof transient / sizeof transient[0])

/* The timeline: in use rises by 2 MiB every 10 ms to 100 MiB at 500 ms, falls to 0 by 600 ms, rises to
 * 10 MiB by 700 ms and stays there until 1 s; the later half written first (the reader orders the
 * points).  The peak comment says 104 MiB (build's and cache's) at 500 ms. */
#define N_POINTS 101
static const timeline_t *transient_timeline(void)
{
  static int64_t off[N_POINTS], inuse[N_POINTS], alloc[N_POINTS];
  static timeline_t t;
  int64_t total = 0, prev = 0;
  for (int k = 0; k < N_POINTS; k++) {
    int ms = 10 * k;
    int64_t now = ms <= 500 ? (int64_t)ms / 10 * 2 * MiB : ms <= 600 ? (600 - ms) / 10 * 10 * MiB
                  : ms <= 700 ? (int64_t)(ms - 600) / 10 * MiB : 10 * MiB;
    if (now > prev) total += now - prev;
    prev = now;
    int i = k <= 50 ? k + 50 : k - 51;              /* points 51..100 first, then 0..50 */
    off[i] = ms * MS;
    inuse[i] = now;
    alloc[i] = total;
  }
  perftools__profiles__timeline__init(&t);
  t.start_nanos = TOOL_SYNTHETIC_T0;
  t.offset_nanos = off, t.inuse_bytes = inuse, t.alloc_bytes = alloc;
  t.n_offset_nanos = t.n_inuse_bytes = t.n_alloc_bytes = N_POINTS;
  return &t;
}

static const char *const *peak_comment(void)
{
  static char peak[128];
  static const char *c[2] = {peak, NULL};
  snprintf(peak, sizeof peak, "mimalloc-prof peak: %d bytes at %lld", 104 * MiB,
           TOOL_SYNTHETIC_T0 + 500 * MS);
  return c;
}

static void transient_profile(char *dir, size_t len, char *path, size_t plen, bool lifetimes)
{
  tool_tmpdir(dir, len);
  snprintf(path, plen, "%s/transient.pb.gz", dir);
  tool_synthetic_labelled(path, transient, N_TRANSIENT, lifetimes, peak_comment(), transient_timeline());
}

/* The sample's label `key`, or NULL. */
static const label_t *label_of(const profile_t *p, const sample_t *s, const char *key)
{
  for (size_t i = 0; i < s->n_label; i++) {
    if (strcmp(pstr(p, s->label[i]->key), key) == 0) return s->label[i];
  }
  return NULL;
}

static probe_run_t run_ok(const char *const *args)
{
  probe_run_t r = tool_run(args, NULL);
  probe_assert_exit0(&r, args[0]);
  return r;
}

/* Asserts that `out` contains `text`. */
static void expect(const char *out, const char *text)
{
  ck_assert_msg(strstr(out, text) != NULL, "no '%s' in:\n%s", text, out);
}

/* The line of `out` that contains `words` (static), failing the test when none does. */
static const char *line_with(const char *out, const char *words)
{
  static char buf[1024];
  const char *at = strstr(out, words);
  ck_assert_msg(at != NULL, "no '%s' in:\n%s", words, out);
  const char *start = at, *end = strchr(at, '\n');
  while (start > out && start[-1] != '\n') start--;
  snprintf(buf, sizeof buf, "%.*s", (int)((end ? end : at + strlen(at)) - start), start);
  return buf;
}

/* A row with its spaces squeezed. */
static const char *squeezed(const char *line)
{
  static char buf[1024];
  size_t o = 0;
  for (const char *s = line; *s && o + 1 < sizeof buf; s++) {
    if (*s == ' ' && (o == 0 || buf[o - 1] == ' ')) continue;
    buf[o++] = *s;
  }
  while (o > 0 && buf[o - 1] == ' ') o--;
  buf[o] = '\0';
  return buf;
}

static void assert_row(const char *out, const char *words, const char *want)
{
  const char *row = squeezed(line_with(out, words));
  ck_assert_msg(strcmp(row, want) == 0, "row '%s', want '%s' in:\n%s", row, want, out);
}

/* The header states the heap's in-use, peak and allocated totals whatever the type shown, and the way to
 * the peak when in use is a tenth of it or less; -s peak_space names build, the default keep. */
START_TEST(tool_memtime_top_peak)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  probe_run_t r = run_ok((const char *const[]){"top", p, NULL});
  expect(r.out, "\nheap: 10.0 MiB in use when written, peak 104 MiB (500 ms after sampling started), "
                "117 MiB allocated\n");
  expect(r.out, "(in use when written is a tenth of the peak or less: -s peak_space shows the sites at "
                "the peak)\n");
  assert_row(r.out, "keep", "10.0 MiB 100.0% 100.0% 10.0 MiB 100.0% keep");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "-s", "peak_space", p, NULL});
  expect(r.out, ": peak_space, 104 MiB in 2 stacks");
  ck_assert_msg(strstr(r.out, "a tenth of the peak") == NULL, "%s", r.out);
  assert_row(r.out, "build", "100 MiB 96.2% 96.2% 100 MiB 96.2% build");
  assert_row(r.out, "cache", "4.00 MiB 3.8% 100.0% 4.00 MiB 3.8% cache");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "-s", "peak_objects", p, NULL});
  assert_row(r.out, "build", "102,400 96.2% 96.2% 102,400 96.2% build");
  probe_run_free(&r);
}
END_TEST

/* Without a peak comment the peak is the sum of peak_space, with no time; a profile of four types has no
 * peak, and the header says only what it has. */
START_TEST(tool_memtime_top_peak_sum)
{
  char dir[PATH_MAX], p[PATH_MAX + 32], q[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/nocomment.pb.gz", dir);
  tool_synthetic_labelled(p, transient, N_TRANSIENT, false, NULL, NULL);
  probe_run_t r = run_ok((const char *const[]){"top", p, NULL});
  expect(r.out, "\nheap: 10.0 MiB in use when written, peak 104 MiB, 117 MiB allocated\n");
  probe_run_free(&r);
  snprintf(q, sizeof q, "%s/old.pb.gz", dir);
  static const tool_stack_t old[] = {{"main;work", 3 * MiB, 1 * MiB}};
  tool_synthetic(q, old, 1, 0x400000, NULL);
  r = run_ok((const char *const[]){"top", q, NULL});
  expect(r.out, "\nheap: 1.00 MiB in use when written, 3.00 MiB allocated\n");
  probe_run_free(&r);
  /* A peak estimated below what is in use (the two estimates' noise) is said to be noise, once. */
  static const tool_sample_t above[] = {{"main;work", 3 * MiB, 2 * MiB, (3 * MiB) / 2, 0, NULL, 0, -1}};
  snprintf(q, sizeof q, "%s/above.pb.gz", dir);
  tool_synthetic_labelled(q, above, 1, false, NULL, NULL);
  r = run_ok((const char *const[]){"top", q, NULL});
  expect(r.out, "\nheap: 2.00 MiB in use when written, peak 1.50 MiB, 3.00 MiB allocated\n(in use reads more "
                "than the peak: sampling noise, the peak is estimated from half of the samples)\n");
  probe_run_free(&r);
}
END_TEST

/* tree, flame, folded, diff and merge take -s peak_space and -s peak_objects. */
START_TEST(tool_memtime_peak_in_reports)
{
  char dir[PATH_MAX], p[PATH_MAX + 32], out[PATH_MAX + 32];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  probe_run_t r = run_ok((const char *const[]){"folded", "-s", "peak_space", p, NULL});
  ck_assert_str_eq(r.out, "main;build 104857600\nmain;cache 4194304\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"tree", "-s", "peak_objects", "-n", "1", p, NULL});
  expect(r.out, "   102,400  96.2%  build\n");
  probe_run_free(&r);
  snprintf(out, sizeof out, "%s/peak.svg", dir);
  r = run_ok((const char *const[]){"flame", "-s", "peak_space", "-o", out, p, NULL});
  probe_run_free(&r);
  ck_assert(tool_exists(out));
  snprintf(out, sizeof out, "%s/merged.pb.gz", dir);
  r = run_ok((const char *const[]){"merge", "-o", out, p, p, NULL});
  probe_run_free(&r);
  r = run_ok((const char *const[]){"folded", "-s", "peak_space", out, NULL});
  ck_assert_str_eq(r.out, "main;build 209715200\nmain;cache 8388608\n");
  probe_run_free(&r);
  /* Two processes have no one peak or timeline: the merged profile's peak is the sum of theirs. */
  r = run_ok((const char *const[]){"top", out, NULL});
  expect(r.out, "\nheap: 20.0 MiB in use when written, peak 208 MiB, 234 MiB allocated\n");
  probe_run_free(&r);
  r = tool_run((const char *const[]){"timeline", out, NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %d", r.status);
  expect(r.err, "has no timeline");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"diff", "-s", "peak_space", p, out, NULL});
  expect(r.out, "peak_space: 104 MiB (BASE) -> 208 MiB (NEW), change +104 MiB\n");
  probe_run_free(&r);
}
END_TEST

/* Merging and symbolizing keep each sample's labels: samples of one stack that differ in a label stay
 * apart (symbolize, merge and diff write through pbuild.c); symbolizing keeps the timeline. */
START_TEST(tool_memtime_labels_kept)
{
  char dir[PATH_MAX], p[PATH_MAX + 32], out[PATH_MAX + 32];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  snprintf(out, sizeof out, "%s/merged.pb.gz", dir);
  probe_run_t r = run_ok((const char *const[]){"merge", "-o", out, p, p, NULL});
  probe_run_free(&r);
  profile_t *m = tool_profile(out);
  ck_assert_uint_eq(m->n_sample, N_TRANSIENT);
  size_t lifetimes = 0;
  for (size_t s = 0; s < m->n_sample; s++) {
    const label_t *l = label_of(m, m->sample[s], "lifetime");
    if (l == NULL) continue;
    lifetimes++;
    ck_assert_str_eq(pstr(m, l->num_unit), "nanoseconds");
    ck_assert_ptr_nonnull(label_of(m, m->sample[s], "thread"));
  }
  ck_assert_uint_eq(lifetimes, 3);
  profile_free(m);
  r = run_ok((const char *const[]){"symbolize", "-q", out, NULL});
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--by", "thread", "-s", "alloc_space", out, NULL});
  assert_row(r.out, "builder", "210 MiB 89.7% builder build (200 MiB)");
  probe_run_free(&r);
  /* A symbolized copy keeps the timeline (pbuild copies the field). */
  snprintf(out, sizeof out, "%s/named.pb.gz", dir);
  r = run_ok((const char *const[]){"symbolize", "-q", "-o", out, p, NULL});
  probe_run_free(&r);
  r = run_ok((const char *const[]){"timeline", "-n", "0", out, NULL});
  expect(r.out, "(101 points;");
  probe_run_free(&r);
}
END_TEST

/* --temporary: build first (all of it temporary), keep and cache at zero; a longer duration counts
 * cache; the bucket [2^19, 2^20) ns holds 1 ms and counts whole (edge's 2 MiB). */
START_TEST(tool_memtime_temporary)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  probe_run_t r = run_ok((const char *const[]){"top", "--temporary", p, NULL});
  expect(r.out, ": temporary allocations: bytes freed less than 1.00 ms after their allocation");
  expect(r.out, "(lifetimes are kept in power-of-two buckets: [524 us, 1.05 ms) holds 1.00 ms and counts "
                "whole)\n");
  expect(r.out, "\n102 MiB temporary of 117 MiB allocated (87.2%)\n");
  const char *first = strchr(strstr(r.out, "function\n"), '\n') + 1;
  ck_assert_msg(strncmp(first, "   100 MiB", 10) == 0 && strstr(first, "build") < strstr(first, "edge"),
                "build is not first:\n%s", r.out);
  assert_row(r.out, "build", "100 MiB 98.0% 100.0% 100 MiB build");
  assert_row(r.out, "edge", "2.00 MiB 2.0% 100.0% 2.00 MiB edge");
  assert_row(r.out, "keep", "0 B 0.0% 0.0% 10.0 MiB keep");
  assert_row(r.out, "cache", "0 B 0.0% 0.0% 5.00 MiB cache");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--temporary=10s", "--tag", "thread=builder", p, NULL});
  assert_row(r.out, "cache", "5.00 MiB 4.8% 100.0% 5.00 MiB cache");
  ck_assert_msg(strstr(r.out, "edge") == NULL && strstr(r.out, "keep") == NULL, "%s", r.out);
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--temporary=100us", p, NULL});
  assert_row(r.out, "build", "100 MiB 100.0% 100.0% 100 MiB build");
  assert_row(r.out, "edge", "0 B 0.0% 0.0% 2.00 MiB edge");
  probe_run_free(&r);
}
END_TEST

/* A profile without lifetimes: one line that says how to get them, exit status 1; bad durations are
 * usage errors. */
START_TEST(tool_memtime_temporary_without_lifetimes)
{
  char dir[PATH_MAX], p[PATH_MAX + 32], want[PATH_MAX + 256];
  transient_profile(dir, sizeof dir, p, sizeof p, false);
  probe_run_t r = tool_run((const char *const[]){"top", "--temporary", p, NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %d:\n%s", r.status, r.err);
  snprintf(want, sizeof want, "mimalloc-prof top: %s records no lifetimes (no freed_space samples with a "
           "lifetime label): profile the program with `mimalloc-prof run --lifetimes`, or "
           "MIMALLOC_PROF_LIFETIMES=1\n", p);
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
  static const char *const bad[][2] = {{"--temporary=5", "expected a duration"},
                                       {"--temporary=0ms", "above 0"},
                                       {"--temporary=1kb", "expected a duration"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    r = tool_run((const char *const[]){"top", bad[i][0], p, NULL}, NULL);
    tool_assert_usage_error(&r, "top", bad[i][1]);
    probe_run_free(&r);
  }
  r = tool_run((const char *const[]){"top", "--temporary", "--by", "thread", p, NULL}, NULL);
  tool_assert_usage_error(&r, "top", "--by and --temporary exclude each other");
  probe_run_free(&r);
}
END_TEST

/* --by thread splits the two threads, each with its largest site; --by size groups the bytes label in
 * power-of-two classes, in size order; --by bytes gives each value. */
START_TEST(tool_memtime_by)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  probe_run_t r = run_ok((const char *const[]){"top", "--by", "thread", "-s", "alloc_space", p, NULL});
  assert_row(r.out, "builder", "105 MiB 89.7% builder build (100 MiB)");
  assert_row(r.out, "keeper", "12.0 MiB 10.3% keeper keep (10.0 MiB)");
  ck_assert_msg(strstr(r.out, "builder") < strstr(r.out, "keeper"), "not largest first:\n%s", r.out);
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--by", "size", "-s", "alloc_space", p, NULL});
  const char *small = strstr(r.out, "32 B - 63 B"), *mid = strstr(r.out, "64 B - 127 B"),
             *page = strstr(r.out, "4.00 KiB - 8.00 KiB"), *big = strstr(r.out, "1.00 MiB - 2.00 MiB");
  ck_assert_msg(small && mid && page && big && small < mid && mid < page && page < big, "%s", r.out);
  assert_row(r.out, "1.00 MiB - 2.00 MiB", "100 MiB 85.5% 1.00 MiB - 2.00 MiB build (100 MiB)");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--by", "bytes", "-s", "alloc_space", p, NULL});
  assert_row(r.out, " 48 B ", "5.00 MiB 4.3% 48 B cache (5.00 MiB)");
  assert_row(r.out, " 100 B ", "2.00 MiB 1.7% 100 B edge (2.00 MiB)");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--by", "process", p, NULL});
  expect(r.out, "(no sample has the label process");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--by", "lifetime", "-s", "freed_space", p, NULL});
  const char *us4 = strstr(r.out, "4.10 us"), *us524 = strstr(r.out, "524 us"), *s2 = strstr(r.out, "2.15 s");
  ck_assert_msg(us4 && us524 && s2 && us4 < us524 && us524 < s2, "%s", r.out);
  probe_run_free(&r);
}
END_TEST

/* --tag: a string label, a numeric range in either syntax, alternatives of one key, keys combined; in
 * top, folded, tree and flame. */
START_TEST(tool_memtime_tag)
{
  char dir[PATH_MAX], p[PATH_MAX + 32], svg[PATH_MAX + 32];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  probe_run_t r = run_ok((const char *const[]){"folded", "-s", "alloc_space", "--tag", "thread=keeper", p,
                                               NULL});
  ck_assert_str_eq(r.out, "main;edge 2097152\nmain;keep 10485760\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"folded", "-s", "alloc_space", "--tag", "size=1k-64k", p, NULL});
  ck_assert_str_eq(r.out, "main;keep 10485760\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"folded", "-s", "alloc_space", "--tag", "bytes=:100", "--tag", "bytes=1m",
                                   p, NULL});
  ck_assert_str_eq(r.out, "main;build 104857600\nmain;cache 5242880\nmain;edge 2097152\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"folded", "-s", "alloc_space", "--tag", "bytes=-100", "--tag",
                                   "thread=keeper", p, NULL});
  ck_assert_str_eq(r.out, "main;edge 2097152\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"folded", "-s", "freed_space", "--tag", "lifetime=1ms-", p, NULL});
  ck_assert_str_eq(r.out, "main;cache 5242880\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--tag", "thread=nobody", p, NULL});
  expect(r.out, "--focus/--ignore/--tag kept 0.0% of 10.0 MiB\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"tree", "-s", "alloc_space", "--tag", "thread=keeper", p, NULL});
  ck_assert_msg(strstr(r.out, "build") == NULL && strstr(r.out, "keep") != NULL, "%s", r.out);
  probe_run_free(&r);
  snprintf(svg, sizeof svg, "%s/k.svg", dir);
  r = run_ok((const char *const[]){"flame", "--tag", "thread=keeper", "-o", svg, p, NULL});
  probe_run_free(&r);
  r = tool_run((const char *const[]){"top", "--tag", "thread", p, NULL}, NULL);
  tool_assert_usage_error(&r, "top", "expected KEY=VALUE");
  probe_run_free(&r);
}
END_TEST

/* The text chart's column heights (rows of non-blank characters), the column of '#', and the axis. */
typedef struct chart_s {
  int heights[1000], n, peak_col, rows;
} chart_t;

static void read_chart(const char *out, chart_t *c)
{
  memset(c, 0, sizeof *c);
  c->peak_col = -1;
  const char *l = strstr(out, "MiB\n");
  ck_assert_msg(l != NULL, "no chart:\n%s", out);
  l = strchr(l, '\n') + 1;
  for (; strncmp(l, "     0+", 7) != 0; l = strchr(l, '\n') + 1) {
    const char *axis = strpbrk(l, "^|");
    ck_assert_msg(axis != NULL && axis - l == 6, "not a chart row: %.80s", l);
    c->rows++;
    const char *nl = strchr(l, '\n');
    for (const char *s = axis + 1; s < nl; s++) {
      int k = (int)(s - axis - 1);
      if (*s != ' ') c->heights[k]++;
      if (*s == '#') c->peak_col = k;
      if (k + 1 > c->n) c->n = k + 1;
    }
  }
  const char *axis = strchr(l, '+');
  c->n = (int)(strchr(axis, '>') - axis - 1);
}

/* The chart rises to the peak at 500 of 1000 ms (column 36 of 72), falls to nothing by 600 ms, rises
 * to 10 MiB (a tenth: 2 rows) by 700 ms and stays; the peak is the recorded one (104 MiB, where the
 * timeline reads 100), named with the sites at it. */
START_TEST(tool_memtime_timeline_text)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  probe_run_t r = run_ok((const char *const[]){"timeline", p, NULL});
  chart_t c;
  read_chart(r.out, &c);
  ck_assert_int_eq(c.n, 72);
  ck_assert_int_eq(c.rows, 20);
  ck_assert_int_eq(c.peak_col, 36);                 /* 500 ms / (1000 ms / 72) = 36.0 */
  ck_assert_int_eq(c.heights[36], 20);
  for (int k = 1; k <= 36; k++)
    ck_assert_msg(c.heights[k] >= c.heights[k - 1], "falls at column %d:\n%s", k, r.out);
  for (int k = 37; k <= 43; k++)
    ck_assert_msg(c.heights[k] <= c.heights[k - 1], "rises at column %d:\n%s", k, r.out);
  ck_assert_int_eq(c.heights[43], 0);               /* 600 ms is in column 43 */
  for (int k = 51; k < 72; k++)
    ck_assert_msg(c.heights[k] == 2, "column %d: %d rows:\n%s", k, c.heights[k], r.out);
  expect(r.out, "\n   100^");                         /* the timeline's highest point */
  const char *axis = strstr(r.out, ">s\n");                /* 0 under the '+', 0.5 s under column 36 */
  ck_assert_msg(axis != NULL, "time axis:\n%s", r.out);
  ck_assert_msg(strncmp(axis + 3, "      0 ", 8) == 0 && strncmp(axis + 3 + 6 + 36, "0.5", 3) == 0 &&
                strncmp(axis + 3 + 6 + 72, "1\n", 2) == 0, "time axis:\n%s", r.out);
  expect(r.out, "peak (#): 104 MiB in use at 500 ms; 10.0 MiB in use when written; 117 MiB allocated\n"
                "(the timeline reads 100 MiB there: the peak is estimated with other samples, unbiased by the "
                "choice)\n");
  expect(r.out, "allocation sites at the peak");
  assert_row(r.out, "build", "100 MiB 96.2% build");
  assert_row(r.out, "cache", "4.00 MiB 3.8% cache");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"timeline", "--width", "20", "--height", "5", "-n", "0", p, NULL});
  read_chart(r.out, &c);
  ck_assert_int_eq(c.n, 20);
  ck_assert_int_eq(c.rows, 5);
  ck_assert_int_eq(c.peak_col, 10);
  ck_assert_msg(strstr(r.out, "allocation sites") == NULL, "%s", r.out);
  probe_run_free(&r);
}
END_TEST

/* A profile without a timeline: one line and exit status 1; entries that do not line up or fit are left
 * out, said once. */
START_TEST(tool_memtime_timeline_missing)
{
  char dir[PATH_MAX], p[PATH_MAX + 32], want[PATH_MAX + 256];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/none.pb.gz", dir);
  int64_t off[3] = {-5, 0, 10}, inuse[2] = {1, 2}, alloc[3] = {1, 2, 3};
  timeline_t t = PERFTOOLS__PROFILES__TIMELINE__INIT;     /* a negative time; a third point without in-use */
  t.start_nanos = 0;
  t.offset_nanos = off, t.n_offset_nanos = 3;
  t.inuse_bytes = inuse, t.n_inuse_bytes = 2;
  t.alloc_bytes = alloc, t.n_alloc_bytes = 3;
  tool_synthetic_labelled(p, transient, N_TRANSIENT, false, NULL, &t);
  probe_run_t r = tool_run((const char *const[]){"timeline", "-n", "0", p, NULL}, NULL);
  probe_assert_exit0(&r, "timeline");
  snprintf(want, sizeof want, "mimalloc-prof timeline: %s: 2 timeline points do not line up or fit and are "
           "left out\n", p);
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
  tool_synthetic_labelled(p, transient, N_TRANSIENT, false, NULL, NULL);
  r = tool_run((const char *const[]){"timeline", p, NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %d:\n%s", r.status, r.err);
  snprintf(want, sizeof want, "mimalloc-prof timeline: %s has no timeline (the library writes one into every "
           "heap profile; merge of several profiles and diff leave it out)\n", p);
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
}
END_TEST

/* The SVG picture renders in Chromium without errors: the area spans the plot, the peak's mark is at
 * 500 of 1000 ms, its label and the sites are there; a screenshot is kept for people to look at. */
START_TEST(tool_memtime_timeline_svg)
{
  char dir[PATH_MAX], p[PATH_MAX + 32], svg[PATH_MAX + 32], png[PATH_MAX];
  transient_profile(dir, sizeof dir, p, sizeof p, true);
  snprintf(svg, sizeof svg, "%s/timeline.svg", dir);
  probe_run_t r = run_ok((const char *const[]){"timeline", "--title", "transient <peak> & fall", "-o", svg, p,
                                               NULL});
  probe_run_free(&r);
  chromium_t c;
  chromium_open_file(&c, dir, svg, 960, 620);
  json_t *v = chromium_eval(&c, "(function(){const a=document.querySelector('path.inuse').getBBox();"
                                "const k=document.querySelector('g.peak circle');"
                                "return [a.x,a.width,+k.getAttribute('cx'),"
                                "document.querySelector('g.peak text').textContent,"
                                "document.querySelector('text.title').textContent,"
                                "document.querySelector('g.sites').textContent,"
                                "document.querySelectorAll('g.yticks text').length,"
                                "document.querySelector('text.xlabel').textContent];})()");
  ck_assert_double_eq_tol(json_number_value(json_array_get(v, 0)), 90, 0.5);
  ck_assert_double_eq_tol(json_number_value(json_array_get(v, 1)), 830, 0.5);
  ck_assert_double_eq_tol(json_number_value(json_array_get(v, 2)), 90 + 830 / 2.0, 0.5);
  ck_assert_str_eq(json_string_value(json_array_get(v, 3)), "peak 104 MiB at 500 ms");
  ck_assert_str_eq(json_string_value(json_array_get(v, 4)), "transient <peak> & fall");
  expect(json_string_value(json_array_get(v, 5)), "build");
  ck_assert_int_ge(json_integer_value(json_array_get(v, 6)), 4);
  ck_assert_str_eq(json_string_value(json_array_get(v, 7)), "time since the first point (s)");
  json_decref(v);
  snprintf(png, sizeof png, "%s/timeline-screenshot.png", probe_getenv("MPROF_TEST_OUTDIR"));
  chromium_screenshot(&c, png);
  ck_assert_msg(c.errors[0] == '\0', "errors:\n%s", c.errors);
  chromium_stop(&c);
}
END_TEST

Suite *tool_memtime_suite(void)
{
  Suite *s = suite_create("tool_memtime");
  TCase *tc = tcase_create("tool_memtime");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, tool_memtime_top_peak);
  tcase_add_test(tc, tool_memtime_top_peak_sum);
  tcase_add_test(tc, tool_memtime_peak_in_reports);
  tcase_add_test(tc, tool_memtime_labels_kept);
  tcase_add_test(tc, tool_memtime_temporary);
  tcase_add_test(tc, tool_memtime_temporary_without_lifetimes);
  tcase_add_test(tc, tool_memtime_by);
  tcase_add_test(tc, tool_memtime_tag);
  tcase_add_test(tc, tool_memtime_timeline_text);
  tcase_add_test(tc, tool_memtime_timeline_missing);
  tcase_add_test(tc, tool_memtime_timeline_svg);
  suite_add_tcase(s, tc);
  return s;
}

#endif
