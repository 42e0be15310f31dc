/* folded.c - `mimalloc-prof folded`: one line per distinct stack, "outermost;...;innermost VALUE", the
 * input format of flamegraph.pl, speedscope, inferno and others.  Stacks whose value is not positive
 * are left out (the format has no negative weights). */
#include "tool.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
  "usage: mimalloc-prof folded [-s TYPE] [--focus RE] [--ignore RE] [--fold RE] [--fold-alloc] [--lines]\n"
  "                            [--full-names] [--tag KEY=VALUE]... FILE\n"
  "Print the stacks of a heap profile folded, \"main;f;g VALUE\", one line per stack (VALUE in the\n"
  "sample type's unit: bytes for *_space).  Options as for top.\n"
  "See mimalloc-prof(1).\n";

/* Stacks sort by their frames' names, outermost first, compared as ranks (the names sorted once): a
 * comparison costs one step per frame, not one strcmp per frame. */
static const view_t *sort_view;
static uint32_t     *sort_rank;      /* by name id */

static int by_name(const void *a, const void *b)
{
  return strcmp(sort_view->names[*(const uint32_t *)a], sort_view->names[*(const uint32_t *)b]);
}

static int by_frames(const void *a, const void *b)
{
  const view_stack_t *x = a, *y = b;
  for (uint32_t i = 1; i <= x->depth && i <= y->depth; i++) {   /* outermost first */
    uint32_t rx = sort_rank[x->frames[x->depth - i]], ry = sort_rank[y->frames[y->depth - i]];
    if (rx != ry) return rx < ry ? -1 : 1;
  }
  return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static void sort_stacks(view_t *v)
{
  uint32_t *order = malloc((v->n_names + 1) * sizeof *order);
  sort_rank = malloc((v->n_names + 1) * sizeof *sort_rank);
  if (order == NULL || sort_rank == NULL) abort();
  for (size_t i = 0; i < v->n_names; i++) order[i] = (uint32_t)i;
  sort_view = v;
  qsort(order, v->n_names, sizeof *order, by_name);
  for (size_t i = 0; i < v->n_names; i++) sort_rank[order[i]] = (uint32_t)i;   /* names are distinct */
  qsort(v->stacks, v->n_stacks, sizeof *v->stacks, by_frames);
  free(order);
  free(sort_rank);
}

/* A frame's name as the format allows it: ';' separates frames, a newline stacks. */
static void put_name(const char *s)
{
  if (strpbrk(s, ";\n") == NULL) {
    fputs(s, stdout);
    return;
  }
  for (; *s; s++) putchar(*s == ';' || *s == '\n' ? ':' : *s);
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
  if ((rc = tool_one_profile(argc, argv, "")) != 0) return rc;
  view_t v;
  if ((rc = view_open(&v, argv[optind], &o)) != 0) {
    view_opts_free(&o);
    return rc;
  }
  sort_stacks(&v);
  for (size_t i = 0; i < v.n_stacks;) {
    int64_t value = 0;
    size_t j = i;
    for (; j < v.n_stacks && same_frames(&v.stacks[i], &v.stacks[j]); j++)
      value = tool_add(value, v.stacks[j].value);
    if (value > 0 && v.stacks[i].depth > 0) {
      for (uint32_t k = v.stacks[i].depth; k-- > 0;) {
        put_name(v.names[v.stacks[i].frames[k]]);
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
