/* peak.c - the heap over time as a profile records it: its totals (in use when written, allocated, the
 * peak and when it was reached), the library's timeline, and the sites at the peak; `top`'s header,
 * `timeline` and `run`'s summary read them here.
 *
 * The library writes (doc/design.md, "Heap profiles"):
 *   the comment "mimalloc-prof peak: BYTES bytes at TIME_NS": the estimated bytes in use at the recorded
 *       peak, and when (CLOCK_REALTIME ns, as time_nanos);
 *   the comment "mimalloc-prof stopped: sampling stopped at TIME_NS; ...": mi_prof_stop kept the data, and
 *       duration_nanos ends at TIME_NS rather than at time_nanos;
 *   the Profile field mimalloc_prof_timeline (ours, number 10000): points of (time, estimated bytes in
 *       use, estimated bytes allocated), start_nanos (CLOCK_REALTIME) plus offset_nanos[i], in time order.
 * A profile without them (another program's, or one whose writer kept no timeline) has no peak time and no
 * timeline; the peak is then the sum of its peak_space values, when it has that sample type.  Both come from
 * the file and are read as untrusted: a malformed peak comment is ignored, and so are timeline points whose
 * arrays do not line up or whose time does not fit.
 */
#include "tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char peak_prefix[] = "mimalloc-prof peak: ";
static const char stopped_prefix[] = "mimalloc-prof stopped: sampling stopped at ";

/* A decimal integer at *s (a sign allowed), ending at a character of `stops` (or the end); advances *s. */
static bool read_int(const char **s, const char *stops, int64_t *out)
{
  const char *p = *s;
  if (!((*p >= '0' && *p <= '9') || (*p == '-' && p[1] >= '0' && p[1] <= '9'))) return false;
  errno = 0;
  char *end;
  long long v = strtoll(p, &end, 10);
  if (errno != 0 || (*end != '\0' && strchr(stops, *end) == NULL)) return false;
  *out = v;
  *s = end;
  return true;
}

static int64_t type_sum(const profile_t *p, const char *type, bool *has)
{
  size_t i = profile_sample_type(p, type);
  int64_t total = 0;
  *has = i != SIZE_MAX;
  for (size_t s = 0; i != SIZE_MAX && s < p->n_sample; s++) {
    if (i < p->sample[s]->n_value) total = tool_add(total, p->sample[s]->value[i]);
  }
  return total;
}

void heap_totals(const profile_t *p, heap_totals_t *t)
{
  memset(t, 0, sizeof *t);
  t->inuse_bytes = type_sum(p, "inuse_space", &t->has_inuse);
  t->alloc_bytes = type_sum(p, "alloc_space", &t->has_alloc);
  t->peak_bytes = type_sum(p, "peak_space", &t->has_peak);
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = pstr(p, p->comment[i]);
    int64_t at;
    if (strncmp(c, stopped_prefix, sizeof stopped_prefix - 1) == 0) {
      c += sizeof stopped_prefix - 1;
      if (read_int(&c, ";", &at) && at > 0) t->stopped_ns = at;
      continue;
    }
    if (strncmp(c, peak_prefix, sizeof peak_prefix - 1) != 0) continue;
    c += sizeof peak_prefix - 1;
    int64_t bytes, ns;
    if (!read_int(&c, " ", &bytes) || strncmp(c, " bytes at ", 10) != 0) continue;
    c += 10;
    if (!read_int(&c, "", &ns) || bytes < 0 || ns < 0) continue;
    t->has_peak = true;
    t->peak_bytes = bytes;
    t->peak_ns = ns;
  }
  int64_t end = t->stopped_ns != 0 ? t->stopped_ns : p->time_nanos;
  if (end > 0 && p->duration_nanos > 0 && p->duration_nanos <= end) t->start_ns = end - p->duration_nanos;
}

/* ---------------------------------------------------------------------------------------------------
   The timeline
--------------------------------------------------------------------------------------------------- */

static int by_time(const void *a, const void *b)
{
  const tl_point_t *x = a, *y = b;
  return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

tl_point_t *timeline_read(const profile_t *p, size_t *n_points, size_t *malformed)
{
  const timeline_t *tl = p->mimalloc_prof_timeline;
  *n_points = 0;
  *malformed = 0;
  if (tl == NULL) return NULL;
  size_t n = tl->n_offset_nanos;                    /* three parallel arrays: as long as the shortest */
  if (tl->n_inuse_bytes < n) n = tl->n_inuse_bytes;
  if (tl->n_alloc_bytes < n) n = tl->n_alloc_bytes;
  size_t longest = tl->n_offset_nanos;
  if (tl->n_inuse_bytes > longest) longest = tl->n_inuse_bytes;
  if (tl->n_alloc_bytes > longest) longest = tl->n_alloc_bytes;
  *malformed = longest - n;
  tl_point_t *pts = malloc((n + 1) * sizeof *pts);
  if (pts == NULL) abort();
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t dt = tl->offset_nanos[i];
    if (dt < 0 || tl->start_nanos < 0 || dt > INT64_MAX - tl->start_nanos) {
      (*malformed)++;
      continue;
    }
    pts[k++] = (tl_point_t){tl->start_nanos + dt, tl->inuse_bytes[i], tl->alloc_bytes[i]};
  }
  if (k > 1) qsort(pts, k, sizeof *pts, by_time);   /* written in order; a file from elsewhere may not be */
  *n_points = k;
  if (k == 0) {
    free(pts);
    return NULL;
  }
  return pts;
}

const profile_t *heap_header_alone(const profile_t *p, profile_t *h, int64_t **kept)
{
  profile_header_without(p, peak_prefix, h, kept);
  h->mimalloc_prof_timeline = NULL;
  return h;
}

/* ---------------------------------------------------------------------------------------------------
   The sites at the peak, and run's summary
--------------------------------------------------------------------------------------------------- */

static int by_flat(const void *a, const void *b)
{
  const view_site_t *x = a, *y = b;
  if (x->flat != y->flat) return x->flat < y->flat ? 1 : -1;
  return x->name < y->name ? -1 : x->name > y->name;
}

view_site_t *heap_top_sites(const view_t *v, size_t *n)
{
  view_site_t *sites = view_sites(v, n);
  size_t kept = 0;
  for (size_t i = 0; i < *n; i++) {
    if (sites[i].flat > 0) sites[kept++] = sites[i];
  }
  qsort(sites, kept, sizeof *sites, by_flat);
  *n = kept;
  return sites;
}

void heap_print_top_sites(FILE *f, const view_t *v, size_t rows, const char *indent)
{
  size_t n;
  view_site_t *sites = heap_top_sites(v, &n);
  for (size_t i = 0; i < n && i < rows; i++) {
    char value[32];
    fprintf(f, "%s%10s %5.1f%%  %s\n", indent, view_value(v, sites[i].flat, value, sizeof value),
            v->total > 0 ? 100.0 * (double)sites[i].flat / (double)v->total : 0.0, v->names[sites[i].name]);
  }
  if (n > rows) fprintf(f, "%s(%zu more sites)\n", indent, n - rows);
  free(sites);
}

void heap_summary(FILE *f, const char *path, int64_t start_ns)
{
  char err[512], a[32], b[32], c[32], when[32], period[32];
  profile_t *p = profile_read(path, err, sizeof err);
  if (p == NULL) {
    fprintf(f, "mimalloc-prof %s: no summary: %s\n", tool_cmd, err);
    return;
  }
  heap_totals_t t;
  heap_totals(p, &t);
  fprintf(f, "Heap of the run (estimated from samples");
  if (p->period > 0)
    fprintf(f, ", one per %s allocated on average", tool_bytes(p->period, period, sizeof period));
  fprintf(f, "):\n");
  if (t.has_peak) {
    fprintf(f, "  peak        %s in use", tool_bytes(t.peak_bytes, a, sizeof a));
    if (t.peak_ns > 0 && start_ns > 0)
      fprintf(f, ", %s after the start",
              tool_duration(t.peak_ns > start_ns ? t.peak_ns - start_ns : 0, when, sizeof when));
    fprintf(f, "\n");
  }
  fprintf(f, "  at exit     %s in use\n  allocated   %s\n", tool_bytes(t.inuse_bytes, b, sizeof b),
          tool_bytes(t.alloc_bytes, c, sizeof c));
  heap_peak_note(f, &t, "  ");
  view_opts_t o;
  view_opts_init(&o);
  o.sample_index = "peak_space";
  o.fold_std = true;
  view_t v;
  if (profile_sample_type(p, "peak_space") != SIZE_MAX && view_build(&v, p, &o) == 0) {
    if (v.total > 0) {
      fprintf(f, "  at the peak, by allocation site (allocator wrappers folded into their callers):\n");
      heap_print_top_sites(f, &v, 3, "  ");
    }
    view_free(&v);
  }
  view_opts_free(&o);
  profile_free(p);
}

void heap_peak_note(FILE *f, const heap_totals_t *t, const char *indent)
{
  if (!t->has_peak || !t->has_inuse || t->inuse_bytes <= t->peak_bytes) return;
  fprintf(f, "%s(in use reads more than the peak: sampling noise, the peak is estimated from half of the "
             "samples)\n", indent);
}

void heap_leaks(FILE *f, const char *path, size_t rows)
{
  char err[512], a[32], b[32];
  profile_t *p = profile_read(path, err, sizeof err);
  if (p == NULL) {
    fprintf(f, "mimalloc-prof %s: no leak report: %s\n", tool_cmd, err);
    return;
  }
  bool has_bytes, has_objects;
  int64_t bytes = type_sum(p, "inuse_space", &has_bytes);
  int64_t objects = type_sum(p, "inuse_objects", &has_objects);
  view_opts_t o;
  view_opts_init(&o);
  o.sample_index = "inuse_space";
  o.fold_std = true;
  view_t v;
  if (!has_bytes) {
    fprintf(f, "mimalloc-prof %s: no leak report: %s has no inuse_space\n", tool_cmd, path);
  } else if (view_build(&v, p, &o) == 0) {
    fprintf(f, "Still in use at exit (estimated from samples): %s", tool_bytes(bytes, a, sizeof a));
    if (has_objects) fprintf(f, " in %s objects", tool_count(objects, b, sizeof b));
    fprintf(f, "\n");
    if (v.total > 0) {
      fprintf(f, "  by allocation site (allocator wrappers folded into their callers), share of that "
              "total:\n");
      heap_print_top_sites(f, &v, rows, "  ");
    }
    view_free(&v);
  }
  view_opts_free(&o);
  profile_free(p);
}
