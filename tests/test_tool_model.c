/* test_tool_model.c - the report model every command shares (tools/view.c): the profile's drop_frames,
 * folding with and without --lines, and frames without a source line, each compared with what
 * `go tool pprof` reports on the same file (those comparisons are skipped without go on PATH).
 *
 * Percentages: ours print one decimal, pprof's two; the same estimate rounds to within 0.05 + 0.005 of
 * each other, so rows agree when they differ by at most 0.06 points. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cxx_names.h"
#include "pprof_util.h"
#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

#define PCT_TOL 0.06

/* flat% of the first row of a top listing (ours or pprof's) whose line ends with `suffix` (after a space,
 * or a '/': pprof prints a file's path as the compiler had it): the first field ending in '%'; -1 when
 * there is no such row. */
static double flat_pct(const char *out, const char *suffix)
{
  size_t k = strlen(suffix);
  for (const char *l = out; *l != '\0';) {
    const char *nl = strchr(l, '\n');
    size_t n = nl != NULL ? (size_t)(nl - l) : strlen(l);
    if (n > k && memcmp(l + n - k, suffix, k) == 0 && (l[n - k - 1] == ' ' || l[n - k - 1] == '/')) {
      for (const char *f = l; f < l + n; f++) {
        if (*f == '%') {
          const char *start = f;
          while (start > l && start[-1] != ' ') start--;
          return strtod(start, NULL);
        }
      }
    }
    if (nl == NULL) break;
    l = nl + 1;
  }
  return -1;
}

/* flat% of the first row of a top listing that contains `text`; -1 when there is none. */
static double flat_pct_of(const char *out, const char *text)
{
  const char *at = strstr(out, text);
  if (at == NULL) return -1;
  while (at > out && at[-1] != '\n') at--;
  const char *pct = strchr(at, '%'), *nl = strchr(at, '\n');
  if (pct == NULL || (nl != NULL && pct > nl)) return -1;
  while (pct > at && pct[-1] != ' ') pct--;
  return strtod(pct, NULL);
}

/* Whether any line of out contains `text`. */
static bool mentions(const char *out, const char *text)
{
  return strstr(out, text) != NULL;
}

static probe_run_t tool_ok(const char *const *args)
{
  probe_run_t r = tool_run(args, NULL);
  probe_assert_exit0(&r, args[0]);
  return r;
}

/* tests/sym_prog's profile at rate 1 (every byte counted: the shares are exact), symbolized by run. */
static void sym_prog_profile(char *path, size_t len)
{
  char dir[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  snprintf(path, len, "%s/sym.pb.gz", dir);
  const char *prog = probe_getenv("MPROF_TEST_SYM_PROG");
  probe_run_t r = tool_ok((const char *const[]){"run", "-r", "1", "-o", path, prog, NULL});
  probe_run_free(&r);
}

/* A program linked with the static library: the library's own frames (mprof_*, the unwinder's) and
 * malloc are the program's, and only the profile's drop_frames ("^(malloc|...|mprof_.*)$") hides
 * them.  pprof_probe's leak mode: 1000 x 1000 B live from leaky_function, at rate 4096 (seed fixed).
 * Every report must charge leaky_function what go tool pprof charges it (99.4% here: printf's buffer
 * is the rest), and none may show a frame of the library. */
START_TEST(model_static_link_drop_frames)
{
  const char *probe = probe_getenv("MPROF_TEST_STATIC_PROBE");
  if (access(probe, X_OK) != 0) return;                /* no static library built: nothing to run */
  char dir[PATH_MAX], prefix[PATH_MAX + 16], path[PATH_MAX + 64], env[PATH_MAX + 64];
  tool_tmpdir(dir, sizeof dir);
  snprintf(prefix, sizeof prefix, "%s/prof", dir);
  snprintf(env, sizeof env, "MIMALLOC_PROF_PREFIX=%s", prefix);
  probe_opts_t opts = {.env = (const char *const[]){"MIMALLOC_PROF=1", "MIMALLOC_PROF_FINAL=1",
                                                    "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_SEED=35",
                                                    env, NULL}};
  probe_run_t r = probe_run(probe, (const char *const[]){"leak", "1000", "1000", NULL}, &opts);
  probe_assert_exit0(&r, "static_probe");
  snprintf(path, sizeof path, "%s.%d.000000.f.pb.gz", prefix, (int)r.pid);
  probe_run_free(&r);
  probe_run_t s = tool_ok((const char *const[]){"symbolize", path, NULL});
  probe_run_free(&s);

  probe_run_t top = tool_ok((const char *const[]){"top", path, NULL});
  double ours = flat_pct(top.out, "leaky_function");
  ck_assert_msg(ours > 90.0, "top:\n%s", top.out);
  probe_run_t tree = tool_ok((const char *const[]){"tree", path, NULL});
  probe_run_t folded = tool_ok((const char *const[]){"folded", path, NULL});
  probe_run_t lines = tool_ok((const char *const[]){"top", "--lines", path, NULL});
  const probe_run_t *reports[] = {&top, &tree, &folded, &lines};
  for (size_t i = 0; i < 4; i++) {
    ck_assert_msg(!mentions(reports[i]->out, "mprof_") && !mentions(reports[i]->out, "unwind_") &&
                  !mentions(reports[i]->out, ";malloc") && !mentions(reports[i]->out, " malloc\n"),
                  "a frame of the library in report %zu:\n%s", i, reports[i]->out);
  }
  ck_assert_msg(flat_pct_of(lines.out, "  leaky_function tests/pprof_probe.c:") == ours, "top --lines:\n%s",
                lines.out);
  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {
    probe_run_t ref = go_pprof(go, (const char *const[]){"-top", "-sample_index=inuse_space", path, NULL});
    probe_assert_exit0(&ref, "go tool pprof -top");
    double theirs = flat_pct(ref.out, "leaky_function");
    ck_assert_msg(theirs > 0 && fabs(ours - theirs) <= PCT_TOL, "ours %.2f, pprof %.2f:\n%.1000s\n%.1000s",
                  ours, theirs, top.out, ref.out);
    probe_run_free(&ref);
  }
  for (size_t i = 0; i < 4; i++) probe_run_free((probe_run_t *)reports[i]);
}
END_TEST

/* --fold and --fold-alloc match the function's full name, so they fold with --lines as without: folding
 * the inlined Pool<double>::make charges its 1 MiB (72.5%) to fill's line 34, as pprof's -hide of the
 * same expression does with -lines; --fold-alloc takes std::__new_allocator<...>::allocate away, and both
 * fold in top, tree, folded and flame alike (with --full-names, so that the names checked are whole). */
START_TEST(model_fold_with_lines)
{
  char path[PATH_MAX + 16], dir[PATH_MAX], svg[PATH_MAX + 16];
  sym_prog_profile(path, sizeof path);
  static const char re[] = "::make\\(" MPROF_SIZE_T_NAME "\\)$|^std::__new_allocator<.*>::allocate";
  probe_run_t top =
    tool_ok((const char *const[]){"top", "--lines", "--full-names", "--fold", re, path, NULL});
  double fill = flat_pct(top.out, "tests/sym_prog.cc:34");
  ck_assert_msg(fill > 70.0 && fill < 75.0, "top --lines --fold:\n%.1500s", top.out);
  ck_assert_msg(!mentions(top.out, "::make("), "top --lines --fold:\n%.1500s", top.out);
  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {
    char hide[128];
    snprintf(hide, sizeof hide, "-hide=%s", re);
    probe_run_t ref =
      go_pprof(go, (const char *const[]){"-top", "-lines", "-sample_index=inuse_space", hide, path, NULL});
    probe_assert_exit0(&ref, "go tool pprof -top -lines -hide");
    double theirs = flat_pct(ref.out, "sym_prog.cc:34");
    ck_assert_msg(fabs(fill - theirs) <= PCT_TOL, "ours %.2f, pprof %.2f:\n%.1000s\n%.1000s", fill, theirs,
                  top.out, ref.out);
    probe_run_free(&ref);
  }
  probe_run_free(&top);

  tool_tmpdir(dir, sizeof dir);
  snprintf(svg, sizeof svg, "%s/f.svg", dir);
  static const char make_re[] = "::make\\(" MPROF_SIZE_T_NAME "\\)$";
  const char *fold[] = {"--lines", "--full-names", "--fold-alloc", "--fold", make_re};
  probe_run_t tree =
    tool_ok((const char *const[]){"tree", fold[0], fold[1], fold[2], fold[3], fold[4], path, NULL});
  probe_run_t folded =
    tool_ok((const char *const[]){"folded", fold[0], fold[1], fold[2], fold[3], fold[4], path, NULL});
  probe_run_t flame = tool_ok(
    (const char *const[]){"flame", fold[0], fold[1], fold[2], fold[3], fold[4], "-o", svg, path, NULL});
  probe_run_t ftop = tool_ok(
    (const char *const[]){"top", fold[0], fold[1], fold[2], fold[3], fold[4], "-n", "1000", path, NULL});
  char *svg_text = tool_file_text(svg);
  const char *outs[] = {tree.out, folded.out, ftop.out, svg_text};
  for (size_t i = 0; i < 4; i++) {
    ck_assert_msg(!mentions(outs[i], "allocate(" MPROF_SIZE_T_NAME ", void const*)") &&
                  !mentions(outs[i], "::make("),
                  "an allocator frame left by --fold-alloc --lines in report %zu:\n%.1500s", i, outs[i]);
    ck_assert_msg(mentions(outs[i], "Pool&lt;double&gt;::fill") || mentions(outs[i], "Pool<double>::fill"),
                  "report %zu:\n%.1500s", i, outs[i]);
  }
  free(svg_text);
  probe_run_free(&tree);
  probe_run_free(&folded);
  probe_run_free(&flame);
  probe_run_free(&ftop);
}
END_TEST

/* A location without line information shows none: _start (crt1.o has no DWARF; addr2line says ??:?)
 * has line 0 and no file in the profile, a row without file:line in top --lines, and go tool pprof -raw
 * prints it with line 0. */
START_TEST(model_location_without_line)
{
  char path[PATH_MAX + 16];
  sym_prog_profile(path, sizeof path);
  profile_t *p = tool_profile(path);
  pindex_t ix;
  pindex_init(&ix, p);
  size_t seen = 0;
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    for (size_t k = 0; k < l->n_line; k++) {
      if (strcmp(tool_line_name(p, &ix, l, k), "_start") != 0) continue;
      const function_t *fn = pindex_function(&ix, l->line[k]->function_id);
      ck_assert_int_eq(l->line[k]->line, 0);
      ck_assert_str_eq(pstr(p, fn->filename), "");
      seen++;
    }
  }
  ck_assert_uint_ge(seen, 1);
  pindex_free(&ix);
  profile_free(p);
  probe_run_t top = tool_ok((const char *const[]){"top", "--lines", "-n", "1000", path, NULL});
  ck_assert_msg(flat_pct(top.out, "_start") == 0.0, "top --lines:\n%s", top.out);
  probe_run_free(&top);
  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {
    probe_run_t raw = go_pprof(go, (const char *const[]){"-raw", path, NULL});
    probe_assert_exit0(&raw, "go tool pprof -raw");
    const char *at = strstr(raw.out, " _start ");
    ck_assert_msg(at != NULL && strncmp(at, " _start :0 ", 10) == 0, "go tool pprof -raw:\n%s", raw.out);
    probe_run_free(&raw);
  }
}
END_TEST

/* A copy of the profile at src, with drop_frames and keep_frames set (NULL: none), to dst. */
static void with_frames_res(const char *src, const char *dst, const char *drop, const char *keep)
{
  profile_t *p = tool_profile(src);
  profile_t h = *p;
  char **strings = malloc((p->n_string_table + 2) * sizeof *strings);
  ck_assert_ptr_nonnull(strings);
  memcpy(strings, p->string_table, p->n_string_table * sizeof *strings);
  strings[p->n_string_table] = (char *)(drop != NULL ? drop : "");
  strings[p->n_string_table + 1] = (char *)(keep != NULL ? keep : "");
  h.string_table = strings;
  h.n_string_table = p->n_string_table + 2;
  h.drop_frames = (int64_t)p->n_string_table;
  h.keep_frames = (int64_t)p->n_string_table + 1;
  pbuild_t *b = pbuild_new(&h);
  ck_assert(b != NULL && pb_add_profile(b, p, 1) && !pbuild_failed(b));
  char err[512];
  ck_assert_msg(profile_write(pbuild_profile(b), dst, err, sizeof err) == 0, "%s", err);
  pbuild_free(b);
  free(strings);
  profile_free(p);
}

/* drop_frames and keep_frames on known stacks (main;alpha;grow 3 MiB, main;alpha;operator new 2 MiB,
 * main;beta;gamma 1 MiB in use, 6 MiB in all): dropping alpha cuts both of its stacks at main (main's
 * flat: 5/6 = 83.3%); keep_frames alpha with drop_frames alpha|grow keeps alpha and cuts grow (alpha's
 * flat: 3/6 = 50.0%); "operator new(unsigned long)" is matched up to its '(' (pprof's simplifyFunc), so
 * ^(operator new)$ drops it (alpha: 2/6 = 33.3%); an expression with an interval or a back-reference is
 * ignored (a hostile profile could make glibc's regcomp or regexec take exponential time), and the
 * reports come out as without it (grow: 50.0%). */
START_TEST(model_drop_frames_rules)
{
  char dir[PATH_MAX], src[PATH_MAX + 16], dst[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(src, sizeof src, "%s/src.pb.gz", dir);
  snprintf(dst, sizeof dst, "%s/dst.pb.gz", dir);
  static const tool_stack_t stacks[] = {
    {"main;alpha;grow", 4 << 20, 3 << 20},
    {"main;alpha;operator new(unsigned long)", 2 << 20, 2 << 20},
    {"main;beta;gamma", 2 << 20, 1 << 20},
  };
  tool_synthetic(src, stacks, 3, 0x555500000000ull, NULL);
  static const struct {
    const char *drop, *keep, *row;
    double pct;
  } cases[] = {
    {"alpha", NULL, "main", 83.3},
    {"alpha|grow", "alpha", "alpha", 50.0},
    {"operator new", NULL, "alpha", 33.3},
    {"((((alpha){1,200}){1,200}){1,200}){1,200}", NULL, "grow", 50.0},
    {"(a)\\1|alpha", NULL, "grow", 50.0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    with_frames_res(src, dst, cases[i].drop, cases[i].keep);
    probe_run_t top = tool_ok((const char *const[]){"top", dst, NULL});
    double pct = flat_pct(top.out, cases[i].row);
    ck_assert_msg(fabs(pct - cases[i].pct) < 0.01, "drop %s keep %s: %s %.1f%%, want %.1f%%:\n%s",
                  cases[i].drop, cases[i].keep ? cases[i].keep : "-", cases[i].row, pct, cases[i].pct, top.out);
    probe_run_free(&top);
  }
}
END_TEST

/* C++ names are short by default in every report (template arguments "<>", no parameters, no return
 * type), whole with --full-names, and whole in the profile; folding still sees the whole name (the
 * --fold-alloc expression matches std::__new_allocator<...>::allocate by its template and parameters). */
START_TEST(model_short_names)
{
  char path[PATH_MAX + 16], dir[PATH_MAX], svg[PATH_MAX + 16];
  sym_prog_profile(path, sizeof path);
  probe_run_t top = tool_ok((const char *const[]){"top", "-n", "1000", path, NULL});
  ck_assert_msg(flat_pct(top.out, "shapes::Pool<>::make") > 70.0, "%.3000s", top.out);
  ck_assert_msg(flat_pct(top.out, "std::vector<>::emplace_back<>") == 0.0, "%.3000s", top.out);
  ck_assert_msg(!mentions(top.out, "char_traits") && !mentions(top.out, "(" MPROF_SIZE_T_NAME),
                "a long name left:\n%.3000s", top.out);
  probe_run_t full = tool_ok((const char *const[]){"top", "--full-names", "-n", "1000", path, NULL});
  ck_assert_msg(flat_pct(full.out, "shapes::Pool<double>::make(" MPROF_SIZE_T_NAME ")") > 70.0, "%.3000s",
                full.out);
  probe_run_t folded = tool_ok((const char *const[]){"folded", "--fold-alloc", path, NULL});
  ck_assert_msg(!mentions(folded.out, "__new_allocator<>::allocate") && mentions(folded.out, "build_buffer"),
                "%.3000s", folded.out);
  tool_tmpdir(dir, sizeof dir);
  snprintf(svg, sizeof svg, "%s/f.svg", dir);
  probe_run_t flame = tool_ok((const char *const[]){"flame", "-o", svg, path, NULL});
  char *text = tool_file_text(svg);
  ck_assert_msg(mentions(text, "shapes::Pool&lt;&gt;::make") && !mentions(text, "char_traits"), "%.3000s",
                text);
  free(text);
  profile_t *p = tool_profile(path);                  /* the profile keeps the whole names */
  bool whole = false;
  for (size_t i = 0; i < p->n_function; i++)
    whole |= strcmp(pstr(p, p->function[i]->name), "shapes::Pool<double>::make(" MPROF_SIZE_T_NAME ")") == 0;
  ck_assert(whole);
  profile_free(p);
  probe_run_t *runs[] = {&top, &full, &folded, &flame};
  for (size_t i = 0; i < 4; i++) probe_run_free(runs[i]);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Standard errors (top and tree --stderr, diff's noise marks)
--------------------------------------------------------------------------------------------------- */

/* A final profile of pprof_probe's leak mode (n blocks of 1000 B live at exit from leaky_function) at
 * rate 4096 with this seed, into path. */
static void leak_profile(const char *dir, const char *probe, unsigned seed, const char *n, char *path,
                         size_t len)
{
  char prefix[PATH_MAX + 32], env_prefix[PATH_MAX + 64], env_seed[64];
  snprintf(prefix, sizeof prefix, "%s/leak%u", dir, seed);
  snprintf(env_prefix, sizeof env_prefix, "MIMALLOC_PROF_PREFIX=%s", prefix);
  snprintf(env_seed, sizeof env_seed, "MIMALLOC_PROF_SEED=%u", seed);
  probe_opts_t opts = {.env = (const char *const[]){"MIMALLOC_PROF=1", "MIMALLOC_PROF_FINAL=1",
                                                    "MIMALLOC_PROF_SAMPLE_RATE=4096", env_seed, env_prefix,
                                                    NULL}};
  probe_run_t r = probe_run(probe, (const char *const[]){"leak", n, "1000", NULL}, &opts);
  probe_assert_exit0(&r, "pprof_probe leak");
  snprintf(path, len, "%s.%d.000000.f.pb.gz", prefix, (int)r.pid);
  probe_run_free(&r);
}

/* An amount as the reports print it ("996 KiB", "59.3 KiB", "512 B") at s, in bytes. */
static double human_bytes(const char *s)
{
  char *end;
  double v = strtod(s, &end);
  while (*end == ' ') end++;
  if (strncmp(end, "KiB", 3) == 0) return v * 1024;
  if (strncmp(end, "MiB", 3) == 0) return v * 1024 * 1024;
  if (strncmp(end, "GiB", 3) == 0) return v * 1024 * 1024 * 1024;
  ck_assert_msg(strncmp(end, "B", 1) == 0, "not an amount: %s", s);
  return v;
}

/* The flat value and its standard error in the row of `name` of `top --stderr`. */
static void stderr_row(const char *out, const char *name, double *value, double *se)
{
  size_t k = strlen(name);
  for (const char *l = out; *l != '\0';) {
    const char *nl = strchr(l, '\n');
    size_t n = nl != NULL ? (size_t)(nl - l) : strlen(l);
    if (n > k && memcmp(l + n - k, name, k) == 0 && l[n - k - 1] == ' ') {
      const char *pm = strstr(l, "\u00b1");
      ck_assert_msg(pm != NULL && pm < l + n, "no standard error in: %.*s", (int)n, l);
      *value = human_bytes(l + strspn(l, " "));
      *se = human_bytes(pm + 2);
      return;
    }
    if (nl == NULL) break;
    l = nl + 1;
  }
  ck_abort_msg("no row %s in:\n%.2000s", name, out);
}

/* top --stderr against the spread of the estimates over 20 seeds.  1000 live blocks of s = 1000 B at
 * R = 4096: p = 1 - e^(-s/R) = 0.2166; the estimate's true standard deviation is
 * sqrt(n s^2 (1 - p) / p) = 60,140 B (6.0%).  The printed standard error is the estimator
 * sqrt(B s (1 - p) / p), which moves with the estimate B (by about half its 6%: 3%); its mean over 20
 * seeds must lie within 10% of 60,140 B (more than 10 standard deviations of that mean), and the truth
 * within 2 printed standard errors in at least 16 of 20 runs (95.4% each; fewer than 16: P < 0.005). */
START_TEST(model_stderr_spread)
{
  char dir[PATH_MAX], path[PATH_MAX + 64];
  tool_tmpdir(dir, sizeof dir);
  const char *probe = probe_getenv("MPROF_TEST_PPROF_PROBE");
  const double truth = 1000.0 * 1000, sigma = 60140;
  double se_sum = 0;
  int covered = 0;
  for (unsigned seed = 101; seed <= 120; seed++) {
    leak_profile(dir, probe, seed, "1000", path, sizeof path);
    probe_run_t top = tool_ok((const char *const[]){"top", "--stderr", path, NULL});
    ck_assert_msg(strstr(top.out, "stderr") != NULL, "%s", top.out);
    double value, se;
    stderr_row(top.out, "leaky_function", &value, &se);
    se_sum += se;
    covered += fabs(value - truth) < 2 * se;
    probe_run_free(&top);
  }
  ck_assert_msg(fabs(se_sum / 20 - sigma) < 0.1 * sigma, "mean standard error %.0f B, expected %.0f B",
                se_sum / 20, sigma);
  ck_assert_msg(covered >= 16, "the truth within 2 standard errors in %d of 20 runs", covered);
  probe_run_t tree = tool_ok((const char *const[]){"tree", "--stderr", path, NULL});
  ck_assert_msg(strstr(tree.out, "\u00b1") != NULL, "%s", tree.out);
  probe_run_free(&tree);
}
END_TEST

/* diff marks a change within 2 standard errors (sqrt(se_base^2 + se_new^2): the runs are independent)
 * as noise, by default: two runs of the same program with other seeds are marked exactly when the
 * standard errors top --stderr prints for them say so; a real change (1000 -> 2000 blocks: +977 KiB
 * against a standard error of about sqrt(60^2 + 85^2) = 104 KB) is not; --noise 0 marks nothing. */
START_TEST(model_diff_noise)
{
  char dir[PATH_MAX], a[PATH_MAX + 64], b[PATH_MAX + 64], c[PATH_MAX + 64];
  tool_tmpdir(dir, sizeof dir);
  const char *probe = probe_getenv("MPROF_TEST_PPROF_PROBE");
  leak_profile(dir, probe, 35, "1000", a, sizeof a);
  leak_profile(dir, probe, 36, "1000", b, sizeof b);
  leak_profile(dir, probe, 37, "2000", c, sizeof c);
  double va, sa, vb, sb;
  probe_run_t ta = tool_ok((const char *const[]){"top", "--stderr", a, NULL});
  probe_run_t tb = tool_ok((const char *const[]){"top", "--stderr", b, NULL});
  stderr_row(ta.out, "leaky_function", &va, &sa);
  stderr_row(tb.out, "leaky_function", &vb, &sb);
  bool noise = fabs(vb - va) < 2 * sqrt(sa * sa + sb * sb);
  probe_run_t same = tool_ok((const char *const[]){"diff", a, b, NULL});
  ck_assert_msg(strstr(same.out, "(noise): a flat change within 2 standard errors") != NULL, "%s", same.out);
  if (fabs(vb - va) > 0.02 * (sa + sb))                     /* not too close to call at 3 digits */
    ck_assert_msg((strstr(same.out, "(noise) leaky_function") != NULL) == noise,
                  "%.0f -> %.0f (se %.0f, %.0f):\n%s", va, vb, sa, sb, same.out);
  probe_run_t grew = tool_ok((const char *const[]){"diff", a, c, NULL});
  ck_assert_msg(strstr(grew.out, "  leaky_function") != NULL &&
                strstr(grew.out, "(noise) leaky_function") == NULL, "%s", grew.out);
  probe_run_t off = tool_ok((const char *const[]){"diff", "--noise", "0", a, b, NULL});
  ck_assert_msg(strstr(off.out, "(noise)") == NULL, "%s", off.out);
  probe_run_t bad = tool_run((const char *const[]){"diff", "--noise", "-1", a, b, NULL}, NULL);
  tool_assert_usage_error(&bad, "diff", "--noise");
  probe_run_t *runs[] = {&ta, &tb, &same, &grew, &off, &bad};
  for (size_t i = 0; i < 6; i++) probe_run_free(runs[i]);
}
END_TEST

Suite *tool_model_suite(void)
{
  Suite *s = suite_create("model");
  TCase *tc = tcase_create("model");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_add_test(tc, model_static_link_drop_frames);
  tcase_add_test(tc, model_fold_with_lines);
  tcase_add_test(tc, model_location_without_line);
  tcase_add_test(tc, model_drop_frames_rules);
  tcase_add_test(tc, model_short_names);
  tcase_add_test(tc, model_stderr_spread);
  tcase_add_test(tc, model_diff_noise);
  suite_add_tcase(s, tc);
  return s;
}

#else

Suite *tool_model_suite(void)
{
  return suite_create("model");
}

#endif
