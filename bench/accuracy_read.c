/* accuracy_read.c - reads the heap profiles bench/accuracy's workloads wrote, compares the estimates with
 * the truth each run printed, and prints the report.
 *
 * Usage: accuracy_read DIR...
 *   Each DIR is one configuration (workload, rate, unwinder): DIR/label (one line naming it) and, for
 *   seeds 1..N, DIR/<seed>.truth (accuracy_work's output, format in accuracy_work.c) and
 *   DIR/<seed>.pb.gz (the profile).
 *
 * Attribution: a sample belongs to the row named by its innermost frame's function (the library names
 * every location with dladdr; the workload's sites are exported).  A location that is the library's
 * dropped-sample frame, MI_PROF_FRAME_DROPPED(reason) = reason + 1, goes to "[dropped (REASON)]": by
 * name ("[mimalloc-prof: dropped (REASON)]") or, in a library that writes the frame without naming it,
 * as a location with no mapping, no line and address reason (pc - 1).  Anything else is "[other]".
 * "[total]" is every sample of the profile.
 *
 * Sample types: the profile's alloc_*, inuse_*, peak_* and freed_* (the last with MIMALLOC_PROF_LIFETIMES,
 * which bench/accuracy sets), and temp_*: the freed_* of the freed samples whose lifetime label is under
 * ACC_TEMP_NS.  Truth: alloc_* and inuse_* from each site line; freed_* = alloc_* - inuse_* (truth,
 * variance, third cumulant and expected samples alike: every block not live at the dump was freed
 * through the library); peak_* and temp_* only where the workload printed "peak" and "temp" lines (a
 * row shows a type only where it has its truth, or, [other] and [dropped] rows, where some row has).
 *
 * Statistics, per row and sample type, over the N seeds (one process each; the seed changes only the
 * library's sampling, not what the workload does):
 *   D_i = estimate_i - truth_i (the truth may differ between runs: the fork workload's does);
 *   bias = mean(D) / mean(truth);
 *   sd theory = sqrt(mean_i Var_i), Var_i = sum over the run's allocations of (1-p)/p (objects) or
 *     s^2 (1-p)/p (bytes): the exact variance of one run's estimate under the documented rule (each
 *     allocation sampled independently with p = 1 - exp(-s/R) and weighted 1/p);
 *   sd meas = the sample standard deviation of the D_i (N - 1 in the denominator);
 *   z = mean(D) / (sd theory / sqrt(N)): approximately N(0,1) when the estimator is unbiased with the
 *     documented variance (central limit over N * E[n] samples); where no closed form exists (shares:
 *     ratios of two estimates) sd meas is used instead and the statistic is Student's t with N - 1
 *     degrees of freedom, marked "t".  With sd theory = 0 (every block certainly sampled), z is 0 when
 *     every D_i is 0 and infinite otherwise;
 *   gate = 4 sd / sqrt(N) / mean(truth): the relative bias at which |z| reaches 4;
 *   E[n] = expected samples per run among the row's allocations (alloc types) or live blocks (inuse);
 *   skew = the skewness of z, k3 / sd theory^3 / sqrt(N) (k3: the third cumulant of one run's
 *     estimate, from the truth file): the normal tail at 4 moves by skew * 15/6 (Cornish-Fisher);
 *     "skewed" above 0.1.  "p~1": fewer than one unsampled block expected over all runs; such a row is
 *     exact except when a block is missed (then |z| ~ 100).
 * A row fails when |z| > 4.  The report sums, over the gated rows, the probability of that under an
 * unbiased library (normal tail moved by the skew; Student's t for t rows; the miss probability for p~1
 * rows): a union bound on a false failure of the whole run.  "sd!" marks a measured sd outside the
 * range (N-1) s^2 / sigma^2 ~ chi^2(N-1) allows with two-sided probability 1e-4 (not a failure: a hint
 * that samples are not independent).  Exit status: 0 all rows and acceptance checks pass, 1 some fail,
 * 2 unreadable input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"

#include "accuracy.h"

typedef Perftools__Profiles__Profile profile_t;

#define TYPES      10             /* in pairs: objects, bytes */
#define PAIRS      (TYPES / 2)
enum { PAIR_ALLOC, PAIR_INUSE, PAIR_PEAK, PAIR_FREED, PAIR_TEMP };
#define MAX_ROWS   64
#define MAX_MEMBERS 8
#define MAX_CHECKS 8
#define MAX_INFOS  8
#define Z_GATE     4.0
#define SKEW_NOTE  0.1            /* |skewness of z| above which the normal 4-sigma tail is off > 2.5x */

static const char *const type_name[TYPES] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
                                             "peak_objects",  "peak_space",  "freed_objects", "freed_space",
                                             "temp_objects",  "temp_space"};
static const char *const drop_name[] = {"memory", "too_large", "alignment", "no_arena",
                                        "unwind", "stacks", "fork", "arena_full"};

static _Noreturn void fail(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("accuracy_read: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static void *xcalloc(size_t n, size_t size)
{
  void *p = calloc(n, size);
  if (p == NULL) fail("out of memory");
  return p;
}

/* ---------------------------------------------------------------------------------------------------
   Rows
--------------------------------------------------------------------------------------------------- */

typedef enum { ROW_SITE, ROW_GROUP, ROW_SHARE, ROW_DROPPED, ROW_OTHER, ROW_TOTAL } row_kind_t;

typedef struct obs_s {            /* one row in one run */
  double est[TYPES], truth[TYPES];
  double var[TYPES], k3[TYPES];   /* variance and third cumulant of the estimate (0: not known) */
  double expect[PAIRS];           /* expected samples: among allocations, live blocks, ... (a pair each) */
} obs_t;

typedef struct row_s {
  char       name[64];
  row_kind_t kind;
  bool       truth_known;         /* sites without "notruth"; groups and total of such sites */
  bool       spills;              /* a "spills" site: truth known, some samples under [dropped]: not gated */
  char       member[MAX_MEMBERS][64];   /* group: the sites summed; share: [0] / the sum of all */
  int        n_members;
  bool       truth_of[PAIRS];     /* which pairs of types have a truth */
  obs_t     *obs;                 /* one per seed */
} row_t;

typedef enum { CHECK_REL, CHECK_ABS, CHECK_SD, CHECK_INFO_MIN } check_mode_t;

typedef struct check_s {          /* "accept LABEL ROW TYPE rel|abs|sd TOL", "require LABEL KEY MIN" */
  char         label[64], row[64];   /* row: the info KEY of a "require" */
  int          type;
  check_mode_t mode;
  double       tol;                  /* require: MIN */
} check_t;

typedef struct config_s {
  char    label[160];
  size_t  seeds;
  row_t   row[MAX_ROWS];
  int     n_rows;
  check_t check[MAX_CHECKS];
  int     n_checks;
  char    info_key[MAX_INFOS][64];
  double  info_sum[MAX_INFOS];
  double  info_min[MAX_INFOS];    /* over the runs that printed it */
  int     n_infos;
  double  samples_sum, dropped_sum;   /* from the profiles' comments, when they say */
  size_t  comment_runs;
  bool    any_truth[PAIRS];   /* some row has this pair's truth */
} config_t;

static int row_index(const config_t *c, const char *name)
{
  for (int i = 0; i < c->n_rows; i++)
    if (strcmp(c->row[i].name, name) == 0) return i;
  return -1;
}

static row_t *find_row(config_t *c, const char *name)
{
  int i = row_index(c, name);
  return i < 0 ? NULL : &c->row[i];
}

static row_t *add_row(config_t *c, const char *name, row_kind_t kind)
{
  row_t *r = find_row(c, name);
  if (r != NULL) return r;
  if (c->n_rows == MAX_ROWS) fail("%s: too many rows", c->label);
  r = &c->row[c->n_rows++];
  snprintf(r->name, sizeof r->name, "%s", name);
  r->kind = kind;
  r->obs = xcalloc(c->seeds, sizeof(obs_t));
  return r;
}

static int type_index(const char *name)
{
  for (int k = 0; k < TYPES; k++)
    if (strcmp(type_name[k], name) == 0) return k;
  return -1;
}

/* ---------------------------------------------------------------------------------------------------
   Truth files
--------------------------------------------------------------------------------------------------- */

static void read_members(row_t *r, char *rest, const char *path)
{
  for (char *tok = strtok(rest, " \n"); tok != NULL; tok = strtok(NULL, " \n")) {
    if (r->n_members == MAX_MEMBERS) fail("%s: too many members in %s", path, r->name);
    snprintf(r->member[r->n_members++], sizeof r->member[0], "%s", tok);
  }
}

/* An "estimate" line's alloc_* and inuse_* into a row of run `seed`, and freed_* = their difference. */
static void add_estimate(row_t *r, size_t seed, const double n[4])
{
  double *est = r->obs[seed].est;
  for (int k = 0; k < 4; k++) est[k] += n[k];
  est[2 * PAIR_FREED] += n[0] - n[2];
  est[2 * PAIR_FREED + 1] += n[1] - n[3];
}

static void read_truth(config_t *c, size_t seed, const char *path)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) fail("%s: %s", path, strerror(errno));
  char line[1024], name[64], extra[16];
  while (fgets(line, sizeof line, f) != NULL) {
    double n[4], v[4], k3[4], e[2], x[7];
    char tag[16];
    int used = 0;
    if (sscanf(line, "%15s %63s %n", tag, name, &used) < 2) continue;
    if (strcmp(tag, "site") == 0) {
      int got = sscanf(line + used, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %15s", &n[0],
                       &n[1], &n[2], &n[3], &v[0], &v[1], &v[2], &v[3], &k3[0], &k3[1], &k3[2], &k3[3],
                       &e[0], &e[1], extra);
      if (got < 14) fail("%s: bad site line: %s", path, line);
      row_t *r = add_row(c, name, ROW_SITE);
      r->truth_known = !(got == 15 && strcmp(extra, "notruth") == 0);
      r->spills = got == 15 && strcmp(extra, "spills") == 0;
      r->truth_of[PAIR_ALLOC] = r->truth_of[PAIR_INUSE] = true;
      obs_t *o = &r->obs[seed];
      memcpy(o->truth, n, sizeof n), memcpy(o->var, v, sizeof v), memcpy(o->k3, k3, sizeof k3);
      memcpy(o->expect, e, sizeof e);
    } else if (strcmp(tag, "peak") == 0 || strcmp(tag, "temp") == 0) {
      if (sscanf(line + used, "%lf %lf %lf %lf %lf %lf %lf", &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]) != 7)
        fail("%s: bad %s line: %s", path, tag, line);
      int pair = tag[0] == 'p' ? PAIR_PEAK : PAIR_TEMP, k = 2 * pair;
      row_t *r = add_row(c, name, ROW_SITE);
      r->truth_of[pair] = c->any_truth[pair] = true;
      obs_t *o = &r->obs[seed];
      o->truth[k] = x[0], o->truth[k + 1] = x[1], o->var[k] = x[2], o->var[k + 1] = x[3];
      o->k3[k] = x[4], o->k3[k + 1] = x[5], o->expect[pair] = x[6];
    } else if ((strcmp(tag, "group") == 0 || strcmp(tag, "share") == 0) && seed == 0) {
      row_t *r = add_row(c, name, tag[0] == 'g' ? ROW_GROUP : ROW_SHARE);
      read_members(r, line + used, path);
      if (r->n_members < (r->kind == ROW_SHARE ? 2 : 1)) fail("%s: %s names no members", path, name);
    } else if (strcmp(tag, "estimate") == 0) {
      if (sscanf(line + used, "%lf %lf %lf %lf", &n[0], &n[1], &n[2], &n[3]) != 4)
        fail("%s: bad estimate line: %s", path, line);
      add_estimate(add_row(c, name, ROW_SITE), seed, n);
      add_estimate(add_row(c, "[total]", ROW_TOTAL), seed, n);
    } else if ((strcmp(tag, "accept") == 0 || strcmp(tag, "require") == 0) && seed == 0) {
      if (c->n_checks == MAX_CHECKS) fail("%s: too many checks", path);
      check_t *k = &c->check[c->n_checks];
      char type[32], mode[8];
      snprintf(k->label, sizeof k->label, "%s", name);
      if (tag[0] == 'r') {
        if (sscanf(line + used, "%63s %lf", k->row, &k->tol) != 2) fail("%s: bad require line: %s", path, line);
        k->mode = CHECK_INFO_MIN;
      } else {
        if (sscanf(line + used, "%63s %31s %7s %lf", k->row, type, mode, &k->tol) != 4 ||
            (k->type = type_index(type)) < 0)
          fail("%s: bad accept line: %s", path, line);
        k->mode = strcmp(mode, "rel") == 0 ? CHECK_REL : strcmp(mode, "sd") == 0 ? CHECK_SD : CHECK_ABS;
      }
      c->n_checks++;
    } else if (strcmp(tag, "info") == 0) {
      int i = 0;
      while (i < c->n_infos && strcmp(c->info_key[i], name) != 0) i++;
      double v = strtod(line + used, NULL);
      if (i == c->n_infos) {
        if (i == MAX_INFOS) fail("%s: too many info lines", path);
        snprintf(c->info_key[c->n_infos++], sizeof c->info_key[0], "%s", name);
        c->info_min[i] = v;
      }
      c->info_sum[i] += v;
      if (v < c->info_min[i]) c->info_min[i] = v;
    }
  }
  fclose(f);
}

/* ---------------------------------------------------------------------------------------------------
   Profiles
--------------------------------------------------------------------------------------------------- */

static profile_t *load_profile(const char *path)
{
  gzFile f = gzopen(path, "rb");
  if (f == NULL) fail("%s: %s", path, strerror(errno));
  size_t cap = 1 << 20, len = 0;
  unsigned char *buf = xcalloc(cap, 1);
  int n;
  while ((n = gzread(f, buf + len, (unsigned)(cap - len))) > 0) {
    len += (size_t)n;
    if (len == cap) {
      buf = realloc(buf, cap *= 2);
      if (buf == NULL) fail("out of memory");
    }
  }
  if (n < 0) fail("%s: not a gzip file", path);
  gzclose(f);
  profile_t *p = perftools__profiles__profile__unpack(NULL, len, buf);
  free(buf);
  if (p == NULL) fail("%s: not a pprof profile", path);
  return p;
}

static const char *string_at(const profile_t *p, int64_t i)
{
  return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

static const Perftools__Profiles__Location *location_of(const profile_t *p, uint64_t id)
{
  if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id) return p->location[id - 1];
  for (size_t i = 0; i < p->n_location; i++)
    if (p->location[i]->id == id) return p->location[i];
  return NULL;
}

static const char *function_name(const profile_t *p, uint64_t id)
{
  for (size_t i = 0; i < p->n_function; i++) {
    size_t k = (id - 1 + i) % p->n_function;   /* ids are usually positional: first try is a hit */
    if (p->function[k]->id == id) return string_at(p, p->function[k]->name);
  }
  return "";
}

/* The row a sample belongs to, by its innermost frame (see the top of the file). */
static void row_name(const profile_t *p, const Perftools__Profiles__Sample *s, char *out, size_t len)
{
  static const char dropped_prefix[] = "[mimalloc-prof: dropped (";
  const Perftools__Profiles__Location *l = s->n_location_id > 0 ? location_of(p, s->location_id[0]) : NULL;
  snprintf(out, len, "[other]");
  if (l == NULL) return;
  if (l->n_line > 0) {
    const char *fn = function_name(p, l->line[0]->function_id);
    if (strncmp(fn, dropped_prefix, sizeof dropped_prefix - 1) == 0) {
      snprintf(out, len, "[dropped (%s", fn + sizeof dropped_prefix - 1);
      char *end = strchr(out, ']');
      if (end != NULL) end[1] = '\0';
    } else if (strncmp(fn, "site_", 5) == 0) {
      snprintf(out, len, "%s", fn);
    }
  } else if (l->mapping_id == 0 && l->address < sizeof drop_name / sizeof drop_name[0]) {
    snprintf(out, len, "[dropped (%s)]", drop_name[l->address]);
  }
}

/* "samples=N" and "dropped samples: ... total=N" in the comments, as the library writes them now. */
static void read_comments(config_t *c, const profile_t *p)
{
  bool seen = false;
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *text = string_at(p, p->comment[i]), *at;
    unsigned long long v;
    if (strncmp(text, "samples=", 8) == 0 && sscanf(text + 8, "%llu", &v) == 1) c->samples_sum += (double)v, seen = true;
    if (strncmp(text, "dropped samples:", 16) == 0 && (at = strstr(text, "total=")) != NULL &&
        sscanf(at + 6, "%llu", &v) == 1)
      c->dropped_sum += (double)v;
  }
  if (seen) c->comment_runs++;
}

/* The sample's lifetime label in nanoseconds; -1 when it has none. */
static int64_t lifetime_of(const profile_t *p, const Perftools__Profiles__Sample *s)
{
  for (size_t i = 0; i < s->n_label; i++)
    if (strcmp(string_at(p, s->label[i]->key), "lifetime") == 0) return s->label[i]->num;
  return -1;
}

static void read_profile(config_t *c, size_t seed, const char *path)
{
  profile_t *p = load_profile(path);
  int col[TYPES];
  for (int k = 0; k < TYPES; k++) {
    col[k] = -1;
    for (size_t j = 0; j < p->n_sample_type; j++)
      if (strcmp(string_at(p, p->sample_type[j]->type), type_name[k]) == 0) col[k] = (int)j;
    if (col[k] < 0 && k < 2 * PAIR_PEAK) fail("%s: no sample type %s", path, type_name[k]);
  }
  if (col[2 * PAIR_FREED] >= 0) c->any_truth[PAIR_FREED] = true;
  col[2 * PAIR_TEMP] = col[2 * PAIR_FREED], col[2 * PAIR_TEMP + 1] = col[2 * PAIR_FREED + 1];
  row_t *total = add_row(c, "[total]", ROW_TOTAL);
  for (size_t i = 0; i < p->n_sample; i++) {
    const Perftools__Profiles__Sample *s = p->sample[i];
    char name[96];
    row_name(p, s, name, sizeof name);
    row_t *r = find_row(c, name);
    if (r == NULL || r->kind != ROW_SITE) r = add_row(c, name, name[1] == 'd' ? ROW_DROPPED : ROW_OTHER);
    int64_t lifetime = lifetime_of(p, s);
    for (int k = 0; k < TYPES; k++) {
      double v = col[k] >= 0 && (size_t)col[k] < s->n_value ? (double)s->value[col[k]] : 0;
      if (k >= 2 * PAIR_TEMP && !(lifetime >= 0 && (uint64_t)lifetime < ACC_TEMP_NS)) v = 0;
      r->obs[seed].est[k] += v;
      total->obs[seed].est[k] += v;
    }
  }
  read_comments(c, p);
  perftools__profiles__profile__free_unpacked(p, NULL);
}

/* Groups, shares and the total's truth, once every run is read. */
/* A site's freed_* truth: its alloc_* less its inuse_* (see the top of the file). */
static void derive_freed(const config_t *c, row_t *r)
{
  if (!c->any_truth[PAIR_FREED]) return;
  r->truth_of[PAIR_FREED] = true;
  for (size_t s = 0; s < c->seeds; s++) {
    obs_t *o = &r->obs[s];
    for (int k = 0; k < 2; k++) {
      int f = 2 * PAIR_FREED + k, a = 2 * PAIR_ALLOC + k, u = 2 * PAIR_INUSE + k;
      o->truth[f] = o->truth[a] - o->truth[u];
      o->var[f] = o->var[a] - o->var[u];
      o->k3[f] = o->k3[a] - o->k3[u];
    }
    o->expect[PAIR_FREED] = o->expect[PAIR_ALLOC] - o->expect[PAIR_INUSE];
  }
}

static void derive_rows(config_t *c)
{
  row_t *total = find_row(c, "[total]");
  total->truth_known = true;
  for (int p = 0; p < PAIRS; p++) total->truth_of[p] = true;
  for (int i = 0; i < c->n_rows; i++) {
    row_t *r = &c->row[i];
    if (r->kind == ROW_SITE) {
      derive_freed(c, r);
      total->truth_known &= r->truth_known;
      for (int p = 0; p < PAIRS; p++) total->truth_of[p] &= r->truth_of[p];
      for (size_t s = 0; s < c->seeds; s++)
        for (int k = 0; k < TYPES; k++) {
          total->obs[s].truth[k] += r->obs[s].truth[k];
          total->obs[s].var[k] += r->obs[s].var[k];
          total->obs[s].k3[k] += r->obs[s].k3[k];
          if (k % 2 == 0) total->obs[s].expect[k / 2] += r->obs[s].expect[k / 2];
        }
    }
    if (r->kind != ROW_GROUP && r->kind != ROW_SHARE) continue;
    r->truth_known = true;
    for (int p = 0; p < PAIRS; p++) r->truth_of[p] = true;
    const row_t *m[MAX_MEMBERS];
    for (int j = 0; j < r->n_members; j++) {
      m[j] = find_row(c, r->member[j]);
      if (m[j] == NULL || m[j]->kind != ROW_SITE) fail("%s: %s: no site %s", c->label, r->name, r->member[j]);
      r->truth_known &= m[j]->truth_known;
      derive_freed(c, (row_t *)m[j]);
      for (int p = 0; p < PAIRS; p++) r->truth_of[p] &= m[j]->truth_of[p];
    }
    for (size_t s = 0; s < c->seeds; s++) {
      obs_t *o = &r->obs[s];
      for (int k = 0; k < TYPES; k++) {
        double est = 0, truth = 0, var = 0, k3 = 0;
        for (int j = 0; j < r->n_members; j++) {
          est += m[j]->obs[s].est[k], truth += m[j]->obs[s].truth[k], var += m[j]->obs[s].var[k];
          k3 += m[j]->obs[s].k3[k];
          if (k % 2 == 0) o->expect[k / 2] += m[j]->obs[s].expect[k / 2];
        }
        if (r->kind == ROW_GROUP) {
          o->est[k] = est, o->truth[k] = truth, o->var[k] = var, o->k3[k] = k3;
          continue;
        }
        /* share = X / (X + Y), X the numerator's estimate; delta method for its variance (sites are
         * sampled independently): (Y^2 Var X + X^2 Var Y) / (X + Y)^4, at the truth. */
        const obs_t *x = &m[0]->obs[s];
        double tx = x->truth[k], ty = truth - tx, vx = x->var[k], vy = var - vx;
        o->est[k] = est > 0 ? x->est[k] / est : 0;
        o->truth[k] = truth > 0 ? tx / truth : 0;
        o->var[k] = truth > 0 ? (ty * ty * vx + tx * tx * vy) / pow(truth, 4) : 0;
      }
    }
  }
}

/* ---------------------------------------------------------------------------------------------------
   Statistics and the report
--------------------------------------------------------------------------------------------------- */

typedef struct stat_s {
  double truth, mean, bias, z, sd_meas, sd_theory, gate, expect;
  double skew;                    /* skewness of z (of the mean over the runs), 0 when not known */
  bool   near_certain;            /* fewer than 1 unsampled block expected over all runs */
  double p_alarm;                 /* P(|z| > 4) for an unbiased library (Cornish-Fisher), gated rows */
  bool   t;                       /* z is Student's t (measured sd) */
  bool   sd_odd;                  /* sd meas outside chi^2's 1e-4 range */
  bool   gated;
} stat_t;

static double t_tail2(double t, double nu);

/* The chi^2(k) quantile at normal deviate zq (Wilson-Hilferty). */
static double chi2_quantile(double k, double zq)
{
  double h = 2.0 / (9.0 * k);
  return k * pow(1.0 - h + zq * sqrt(h), 3);
}

static stat_t row_stat(const config_t *c, const row_t *r, int k)
{
  stat_t st = {0};
  double n = (double)c->seeds, sum_d = 0, sum_t = 0, sum_e = 0, sum_v = 0, sum_k3 = 0, sum_x = 0;
  double blocks = 0, misses = 0;
  bool all_exact = true;
  for (size_t s = 0; s < c->seeds; s++) {
    const obs_t *o = &r->obs[s];
    double d = o->est[k] - o->truth[k];
    sum_d += d, sum_t += o->truth[k], sum_e += o->est[k], sum_v += o->var[k], sum_k3 += o->k3[k];
    sum_x += o->expect[k / 2];
    blocks += o->truth[k / 2 * 2];
    misses += o->truth[k / 2 * 2] - o->expect[k / 2];   /* blocks - expected samples */
    all_exact &= d == 0;
  }
  double mean_d = sum_d / n, ss = 0;
  for (size_t s = 0; s < c->seeds; s++) {
    double d = r->obs[s].est[k] - r->obs[s].truth[k] - mean_d;
    ss += d * d;
  }
  st.truth = sum_t / n, st.mean = sum_e / n, st.expect = sum_x / n;
  st.sd_meas = c->seeds > 1 ? sqrt(ss / (n - 1)) : 0;
  st.sd_theory = sqrt(sum_v / n);
  st.bias = st.truth != 0 ? mean_d / st.truth : NAN;
  st.gated = r->truth_known && !r->spills && r->truth_of[k / 2] &&
             (r->kind == ROW_SITE || r->kind == ROW_GROUP || r->kind == ROW_SHARE || r->kind == ROW_TOTAL);
  if (!st.gated) return st;
  st.t = r->kind == ROW_SHARE;
  double sd = st.t ? st.sd_meas : st.sd_theory;
  if (sd > 0) st.z = mean_d / (sd / sqrt(n));
  else st.z = all_exact ? 0 : copysign(INFINITY, mean_d != 0 ? mean_d : 1);
  st.gate = st.truth != 0 ? Z_GATE * sd / sqrt(n) / fabs(st.truth) : NAN;
  /* The mean of N runs has skewness g1 / sqrt(N), g1 = k3 / sigma^3 of one run.  The tail beyond +/-4
   * moves by g (z^2 - 1) / 6 (Cornish-Fisher, first order): the false-alarm probability of the row.
   * Rows whose blocks are all but certainly sampled are exact except when a block is missed, which
   * then gives a huge |z|: their false-alarm probability is that of a miss, 1 - exp(-misses). */
  st.near_certain = !st.t && blocks > 0 && misses < 1;
  if (st.near_certain) {
    st.skew = st.sd_theory > 0 ? sum_k3 / n / pow(st.sd_theory, 3) / sqrt(n) : 0;
    st.p_alarm = -expm1(-misses);
  } else if (!st.t && st.sd_theory > 0) {
    st.skew = sum_k3 / n / pow(st.sd_theory, 3) / sqrt(n);
    double shift = st.skew * (Z_GATE * Z_GATE - 1) / 6;
    st.p_alarm = 0.5 * erfc((Z_GATE - shift) / sqrt(2)) + 0.5 * erfc((Z_GATE + shift) / sqrt(2));
  } else if (st.t) {
    st.p_alarm = t_tail2(Z_GATE, n - 1);
  }
  if (st.sd_theory > 0 && st.sd_meas > 0 && c->seeds > 2) {   /* 0: every block certainly sampled */
    double q = (n - 1) * st.sd_meas * st.sd_meas / (st.sd_theory * st.sd_theory);
    st.sd_odd = q < chi2_quantile(n - 1, -3.89) || q > chi2_quantile(n - 1, 3.89);
  }
  return st;
}

static void print_num(double v)
{
  if (isnan(v)) printf(" %10s", "-");
  else printf(" %10.4g", v);
}

static void print_pct(double v, int width)
{
  if (isnan(v)) printf(" %*s", width, "-");
  else printf(" %*.2f", width, 100 * v);
}

typedef struct totals_s {
  int    rows_z, rows_t, rows_skewed, failed, checks, checks_failed;
  double alarms;                  /* expected false alarms: the sum of the gated rows' p_alarm */
} totals_t;

static void report_config(const config_t *c, totals_t *tot)
{
  printf("\n== %s: %zu seeds", c->label, c->seeds);
  if (c->comment_runs == c->seeds)
    printf("; per run %.1f samples, %.2f dropped (profile comments)", c->samples_sum / (double)c->seeds,
           c->dropped_sum / (double)c->seeds);
  for (int i = 0; i < c->n_infos; i++) printf("; %s %.4g", c->info_key[i], c->info_sum[i] / (double)c->seeds);
  printf("\n%-24s %-13s %10s %10s %7s %7s %10s %10s %6s %9s %5s\n", "row", "type", "truth", "mean", "bias%",
         "z", "sd meas", "sd theory", "gate%", "E[n]", "skew");
  static const row_kind_t order[] = {ROW_SITE, ROW_GROUP, ROW_SHARE, ROW_DROPPED, ROW_OTHER, ROW_TOTAL};
  for (int i = 0; i < c->n_rows * 6; i++) {
    const row_t *r = &c->row[i % c->n_rows];
    if (r->kind != order[i / c->n_rows]) continue;
    for (int k = 0; k < TYPES; k++) {
      bool other = r->kind == ROW_OTHER || r->kind == ROW_DROPPED;
      if (k >= 2 * PAIR_PEAK && !(other ? c->any_truth[k / 2] : r->truth_of[k / 2])) continue;
      stat_t st = row_stat(c, r, k);
      printf("%-24s %-13s", r->name, type_name[k]);
      if (!st.gated && r->spills && r->truth_of[k / 2]) {
        print_num(st.truth), print_num(st.mean), print_pct(st.bias, 7);
        printf(" %7s", "-");
        print_num(st.sd_meas), print_num(st.sd_theory);
        printf(" %6s %9.1f %5s  spills: [total] is gated\n", "-", st.expect, "-");
        continue;
      }
      if (!st.gated) {
        print_num(NAN), print_num(st.mean);
        printf(" %7s %7s", "-", "-");
        print_num(st.sd_meas), print_num(NAN);
        printf(" %6s %9s %5s  no truth\n", "-", "-", "-");
        continue;
      }
      print_num(st.truth), print_num(st.mean), print_pct(st.bias, 7);
      printf(" %6.1f%s", st.z, st.t ? "t" : " ");
      print_num(st.sd_meas), print_num(st.sd_theory), print_pct(st.gate, 6);
      if (r->kind == ROW_SHARE) printf(" %9s %5s", "-", "-");
      else if (st.near_certain) printf(" %9.1f %5s", st.expect, "-");
      else printf(" %9.1f %5.2f", st.expect, st.skew);
      if (st.t) printf("  sd theory: delta method");
      if (st.sd_odd) printf("  sd!");
      if (st.near_certain) printf("  p~1");
      else if (fabs(st.skew) > SKEW_NOTE) printf("  skewed");
      if (!(fabs(st.z) <= Z_GATE)) printf("  <-- |z| > 4");
      printf("\n");
      if (st.t) tot->rows_t++;
      else if (st.sd_theory > 0) tot->rows_z++;
      if (!st.near_certain && fabs(st.skew) > SKEW_NOTE) tot->rows_skewed++;
      tot->alarms += st.p_alarm;
      if (!(fabs(st.z) <= Z_GATE)) tot->failed++;
    }
  }
}

/* A "require" check: info KEY at least MIN in every run. */
static bool check_info_min(const config_t *c, const check_t *k)
{
  int i = 0;
  while (i < c->n_infos && strcmp(c->info_key[i], k->row) != 0) i++;
  bool ok = i < c->n_infos && c->info_min[i] >= k->tol;
  if (i == c->n_infos) printf("FAIL %-38s %s: no info %s\n", k->label, c->label, k->row);
  else
    printf("%s %-38s %s: %s at least %.4g in every run: least %.4g, mean %.4g\n", ok ? "PASS" : "FAIL",
           k->label, c->label, k->row, k->tol, c->info_min[i], c->info_sum[i] / (double)c->seeds);
  return ok;
}

/* An "sd" check: the row's measured sd within the chi^2 range of sd theory (not "sd!"), e.g. of a sum
 * of estimates that are independent only if the library makes them so. */
static bool check_sd(const config_t *c, const check_t *k, const row_t *r, const stat_t *st)
{
  double n = (double)c->seeds, lo = sqrt(chi2_quantile(n - 1, -3.89) / (n - 1));
  double hi = sqrt(chi2_quantile(n - 1, 3.89) / (n - 1));
  bool ok = st->gated && st->sd_theory > 0 && c->seeds > 2 && !st->sd_odd;
  printf("%s %-38s %s: %s %s: sd meas / sd theory = %.3g / %.3g = %.3f (limits %.2f .. %.2f)\n",
         ok ? "PASS" : "FAIL", k->label, c->label, r->name, type_name[k->type], st->sd_meas, st->sd_theory,
         st->sd_theory > 0 ? st->sd_meas / st->sd_theory : NAN, lo, hi);
  return ok;
}

static void report_checks(const config_t *c, totals_t *tot)
{
  for (int i = 0; i < c->n_checks; i++) {
    const check_t *k = &c->check[i];
    tot->checks++;
    if (k->mode == CHECK_INFO_MIN) {
      if (!check_info_min(c, k)) tot->checks_failed++;
      continue;
    }
    int ri = row_index(c, k->row);
    if (ri < 0) {
      printf("FAIL %-38s %s: no row %s\n", k->label, c->label, k->row);
      tot->checks_failed++;
      continue;
    }
    const row_t *r = &c->row[ri];
    stat_t st = row_stat(c, r, k->type);
    if (k->mode == CHECK_SD) {
      if (!check_sd(c, k, r, &st)) tot->checks_failed++;
      continue;
    }
    bool relative = k->mode == CHECK_REL;
    double off = relative ? st.mean / st.truth - 1 : st.mean - st.truth;
    bool ok = fabs(off) <= k->tol;
    if (!ok) tot->checks_failed++;
    /* Standard error of the mean, or, for a ratio of means R = mean(est) / mean(truth), the delta
     * method's sd(est_i - R truth_i) / (sqrt(N) mean(truth)) (the truth may vary between runs). */
    double n = (double)c->seeds, ratio = st.mean / st.truth, ss = 0;
    for (size_t s = 0; s < c->seeds; s++) {
      double e = relative ? r->obs[s].est[k->type] - ratio * r->obs[s].truth[k->type]
                          : r->obs[s].est[k->type] - st.mean;
      ss += e * e;
    }
    double se = sqrt(ss / (n - 1)) / sqrt(n);
    if (relative)
      printf("%s %-38s %s: %s %s: mean %.4g / truth %.4g = %.3fx +/- %.3f (limit %.0f%%)\n",
             ok ? "PASS" : "FAIL", k->label, c->label, r->name, type_name[k->type], st.mean, st.truth,
             st.mean / st.truth, se / fabs(st.truth), 100 * k->tol);
    else
      printf("%s %-38s %s: %s %s: mean %.4f +/- %.4f, truth %.4f (limit +/- %.3g)\n", ok ? "PASS" : "FAIL",
             k->label, c->label, r->name, type_name[k->type], st.mean, se, st.truth, k->tol);
  }
}

/* P(|T| > t) for Student's t with nu degrees of freedom: the density integrated over [t, inf) with
 * x = t / u (Simpson, u in (0, 1]). */
static double t_tail2(double t, double nu)
{
  double c = exp(lgamma((nu + 1) / 2) - lgamma(nu / 2)) / sqrt(nu * M_PI), sum = 0;
  int n = 2000;
  for (int i = 0; i <= n; i++) {
    double u = (double)i / n, f = 0;
    if (u > 0) {
      double x = t / u;
      f = c * pow(1 + x * x / nu, -(nu + 1) / 2) * t / (u * u);
    }
    sum += f * (i == 0 || i == n ? 1 : (i % 2 ? 4 : 2));
  }
  return 2 * sum / (3.0 * n);
}

static void load_config(config_t *c, const char *dir)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/label", dir);
  FILE *f = fopen(path, "r");
  if (f == NULL || fgets(c->label, sizeof c->label, f) == NULL) fail("%s: no label", dir);
  fclose(f);
  c->label[strcspn(c->label, "\n")] = '\0';
  for (c->seeds = 0;; c->seeds++) {
    snprintf(path, sizeof path, "%s/%zu.truth", dir, c->seeds + 1);
    if (access(path, R_OK) != 0) break;
  }
  if (c->seeds == 0) fail("%s: no runs", dir);
  for (size_t s = 0; s < c->seeds; s++) {
    snprintf(path, sizeof path, "%s/%zu.truth", dir, s + 1);
    read_truth(c, s, path);
    snprintf(path, sizeof path, "%s/%zu.pb.gz", dir, s + 1);
    read_profile(c, s, path);
  }
  derive_rows(c);
}

int main(int argc, char **argv)
{
  if (argc < 2) fail("usage: accuracy_read DIR...");
  totals_t tot = {0};
  config_t *configs = xcalloc((size_t)argc - 1, sizeof(config_t));
  for (int i = 1; i < argc; i++) {
    load_config(&configs[i - 1], argv[i]);
    report_config(&configs[i - 1], &tot);
  }
  printf("\n== Acceptance checks (issues 10, 22 and 23)\n");
  for (int i = 1; i < argc; i++) report_checks(&configs[i - 1], &tot);
  size_t seeds = configs[0].seeds;
  double pz = erfc(Z_GATE / sqrt(2)), pt = t_tail2(Z_GATE, (double)seeds - 1);
  printf("\n== Gate: %d rows with the theoretical sd (z), %d with the measured sd (t, %zu df); %d skewed "
         "(|skew| > %.1f)\n", tot.rows_z, tot.rows_t, seeds - 1, tot.rows_skewed, SKEW_NOTE);
  printf("Under an unbiased library a row exceeds |z| > 4 with probability %.1e if z is normal, %.1e if it is t;\n"
         "with each row's skewness (Cornish-Fisher), the expected number of false alarms over all rows is %.3f:\n"
         "a union bound on the probability that a correct library fails this run (rows of one site share\n"
         "samples, so the true figure is lower).\n",
         pz, pt, tot.alarms);
  printf("%s: %d row(s) with |z| > 4; %d of %d acceptance check(s) failed\n",
         tot.failed || tot.checks_failed ? "FAIL" : "PASS", tot.failed, tot.checks_failed, tot.checks);
  return tot.failed || tot.checks_failed ? 1 : 0;
}
