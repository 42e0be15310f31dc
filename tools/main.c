/* main.c - the mimalloc-prof command: one subcommand per file (run.c, symbolize.c, top.c, tree.c,
 * diff.c, merge.c, flame.c, folded.c, timeline.c, ctl.c, ps.c, serve.c) over a shared profile reader and
 * writer (profile.c, pbuild.c), report model (view.c) and control-socket client (client.c).  See
 * mimalloc-prof(1).
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *what;
} commands[] = {
  {"run", cmd_run, "run a program with heap profiling; write, then symbolize, its heap profile"},
  {"symbolize", cmd_symbolize, "name a profile's functions, files, lines and inlined frames"},
  {"top", cmd_top, "the allocation sites of a profile, largest first"},
  {"tree", cmd_tree, "the heaviest stacks as a tree of callers (or callees)"},
  {"diff", cmd_diff, "what grew between two profiles"},
  {"merge", cmd_merge, "one profile of several (the processes of one program)"},
  {"flame", cmd_flame, "an interactive flame graph (SVG)"},
  {"folded", cmd_folded, "folded stacks (\"a;b;c VALUE\") for other flame-graph tools"},
  {"timeline", cmd_timeline, "the heap over time, its peak and the sites at the peak (text or SVG)"},
  {"ctl", cmd_ctl, "start, stop, reset, stats or dump a running process (its control socket)"},
  {"ps", cmd_ps, "the processes that offer a control socket"},
  {"serve", cmd_serve, "serve running processes' heap profiles over HTTP (/debug/pprof/heap)"},
};

static int usage(FILE *f, int status)
{
  fprintf(f, "usage: mimalloc-prof COMMAND [OPTIONS] [ARGS...]\n"
             "       mimalloc-prof COMMAND --help | --help | --version\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
  fprintf(f, "See mimalloc-prof(1).\n");
  return status;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "mimalloc-prof: no command given\n");
    return usage(stderr, EXIT_USAGE);
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) return usage(stdout, EXIT_SUCCESS);
  if (strcmp(argv[1], "--version") == 0) {
    printf("mimalloc-prof %s\n", PACKAGE_VERSION);
    return EXIT_SUCCESS;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(argv[1], commands[i].name) == 0) {
      tool_cmd = commands[i].name;
      return commands[i].run(argc - 1, argv + 1);
    }
  }
  fprintf(stderr, "mimalloc-prof: unknown command '%s'\n", argv[1]);
  return usage(stderr, EXIT_USAGE);
}
