/* flame.c - `mimalloc-prof flame`: a flame graph of a profile as one self-contained SVG file.
 *
 * The root ("all") is at the top, each frame below its caller (an icicle: the widest frames are seen
 * first without scrolling however deep the stacks), as wide as its share of the total;
 * siblings are ordered by size, the largest on the left.  The layout is computed here, so the picture is
 * complete without scripts (any SVG viewer shows it); the embedded script (flame.js, compiled in as a
 * string) adds hover details, zoom and search in a browser.  Frames narrower than 0.1 pixel are left
 * out, with what they hold counted in their caller, and so are all but the widest FLAME_MAX_FRAMES
 * (262,144: a stack of 100,000 frames is drawn whole): the picture of a hostile profile (stacks of
 * 60,000 frames, many of them) would be hundreds of megabytes, more than a browser can show.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "flame_js.h"   /* flame_js: the script, generated from tools/flame.js */

#define WIDTH        1200
#define PAD          10
#define FRAME_H      17
#define TOP          56        /* title, then the details line */
#define BOTTOM       8
#define MIN_PX       0.1
#define FLAME_MAX_FRAMES 262144

static const char usage[] =
  "usage: mimalloc-prof flame [-s TYPE] [--title TEXT] [--focus RE] [--ignore RE] [--fold RE]\n"
  "                           [--fold-alloc] [--lines] [--full-names] [--tag KEY=VALUE]... -o OUT.svg FILE\n"
  "Write an interactive flame graph of a heap profile (self-contained SVG; hover, click to zoom,\n"
  "Search or Ctrl-F in a browser).  Options as for top.\n"
  "See mimalloc-prof(1).\n";

static void xml(FILE *f, const char *s)
{
  for (; *s; s++) tool_xml_byte(f, (unsigned char)*s);
}

/* The label of a frame pw pixels wide, as flame.js fits it (a 12px monospace character is 7.2 pixels, 3
 * pixels of margin each side): the whole name when it fits, else its first characters and "..", nothing
 * under three characters.  Written into the file, so that a viewer without script (an <img>, an image
 * viewer) shows it too; the script fits it again when it zooms.  Characters are UTF-8 code points. */
#define CHAR_PX 7.2
static void label(FILE *f, const char *name, double pw)
{
  double fit = (pw - 6) / CHAR_PX;
  if (fit < 3) return;
  size_t n = fit > (WIDTH / CHAR_PX) ? (size_t)(WIDTH / CHAR_PX) : (size_t)fit, chars = 0, cut = 0;
  const char *s = name;
  for (; *s != '\0'; s++) {
    if (((unsigned char)*s & 0xc0) == 0x80) continue;
    if (chars == n - 2) cut = (size_t)(s - name);
    chars++;
  }
  if (chars <= n) {
    xml(f, name);
    return;
  }
  char head[(size_t)(WIDTH / CHAR_PX) * 4 + 4];
  if (cut > sizeof head - 3) cut = sizeof head - 3;   /* a hostile name: runs of continuation bytes */
  memcpy(head, name, cut);
  memcpy(head + cut, "..", 3);
  xml(f, head);
}

/* Warm colours from the name (the same function, the same colour); grey for the library's dropped-sample
 * frames, blue-grey for frames without a name. */
static void colour(const view_t *v, uint32_t name, char *buf, size_t len)
{
  const char *s = name == UINT32_MAX ? "" : v->names[name];
  if (name == UINT32_MAX) {
    snprintf(buf, len, "rgb(200,200,200)");
    return;
  }
  if (strncmp(s, "[mimalloc-prof: dropped", 23) == 0) {
    snprintf(buf, len, "rgb(170,170,170)");
    return;
  }
  if (!v->named[name]) {
    snprintf(buf, len, "rgb(160,180,205)");
    return;
  }
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  snprintf(buf, len, "rgb(%u,%u,%u)", 205 + (h & 0x3f) % 50, 80 + (h >> 8) % 150, 40 + (h >> 16) % 50);
}

typedef struct layout_s {
  FILE          *f;
  const view_t  *v;
  const ctree_t *t;
  int64_t        min_value;      /* of a frame drawn */
  size_t         drawn;
} layout_t;

/* One frame's rectangle; false when it is too narrow to draw (nor are its callees, then). */
static bool frame(layout_t *l, uint32_t id, double x, unsigned depth)
{
  const ctree_node_t *n = &l->t->nodes[id];
  double w = (double)n->value / (double)l->v->total;
  if (w * (WIDTH - 2 * PAD) < MIN_PX || n->value < l->min_value || l->drawn == FLAME_MAX_FRAMES)
    return false;
  l->drawn++;
  const char *name = id == 0 ? "all" : l->v->names[n->name];
  char fill[32], amount[32];
  colour(l->v, id == 0 ? UINT32_MAX : n->name, fill, sizeof fill);
  double px = PAD + x * (WIDTH - 2 * PAD), pw = w * (WIDTH - 2 * PAD);
  int y = TOP + (int)depth * FRAME_H;
  fputs("<g class=\"f\" data-n=\"", l->f);
  xml(l->f, name);
  fprintf(l->f, "\" data-v=\"%lld\" data-x=\"%.12g\" data-w=\"%.12g\" data-d=\"%u\"><title>",
          (long long)n->value, x, w, depth);
  xml(l->f, name);
  fprintf(l->f, ": %s (%.2f%%)</title>"
          "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" rx=\"2\"/>",
          view_value(l->v, n->value, amount, sizeof amount), 100 * w, px, y, pw, FRAME_H - 1, fill);
  fprintf(l->f, "<text x=\"%.2f\" y=\"%d\">", px + 3, y + FRAME_H - 5);
  label(l->f, name, pw);
  fputs("</text></g>\n", l->f);
  return true;
}

/* Every frame, callers before their callees, each level's callees left to right.  The walk keeps its
 * own stack on the heap, one entry per level: a profile's stacks may be far deeper than the thread's. */
typedef struct walk_s {
  uint32_t next;                 /* the next callee to draw, 0 when done */
  double   x;                    /* where it starts */
} walk_t;

static int by_value_down(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The smallest value of a frame drawn: the value of the FLAME_MAX_FRAMES-th widest frame when there are
 * more (a callee is no wider than its caller when values are positive, so the frames at least as wide
 * make a picture whole from the root down); frames of exactly that value are drawn while fewer than
 * FLAME_MAX_FRAMES are. */
static int64_t min_value(const ctree_t *t)
{
  if (t->n <= FLAME_MAX_FRAMES) return INT64_MIN;
  int64_t *values = malloc(t->n * sizeof *values);
  if (values == NULL) abort();
  for (size_t i = 0; i < t->n; i++) values[i] = t->nodes[i].value;
  qsort(values, t->n, sizeof *values, by_value_down);
  int64_t min = values[FLAME_MAX_FRAMES - 1];
  free(values);
  return min;
}

static void frames(layout_t *l)
{
  const ctree_node_t *nodes = l->t->nodes;
  walk_t *stack = malloc(((size_t)l->t->max_depth + 2) * sizeof *stack);
  if (stack == NULL) abort();
  size_t n = 0;
  if (frame(l, 0, 0.0, 0)) stack[n++] = (walk_t){nodes[0].first_child, 0.0};
  while (n > 0) {
    walk_t *top = &stack[n - 1];
    while (top->next != 0 && nodes[top->next].value <= 0) top->next = nodes[top->next].next_sibling;
    if (top->next == 0) {
      n--;
      continue;
    }
    uint32_t c = top->next;
    double x = top->x;
    top->next = nodes[c].next_sibling;
    top->x += (double)nodes[c].value / (double)l->v->total;
    if (frame(l, c, x, (unsigned)n)) stack[n++] = (walk_t){nodes[c].first_child, x};
  }
  free(stack);
}

static void write_svg(FILE *f, const view_t *v, const ctree_t *t, const char *title)
{
  int height = TOP + BOTTOM + (int)(t->max_depth + 1) * FRAME_H;
  char total[32];
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
             "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
             "viewBox=\"0 0 %d %d\" data-total=\"%lld\" data-unit=\"%s\">\n",
          WIDTH, height, WIDTH, height, (long long)v->total, v->bytes ? "bytes" : "objects");
  fputs("<style>\n"
        "text { font-family: monospace; font-size: 12px; fill: #000; }\n"
        "g.f text { pointer-events: none; }\n"
        "g.f:hover rect { stroke: #000; stroke-width: 0.6; }\n"
        "g.f { cursor: pointer; }\n"
        "g.parent { opacity: 0.55; }\n"
        "#title { font-size: 16px; }\n"
        ".button { fill: #1a4f9c; cursor: pointer; text-decoration: underline; }\n"
        "</style>\n", f);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f4\"/>\n"
             "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">", WIDTH / 2);
  xml(f, title);
  fprintf(f, " (%s)</text>\n", view_value(v, v->total, total, sizeof total));
  fprintf(f, "<text id=\"reset\" class=\"button\" x=\"%d\" y=\"24\" style=\"visibility: hidden\">"
             "Reset zoom</text>\n"
             "<text id=\"search\" class=\"button\" x=\"%d\" y=\"24\" text-anchor=\"end\">Search</text>\n"
             "<text id=\"details\" x=\"%d\" y=\"%d\">Point at a frame for details; click to zoom; "
             "Search or Ctrl-F to find frames.</text>\n"
             "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"></text>\n<g id=\"frames\">\n",
          PAD, WIDTH - PAD, PAD, TOP - 10, WIDTH - PAD, TOP - 10);
  layout_t l = {f, v, t, min_value(t), 0};
  if (v->total > 0) frames(&l);
  if (l.drawn == FLAME_MAX_FRAMES)
    tool_note("more than %d frames are wide enough to draw: the %d widest are drawn", FLAME_MAX_FRAMES,
              FLAME_MAX_FRAMES);
  fputs("</g>\n<script type=\"text/ecmascript\"><![CDATA[\n", f);
  fputs(flame_js, f);
  fputs("]]></script>\n</svg>\n", f);
}

int cmd_flame(int argc, char **argv)
{
  enum { OPT_TITLE = 0x200 };
  static const struct option opts[] = {VIEW_LONG_OPTIONS, {"output", required_argument, NULL, 'o'},
                                       {"title", required_argument, NULL, OPT_TITLE}, {NULL, 0, NULL, 0}};
  view_opts_t o;
  view_opts_init(&o);
  const char *out = NULL, *title = NULL;
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":s:o:h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c == '?' || c == ':') return tool_getopt_error(c, argv);
    if (c == 'o') out = optarg;
    else if (c == OPT_TITLE) title = optarg;
    else if ((rc = view_option(&o, c, optarg)) != 0) return rc;
  }
  if ((rc = tool_one_profile(argc, argv, "")) != 0) return rc;
  if (out == NULL) return tool_usage_error("no output given (-o OUT.svg)");
  const char *path = argv[optind];
  view_t v;
  if ((rc = view_open(&v, path, &o)) != 0) {
    view_opts_free(&o);
    return rc;
  }
  if (v.total <= 0) view_hint(&v, &o, stderr);
  ctree_t t;
  ctree_build(&t, &v, false);
  char auto_title[4096];
  snprintf(auto_title, sizeof auto_title, "%s of %s", v.type, path);
  tool_out_t outf;
  int fd = tool_out_open(&outf, out);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL) {
    rc = tool_error("cannot write %s: %s", out, strerror(errno));
    tool_out_close(&outf, out, false);
  } else {
    outf.fd = -1;                                  /* fclose closes it */
    write_svg(f, &v, &t, title ? title : auto_title);
    bool ok = !ferror(f);
    if (fclose(f) != 0) ok = false;
    if (tool_out_close(&outf, out, ok) != 0) rc = tool_error("cannot write %s: %s", out, strerror(errno));
  }
  ctree_free(&t);
  view_close(&v);
  view_opts_free(&o);
  return rc;
}
