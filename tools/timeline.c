/* timeline.c - `mimalloc-prof timeline`: the heap of a profile over time, as a text chart for a terminal
 * (valgrind's ms_print is the model) or as an SVG picture (timeline_svg.c), with the peak marked and the
 * allocation sites at the peak named.
 *
 * The points come from the library's timeline (peak.c): the estimated bytes in use and allocated at each
 * change of the estimates and each dump, the higher of two neighbours kept when its buffer filled.  The
 * peak is the one the library recorded (its comment): the moment is the timeline's point at that time
 * (added when there is none), the bytes its own estimate, which the library makes with other samples
 * than the timeline's (so that choosing the highest moment does not bias it) and which differs from the
 * timeline's there by sampling error.  Without a recorded peak, the highest point is the peak.
 *
 * Text chart: each column covers an equal slice of time.  Up to what was in use at its end (its last
 * point) it is drawn with ':', above that up to the most in use at its points with '.', so a fall within
 * a slice still shows (a slice without a point has the last point before it: the heap is known only at
 * the points).  Heights are shares of the peak, rounded to rows; the peak's column is '#'.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define DEFAULT_WIDTH  72
#define DEFAULT_HEIGHT 20
#define MARGIN         7         /* the y axis' labels and the axis itself: "100.0^" */

static const char usage[] =
  "usage: mimalloc-prof timeline [-o OUT.svg] [-n SITES] [--width COLUMNS] [--height ROWS]\n"
  "                              [--title TEXT] FILE\n"
  "Chart the estimated bytes in use over time that a heap profile records (the library's timeline),\n"
  "with the peak marked (#) and the allocation sites at the peak (SITES, default 5).\n"
  "  -o OUT.svg         write the chart as an SVG picture instead\n"
  "  --width COLUMNS    columns of the text chart (default 72, less to fit a narrower terminal)\n"
  "  --height ROWS      rows of the text chart (default 20)\n"
  "  --title TEXT       the SVG picture's title (default: the profile's file name)\n"
  "See mimalloc-prof(1).\n";

/* ---------------------------------------------------------------------------------------------------
   Units
--------------------------------------------------------------------------------------------------- */

void tl_time_unit(int64_t span_ns, const char **unit, double *per)
{
  if (span_ns >= 1000000000) *unit = "s", *per = 1e9;
  else if (span_ns >= 1000000) *unit = "ms", *per = 1e6;
  else if (span_ns >= 1000) *unit = "us", *per = 1e3;
  else *unit = "ns", *per = 1;
}

void tl_bytes_unit(int64_t max, const char **unit, double *per)
{
  static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  double d = 1;
  while (u + 1 < sizeof names / sizeof names[0] && (double)max >= 1024 * d) d *= 1024, u++;
  *unit = names[u];
  *per = d;
}

/* A number for an axis, three significant digits at most: 0.5, 2.11, 42.2, 999. */
static const char *axis_number(double v, char *buf, size_t len)
{
  if (v == 0) snprintf(buf, len, "0");
  else if (v >= 99.95) snprintf(buf, len, "%.0f", v);
  else if (v >= 9.995) snprintf(buf, len, "%.1f", v);
  else snprintf(buf, len, "%.2f", v);
  for (char *end = buf + strlen(buf) - 1; strchr(buf, '.') != NULL && (*end == '0' || *end == '.'); end--) {
    bool dot = *end == '.';
    *end = '\0';
    if (dot) break;
  }
  return buf;
}

/* ---------------------------------------------------------------------------------------------------
   The chart's data
--------------------------------------------------------------------------------------------------- */

int tl_chart_load(tl_chart_t *c, const char *path, size_t sites)
{
  char err[512];
  memset(c, 0, sizeof *c);
  c->path = path;
  if ((c->p = profile_read(path, err, sizeof err)) == NULL) return tool_error("%s", err);
  size_t malformed;
  c->pts = timeline_read(c->p, &c->n, &malformed);
  if (malformed != 0)
    tool_note("%s: %zu timeline points do not line up or fit and are left out", path, malformed);
  heap_totals(c->p, &c->totals);
  c->n_timeline = c->n;
  if (c->n == 0) {
    tl_chart_free(c);
    return tool_error("%s has no timeline (the library writes one into every heap profile; merge of several "
                      "profiles and diff leave it out)", path);
  }
  c->peak = 0;
  for (size_t i = 1; i < c->n; i++) {
    if (c->pts[i].inuse > c->pts[c->peak].inuse) c->peak = i;
  }
  c->peak_bytes = c->pts[c->peak].inuse;
  if (c->totals.has_peak && c->totals.peak_ns > 0) {     /* the recorded peak: its point, or a new one */
    size_t i = 0;
    while (i < c->n && c->pts[i].t_ns < c->totals.peak_ns) i++;
    if (i == c->n || c->pts[i].t_ns != c->totals.peak_ns) {
      c->pts = realloc(c->pts, (c->n + 1) * sizeof *c->pts);
      if (c->pts == NULL) abort();
      memmove(&c->pts[i + 1], &c->pts[i], (c->n - i) * sizeof *c->pts);
      int64_t alloc = i > 0 ? c->pts[i - 1].alloc : 0;
      c->pts[i] = (tl_point_t){c->totals.peak_ns, c->totals.peak_bytes, alloc};
      c->n++;
    }
    c->peak = i;
    c->peak_bytes = c->totals.peak_bytes;
  }
  c->top = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (c->pts[i].inuse > c->top) c->top = c->pts[i].inuse;
  }
  c->t0 = c->pts[0].t_ns;
  c->span = c->pts[c->n - 1].t_ns - c->t0;
  c->n_sites = sites;
  if (sites > 0 && profile_sample_type(c->p, "peak_space") != SIZE_MAX) {
    view_opts_t o;
    view_opts_init(&o);
    o.sample_index = "peak_space";
    o.fold_std = true;                              /* operator new, PyObject_Malloc, ...: their callers */
    if (view_build(&c->peak_view, c->p, &o) == 0) c->has_peak_view = true;
    view_opts_free(&o);
  }
  return 0;
}

void tl_chart_free(tl_chart_t *c)
{
  if (c->has_peak_view) view_free(&c->peak_view);
  free(c->pts);
  profile_free(c->p);
  memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------------------------------------------
   The text chart
--------------------------------------------------------------------------------------------------- */

/* For each of `w` equal slices of the time span: the most in use at its points (col[2k]) and at its end
 * (col[2k + 1]: its last point), or both the last point's before it when none is inside; the peak's
 * column in *peak_col. */
static int64_t *columns(const tl_chart_t *c, int w, int *peak_col)
{
  int64_t *col = calloc(2 * (size_t)w, sizeof *col);
  if (col == NULL) abort();
  size_t i = 0;
  int64_t carry = 0;                                /* the last point before the slice */
  for (int k = 0; k < w; k++) {
    /* slice k: [t0 + span*k/w, t0 + span*(k+1)/w), the last one closed */
    double end = (double)c->span * (k + 1) / w;
    int64_t most = carry;
    for (bool any = false; i < c->n && ((double)(c->pts[i].t_ns - c->t0) < end || k == w - 1); i++) {
      if (!any || c->pts[i].inuse > most) most = c->pts[i].inuse;
      any = true;
      if (i == c->peak) *peak_col = k;
      carry = c->pts[i].inuse;
    }
    col[2 * k] = most;
    col[2 * k + 1] = carry;
  }
  return col;
}

/* The rows of `value` in a chart of h rows whose top is `top`, rounded. */
static int rows_of(int64_t value, int64_t top, int h)
{
  double r = top > 0 ? (double)value / (double)top * h : 0;
  return r <= 0 ? 0 : (int)(r + 0.5);
}

static void print_chart(const tl_chart_t *c, int w, int h)
{
  int peak_col = 0;
  int64_t *col = columns(c, w, &peak_col);
  int64_t top = c->top;
  const char *bu, *tu;
  double bper, tper;
  tl_bytes_unit(top, &bu, &bper);
  tl_time_unit(c->span, &tu, &tper);
  int *rows = malloc(2 * (size_t)w * sizeof *rows);  /* the most, then at the end, per column */
  if (rows == NULL) abort();
  for (int k = 0; k < 2 * w; k++) rows[k] = rows_of(col[k], top, h);
  rows[2 * peak_col + 1] = rows[2 * peak_col];     /* '#' up to its highest */
  printf("%*s%s\n", MARGIN - 1 - (int)strlen(bu), "", bu);
  char *line = malloc((size_t)w + 1);
  if (line == NULL) abort();
  for (int r = h; r >= 1; r--) {
    char label[32] = "";
    if (r == h) axis_number((double)top / bper, label, sizeof label);
    else if (r == (h + 1) / 2 && h >= 6) axis_number((double)top / bper * r / h, label, sizeof label);
    for (int k = 0; k < w; k++)
      line[k] = rows[2 * k + 1] >= r ? (k == peak_col ? '#' : ':') : rows[2 * k] >= r ? '.' : ' ';
    int end = w;
    while (end > 0 && line[end - 1] == ' ') end--;
    line[end] = '\0';
    printf("%*s%c%s\n", MARGIN - 1, label, r == h ? '^' : '|', line);
  }
  printf("%*s+", MARGIN - 1, "0");
  for (int k = 0; k < w; k++) putchar('-');
  printf(">%s\n", tu);
  /* Time labels: 0 at the left, the span at the right, and the middle when there is room. */
  char left[32], mid[32], right[32];
  snprintf(left, sizeof left, "0");
  axis_number((double)c->span / tper / 2, mid, sizeof mid);
  axis_number((double)c->span / tper, right, sizeof right);
  char *labels = malloc((size_t)w + 2);            /* position 0 under the '+', k + 1 under column k */
  if (labels == NULL) abort();
  memset(labels, ' ', (size_t)w + 1);
  labels[w + 1] = '\0';
  memcpy(labels, left, strlen(left));
  int mpos = 1 + w / 2 - (int)strlen(mid) / 2, rpos = w + 1 - (int)strlen(right);
  if (rpos > (int)strlen(left) + 1) memcpy(labels + rpos, right, strlen(right));
  if (mpos > (int)strlen(left) + 1 && mpos + (int)strlen(mid) + 1 < rpos)
    memcpy(labels + mpos, mid, strlen(mid));
  for (int k = w; k > 0 && labels[k] == ' '; k--) labels[k] = '\0';
  printf("%*s%s\n", MARGIN - 1, "", labels);
  free(labels);
  free(line);
  free(rows);
  free(col);
}

static void print_text(const tl_chart_t *c, int w, int h)
{
  char a[32], b[32], e[32], t[32], period[32];
  printf("%s: estimated bytes in use over time, from the profile's timeline (%zu points", c->path,
         c->n_timeline);
  if (c->p->period > 0)
    printf("; one sample per %s allocated on average", tool_bytes(c->p->period, period, sizeof period));
  printf(")\n\n");
  print_chart(c, w, h);
  printf("\n");
  const tl_point_t *pk = &c->pts[c->peak];
  printf("peak (#): %s in use at %s", tool_bytes(c->peak_bytes, a, sizeof a),
         tool_duration(pk->t_ns - c->t0, t, sizeof t));
  if (c->totals.has_inuse) printf("; %s in use when written", tool_bytes(c->totals.inuse_bytes, e, sizeof e));
  if (c->totals.has_alloc) printf("; %s allocated", tool_bytes(c->totals.alloc_bytes, b, sizeof b));
  printf("\n");
  if (pk->inuse != c->peak_bytes)
    printf("(the timeline reads %s there: the peak is estimated with other samples, "
           "unbiased by the choice)\n", tool_bytes(pk->inuse, e, sizeof e));
  printf("(time since the timeline's first point, %s before the profile was written)\n",
         c->p->time_nanos > c->t0 ? tool_duration(c->p->time_nanos - c->t0, t, sizeof t) : "0 ns");
  if (c->has_peak_view && c->peak_view.total > 0) {
    printf("\nallocation sites at the peak (allocator wrappers folded; `top -s peak_space --fold-alloc` "
           "lists them all):\n");
    heap_print_top_sites(stdout, &c->peak_view, c->n_sites, "");
  } else if (c->n_sites > 0) {
    printf("\n(the profile has no peak_space sample type: no sites at the peak)\n");
  }
}

/* The terminal's width when standard output is one, else 0. */
static int terminal_columns(void)
{
  struct winsize ws;
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) return ws.ws_col;
  return 0;
}

int cmd_timeline(int argc, char **argv)
{
  enum { OPT_WIDTH = 0x200, OPT_HEIGHT, OPT_TITLE };
  static const struct option opts[] = {
    {"output", required_argument, NULL, 'o'}, {"width", required_argument, NULL, OPT_WIDTH},
    {"height", required_argument, NULL, OPT_HEIGHT}, {"title", required_argument, NULL, OPT_TITLE},
    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  const char *out = NULL, *title = NULL;
  long width = 0, height = DEFAULT_HEIGHT, sites = 5;
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":o:n:h", opts, NULL)) != -1) {
    switch (c) {
    case 'h': return tool_help(usage);
    case 'o': out = optarg; break;
    case 'n':
      if (!tool_parse_count(optarg, 0, 1000, &sites))
        return tool_usage_error("-n '%s': expected 0 to 1000 sites", optarg);
      break;
    case OPT_WIDTH:
      if (!tool_parse_count(optarg, 10, 1000, &width))
        return tool_usage_error("--width '%s': expected 10 to 1000 columns", optarg);
      break;
    case OPT_HEIGHT:
      if (!tool_parse_count(optarg, 4, 200, &height))
        return tool_usage_error("--height '%s': expected 4 to 200 rows", optarg);
      break;
    case OPT_TITLE: title = optarg; break;
    default: return tool_getopt_error(c, argv);
    }
  }
  if ((rc = tool_one_profile(argc, argv, "")) != 0) return rc;
  if (width == 0) {
    int cols = terminal_columns();
    width = DEFAULT_WIDTH;
    if (cols > 0 && cols - MARGIN - 4 < width) width = cols - MARGIN - 4 < 10 ? 10 : cols - MARGIN - 4;
  }
  tl_chart_t chart;
  rc = tl_chart_load(&chart, argv[optind], (size_t)sites);
  if (rc != 0) return rc;
  if (out != NULL) rc = tl_write_svg(&chart, out, title != NULL ? title : argv[optind]);
  else print_text(&chart, (int)width, (int)height);
  tl_chart_free(&chart);
  if (out == NULL && ferror(stdout)) rc = tool_error("cannot write the output");
  return rc;
}
