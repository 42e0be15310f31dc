/* tree.c - `mimalloc-prof tree`: the heaviest stacks as a tree.  By default each allocation site is a
 * root and its children are its callers (who made the site allocate); --callees turns it around (main
 * first, then what it calls).  A node below --min percent of the total is left out, and its parent
 * says how much its hidden children hold.
 */
#include "tool.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
  "usage: mimalloc-prof tree [-n ROOTS] [-s TYPE] [--callees] [--min PERCENT] [--depth N] [--focus RE]\n"
  "                          [--ignore RE] [--fold RE] [--fold-alloc] [--lines] [--full-names]\n"
  "                          [--tag KEY=VALUE]... [--stderr] FILE\n"
  "Print the heaviest stacks of a heap profile as a tree: each allocation site with its callers\n"
  "(ROOTS sites, default 20), or with --callees from the program's entry down.\n"
  "  --min PERCENT  leave out nodes below PERCENT of the total (default 1)\n"
  "  --depth N      at most N levels (default 64)\n"
  "  --stderr       each value's standard error (sampling noise), from the rate and counts\n"
  "  (-s, --focus, --ignore, --fold, --fold-alloc, --lines, --full-names, --tag: as for top)\n"
  "See mimalloc-prof(1).\n";

typedef struct printer_s {
  const view_t  *v;
  const ctree_t *t;
  int64_t        min;          /* smallest value shown */
  long           depth;
  bool           se;           /* --stderr */
} printer_t;

/* A node's line; then the level its children go to, and what its hidden children hold. */
typedef struct level_s {
  uint32_t next;                 /* the next child to look at, 0 when done */
  int      level, child_level;
  int64_t  hidden;
  double   hidden_var;
  size_t   n_hidden;
} level_t;

static bool shown(const printer_t *pr, const ctree_node_t *n)
{
  return n->value >= pr->min && n->value > 0;
}

/* "VALUE [STDERR] SHARE%  " (--stderr: "\u00b1" is two bytes, one column). */
static void print_value(const printer_t *pr, int64_t value, double var)
{
  char text[32], se[40];
  double share = pr->v->total ? 100.0 * (double)value / (double)pr->v->total : 0.0;
  printf("%10s ", view_value(pr->v, value, text, sizeof text));
  if (pr->se) printf("%12s ", view_stderr(pr->v, var, se, sizeof se));
  printf("%5.1f%%  ", share);
}

static level_t print_line(const printer_t *pr, uint32_t id, int level)
{
  const ctree_node_t *n = &pr->t->nodes[id];
  print_value(pr, n->value, n->var);
  printf("%*s%s\n", 2 * level, "", pr->v->names[n->name]);
  level_t l = {0, level, level, 0, 0, 0};
  if ((long)n->depth >= pr->depth) return l;   /* depth: 1..100000 (--depth) */
  size_t n_shown = 0;
  for (uint32_t c = n->first_child; c != 0; c = pr->t->nodes[c].next_sibling) {
    if (shown(pr, &pr->t->nodes[c])) n_shown++;
    else {
      l.hidden = tool_add(l.hidden, pr->t->nodes[c].value);
      l.hidden_var += pr->t->nodes[c].var;
      l.n_hidden++;
    }
  }
  /* A path without branches stays at one indentation: only where stacks part does it step in. */
  l.child_level = n_shown == 1 && l.n_hidden == 0 && n->self == 0 ? level : level + 1;
  l.next = n->first_child;
  return l;
}

/* A root and what is below it, depth first.  The walk keeps its own stack on the heap, one entry per
 * level (--depth may be 100000, a profile's stacks as deep). */
static void print_tree(const printer_t *pr, uint32_t root, level_t *stack)
{
  size_t n = 0;
  stack[n++] = print_line(pr, root, 0);
  while (n > 0) {
    level_t *top = &stack[n - 1];
    while (top->next != 0 && !shown(pr, &pr->t->nodes[top->next]))
      top->next = pr->t->nodes[top->next].next_sibling;
    if (top->next != 0) {
      uint32_t c = top->next;
      top->next = pr->t->nodes[c].next_sibling;
      stack[n] = print_line(pr, c, top->child_level);
      n++;
      continue;
    }
    if (top->n_hidden != 0) {
      print_value(pr, top->hidden, top->hidden_var);
      printf("%*s(%zu more below the --min share)\n", 2 * top->child_level, "", top->n_hidden);
    }
    n--;
  }
}

int cmd_tree(int argc, char **argv)
{
  enum { OPT_CALLEES = 0x200, OPT_MIN, OPT_DEPTH };
  static const struct option opts[] = {VIEW_LONG_OPTIONS, {"callees", no_argument, NULL, OPT_CALLEES},
                                       {"min", required_argument, NULL, OPT_MIN},
                                       {"depth", required_argument, NULL, OPT_DEPTH}, VIEW_STDERR_OPTION,
                                       {NULL, 0, NULL, 0}};
  view_opts_t o;
  view_opts_init(&o);
  bool callees = false;
  long depth = 64;
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":n:s:h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c == '?' || c == ':') return tool_getopt_error(c, argv);
    if (c == OPT_CALLEES) callees = true;
    else if (c == OPT_DEPTH) {
      if (!tool_parse_count(optarg, 1, 100000, &depth))
        return tool_usage_error("--depth '%s': expected a number of levels from 1 up", optarg);
    } else if (c == OPT_MIN) {
      char *end;
      double pct = strtod(optarg, &end);
      if (end == optarg || *end != '\0' || !(pct >= 0 && pct <= 100))
        return tool_usage_error("--min '%s': expected a percentage from 0 to 100", optarg);
      o.min_share = pct / 100;
    } else if ((rc = view_option(&o, c, optarg)) != 0) {
      return rc;
    }
  }
  if ((rc = tool_one_profile(argc, argv, "")) != 0) return rc;
  const char *path = argv[optind];
  char total[32];
  view_t v;
  if ((rc = view_open(&v, path, &o)) != 0) {
    view_opts_free(&o);
    return rc;
  }
  ctree_t t;
  ctree_build(&t, &v, !callees);
  printf("%s: %s, %s in %zu stacks; %s (nodes below %.3g%% left out)\n", path, v.type,
         view_value(&v, v.total, total, sizeof total), v.n_stacks,
         callees ? "from the entry point down to the allocation sites"
                 : "each allocation site with its callers",
         100 * o.min_share);
  double min = o.min_share * (double)v.total;    /* (double)INT64_MAX is 2^63, out of int64_t's range */
  printer_t pr = {&v, &t, min >= 0x1p63 ? INT64_MAX : min < -0x1p63 ? INT64_MIN : (int64_t)min, depth,
                  o.show_stderr};
  long roots = 0;
  level_t *stack = malloc(((size_t)t.max_depth + 2) * sizeof *stack);
  if (stack == NULL) abort();
  for (uint32_t r = t.nodes[0].first_child; r != 0 && roots < o.rows; r = t.nodes[r].next_sibling) {
    if (t.nodes[r].value < pr.min || t.nodes[r].value <= 0) break;
    print_tree(&pr, r, stack);
    roots++;
  }
  free(stack);
  if (o.show_stderr && !v.has_var)
    printf("(stderr: the profile has no sample rate, or no type to pair with %s: not known)\n", v.type);
  view_hint(&v, &o, stdout);
  ctree_free(&t);
  view_close(&v);
  view_opts_free(&o);
  return EXIT_SUCCESS;
}
