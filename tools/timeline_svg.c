/* timeline_svg.c - `mimalloc-prof timeline -o OUT.svg`: the heap over time as one self-contained SVG
 * picture (no script, no external resource): estimated bytes in use as a filled line against time,
 * axes with round ticks and units, the peak marked and labelled, and the allocation sites at the peak
 * listed under the chart.
 */
#include "tool.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH     960
#define LEFT      90           /* the plot's box */
#define RIGHT     (WIDTH - 40)
#define TOP       80
#define BOTTOM    400
#define SITE_H    18           /* one line of the list of sites */
#define NAME_MAX_CHARS 110     /* a site's name is cut after this many characters */

/* Text for XML: markup characters escaped, control characters left out, and bytes that are not UTF-8
 * replaced by '?' (a name from a profile may be anything; a browser refuses a file that is not UTF-8). */
static void svg_text(FILE *f, const char *s, size_t max_chars)
{
  size_t chars = 0;
  const unsigned char *u = (const unsigned char *)s;
  while (*u && chars < max_chars) {
    size_t len = *u < 0x80 ? 1 : (*u & 0xe0) == 0xc0 ? 2 : (*u & 0xf0) == 0xe0 ? 3
               : (*u & 0xf8) == 0xf0 ? 4 : 0;
    for (size_t k = 1; k < len; k++) {
      if ((u[k] & 0xc0) != 0x80) len = 0;
    }
    chars++;
    if (len == 0 || (len == 2 && *u < 0xc2)) {       /* not UTF-8, or an overlong form */
      fputc('?', f);
      u++;
      continue;
    }
    if (len > 1) {
      fwrite(u, 1, len, f);
      u += len;
      continue;
    }
    tool_xml_byte(f, *u);
    u++;
  }
  if (*u) fputs("...", f);
}

/* A round step for about `ticks` ticks over [0, max]: 1, 2, 2.5 or 5 times a power of ten. */
static double nice_step(double max, int ticks)
{
  if (max <= 0) return 1;
  double raw = max / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
}

typedef struct plot_s {
  double   x_per_ns, y_per_byte;
  int64_t  t0;
} plot_t;

static double px(const plot_t *pl, int64_t t) { return LEFT + (double)(t - pl->t0) * pl->x_per_ns; }
static double py(const plot_t *pl, int64_t v) { return BOTTOM - (double)(v > 0 ? v : 0) * pl->y_per_byte; }

static void axes(FILE *f, const tl_chart_t *c, const plot_t *pl, int64_t ymax)
{
  const char *bu, *tu;
  double bper, tper;
  tl_bytes_unit(ymax, &bu, &bper);
  tl_time_unit(c->span, &tu, &tper);
  double ystep = nice_step((double)ymax / bper, 6), xstep = nice_step((double)c->span / tper, 8);
  fprintf(f, "<g class='grid' stroke='#e0e0e0' stroke-width='1'>\n");
  for (int k = 1; k * ystep * bper <= (double)ymax * 1.0001; k++) {
    double y = BOTTOM - k * ystep * bper * pl->y_per_byte;
    fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f'/>\n", LEFT, y, RIGHT, y);
  }
  fprintf(f, "</g>\n<g class='yticks' font-size='12' text-anchor='end' fill='#333'>\n");
  for (int k = 0; k * ystep * bper <= (double)ymax * 1.0001; k++) {
    double y = BOTTOM - k * ystep * bper * pl->y_per_byte;
    fprintf(f, "<text x='%d' y='%.1f'>%g %s</text>\n", LEFT - 8, y + 4, k * ystep, bu);
  }
  fprintf(f, "</g>\n<g class='xticks' font-size='12' text-anchor='middle' fill='#333'>\n");
  for (int k = 0; c->span > 0 && k * xstep * tper <= (double)c->span * 1.0001; k++) {
    double x = LEFT + k * xstep * tper * pl->x_per_ns;
    fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#333'/>", x, BOTTOM, x, BOTTOM + 5);
    fprintf(f, "<text x='%.1f' y='%d'>%g</text>\n", x, BOTTOM + 20, k * xstep);
  }
  fprintf(f, "</g>\n<g stroke='#333' stroke-width='1'>");
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d'/>", LEFT, TOP - 10, LEFT, BOTTOM);
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d'/></g>\n", LEFT, BOTTOM, RIGHT, BOTTOM);
  fprintf(f, "<text class='xlabel' x='%d' y='%d' font-size='13' text-anchor='middle'>"
             "time since the first point (%s)</text>\n", (LEFT + RIGHT) / 2, BOTTOM + 42, tu);
  fprintf(f, "<text class='ylabel' transform='translate(22,%d) rotate(-90)' font-size='13' "
             "text-anchor='middle'>bytes in use (%s)</text>\n", (TOP + BOTTOM) / 2, bu);
}

/* The line through the points (at most about two per pixel column: the largest and the last). */
static void series(FILE *f, const tl_chart_t *c, const plot_t *pl)
{
  fprintf(f, "<path class='inuse' fill='#9ecae1' fill-opacity='0.7' stroke='#2171b5' stroke-width='1.5' "
             "stroke-linejoin='round' d='M%.1f %d", px(pl, c->pts[0].t_ns), BOTTOM);
  size_t i = 0;
  while (i < c->n) {
    long col = lround(px(pl, c->pts[i].t_ns));
    size_t most = i, last = i;
    for (; i < c->n && lround(px(pl, c->pts[i].t_ns)) == col; i++) {
      if (c->pts[i].inuse > c->pts[most].inuse || i == c->peak) most = i;
      last = i;
    }
    fprintf(f, " L%.1f %.1f", px(pl, c->pts[most].t_ns), py(pl, c->pts[most].inuse));
    if (last != most) fprintf(f, " L%.1f %.1f", px(pl, c->pts[last].t_ns), py(pl, c->pts[last].inuse));
  }
  fprintf(f, " L%.1f %d Z'/>\n", px(pl, c->pts[c->n - 1].t_ns), BOTTOM);
}

static void peak_mark(FILE *f, const tl_chart_t *c, const plot_t *pl)
{
  const tl_point_t *pk = &c->pts[c->peak];
  char a[32], t[32];
  double x = px(pl, pk->t_ns), y = py(pl, pk->inuse);
  bool left = x > (LEFT + RIGHT) / 2.0;             /* the label on the side with more room */
  fprintf(f, "<g class='peak'><line x1='%.1f' y1='%.1f' x2='%.1f' y2='%d' stroke='#cb181d' "
             "stroke-dasharray='4 3'/>", x, y, x, BOTTOM);
  fprintf(f, "<circle cx='%.1f' cy='%.1f' r='4.5' fill='#cb181d'/>", x, y);
  fprintf(f, "<text x='%.1f' y='%.1f' font-size='13' font-weight='bold' fill='#cb181d' text-anchor='%s'>"
             "peak %s at %s</text></g>\n", x + (left ? -8 : 8), y - 8 < TOP - 4 ? TOP - 4 : y - 8,
          left ? "end" : "start", tool_bytes(c->peak_bytes, a, sizeof a),
          tool_duration(pk->t_ns - c->t0, t, sizeof t));
}

static void sites(FILE *f, const tl_chart_t *c, size_t n, int y)
{
  fprintf(f, "<text x='%d' y='%d' font-size='14' font-weight='bold'>Allocation sites at the peak "
             "(peak_space, allocator wrappers folded)</text>\n"
             "<g class='sites' font-family='monospace' font-size='12'>\n", LEFT, y);
  size_t total;
  view_site_t *s = heap_top_sites(&c->peak_view, &total);
  const view_t *v = &c->peak_view;
  for (size_t i = 0; i < n; i++) {
    char value[32];
    double share = v->total > 0 ? 100.0 * (double)s[i].flat / (double)v->total : 0.0;
    fprintf(f, "<text x='%d' y='%d' xml:space='preserve'>%10s %5.1f%%  ", LEFT, y + (int)(i + 1) * SITE_H,
            tool_bytes(s[i].flat, value, sizeof value), share);
    svg_text(f, v->names[s[i].name], NAME_MAX_CHARS);
    fprintf(f, "</text>\n");
  }
  fprintf(f, "</g>\n");
  free(s);
}

static void write_svg(FILE *f, const tl_chart_t *c, const char *title)
{
  size_t n_sites = 0, total_sites = 0;
  if (c->has_peak_view && c->n_sites > 0) {
    free(heap_top_sites(&c->peak_view, &total_sites));
    n_sites = total_sites < c->n_sites ? total_sites : c->n_sites;
  }
  int height = BOTTOM + 60 + (n_sites > 0 ? 30 + (int)n_sites * SITE_H : 0);
  int64_t ymax = c->top > 0 ? c->top : 1;
  const char *bu;
  double bper;
  tl_bytes_unit(ymax, &bu, &bper);
  double step = nice_step((double)ymax / bper, 6), top_units = ceil((double)ymax / bper / step) * step;
  plot_t pl = {c->span > 0 ? (RIGHT - LEFT) / (double)c->span : 0, (BOTTOM - TOP) / (top_units * bper),
               c->t0};
  fprintf(f, "<?xml version='1.0' encoding='UTF-8' standalone='no'?>\n"
             "<svg xmlns='http://www.w3.org/2000/svg' version='1.1' width='%d' height='%d' "
             "viewBox='0 0 %d %d' font-family='Verdana, Helvetica, Arial, sans-serif'>\n",
          WIDTH, height, WIDTH, height);
  fprintf(f, "<rect width='100%%' height='100%%' fill='#fff'/>\n");
  fprintf(f, "<text class='title' x='%d' y='30' font-size='18' text-anchor='middle'>", WIDTH / 2);
  svg_text(f, title, 200);
  char a[32], b[32], period[32];
  fprintf(f, "</text>\n<text class='subtitle' x='%d' y='54' font-size='12' fill='#555' text-anchor='middle'>"
             "estimated bytes in use over time", WIDTH / 2);
  if (c->totals.has_inuse)
    fprintf(f, "; %s in use when written", tool_bytes(c->totals.inuse_bytes, a, sizeof a));
  if (c->totals.has_alloc) fprintf(f, "; %s allocated", tool_bytes(c->totals.alloc_bytes, b, sizeof b));
  if (c->p->period > 0)
    fprintf(f, "; one sample per %s allocated", tool_bytes(c->p->period, period, sizeof period));
  fprintf(f, "</text>\n");
  axes(f, c, &pl, (int64_t)(top_units * bper));
  series(f, c, &pl);
  peak_mark(f, c, &pl);
  if (n_sites > 0) sites(f, c, n_sites, BOTTOM + 80);
  fprintf(f, "</svg>\n");
}

int tl_write_svg(const tl_chart_t *c, const char *out, const char *title)
{
  tool_out_t o;
  int fd = tool_out_open(&o, out);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL) {
    int rc = tool_error("cannot write %s: %s", out, strerror(errno));
    tool_out_close(&o, out, false);
    return rc;
  }
  o.fd = -1;                                       /* fclose closes it */
  write_svg(f, c, title);
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  if (tool_out_close(&o, out, ok) != 0) return tool_error("cannot write %s: %s", out, strerror(errno));
  return 0;
}
