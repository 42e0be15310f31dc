/* folded.c - `mimalloc-prof folded`: one line per distinct stack, "outermost;...;innermost VALUE", the
 * input format of flamegraph.pl, speedscope, inferno and others.  Stacks whose value is not positive
 * are left out (the format has no negative weights). */
#include "tool.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
  "usage: mimalloc-prof folded [-s TYPE] [--focus RE] [--ignore RE] [--fold RE] [--fold-alloc] [--lines]\n"
  "                            [--tag KEY=VALUE]... FILE\n"
  "Print the stacks of a heap profile folded, \"main;f;g VALUE\", one line per stack (VALUE in the\n"
  "sample type's unit: bytes for *_space).  Options as for top.\n"
  "See mimalloc-prof(1).\n";

static const view_t *sort_view;

static int by_frames(const void *a, const void *b)
{
  const view_stack_t *x = a, *y = b;
  for (uint32_t i = 1; i <= x->depth && i <= y->depth; i++) {   /* outermost first */
    int c = strcmp(sort_view->names[x->frames[x->depth - i]], sort_view->names[y->frames[y->depth - i]]);
    if (c != 0) return c;
  }
  return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static bool same_frames(const view_stack_t *x, const view_stack_t *y)
{
  return x->depth == y->depth && memcmp(x->frames, y->frames, x->depth * sizeof *x->frames) == 0;
}

int cmd_folded(int argc, char **argv)
{
  static const struct option opts[] = {VIEW_LONG_OPTIONS, {NULL, 0, NULL, 0}};
  view_opts_t o;
  view_opts_init(&o);
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":s:h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c == '?' || c == ':') return tool_getopt_error(c, argv);
    if ((rc = view_option(&o, c, optarg)) != 0) return rc;
  }
  if (optind == argc) return tool_usage_error("no profile given");
  if (optind + 1 < argc) return tool_usage_error("one profile at a time ('%s' is one too many)", argv[optind + 1]);
  view_t v;
  if ((rc = view_open(&v, argv[optind], &o)) != 0) return rc;
  sort_view = &v;
  qsort(v.stacks, v.n_stacks, sizeof *v.stacks, by_frames);
  for (size_t i = 0; i < v.n_stacks;) {
    int64_t value = 0;
    size_t j = i;
    for (; j < v.n_stacks && same_frames(&v.stacks[i], &v.stacks[j]); j++) value = tool_add(value, v.stacks[j].value);
    if (value > 0 && v.stacks[i].depth > 0) {
      for (uint32_t k = v.stacks[i].depth; k-- > 0;) {
        for (const char *s = v.names[v.stacks[i].frames[k]]; *s; s++) putchar(*s == ';' || *s == '\n' ? ':' : *s);
        putchar(k ? ';' : ' ');
      }
      printf("%lld\n", (long long)value);
    }
    i = j;
  }
  view_close(&v);
  view_opts_free(&o);
  return ferror(stdout) ? tool_error("cannot write the output") : EXIT_SUCCESS;
}
