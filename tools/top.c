/* top.c - `mimalloc-prof top`: the allocation sites of a profile, largest first; of a running process
 * when given its process ID (a heap profile taken through its control socket, client.c, and symbolized).
 *
 * flat is what a site allocated itself (it is the innermost frame of the stack), cum what it and the
 * functions it called allocated (each stack counted once per site, also when the site recurses).
 *
 * The names come from the profile, which a process (or whoever wrote the file) chose: they are printed
 * escaped (escape.c), as is the process's command line.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
  "usage: mimalloc-prof top [-n ROWS] [-s TYPE] [--sort flat|cum] [--focus RE] [--ignore RE]\n"
  "                         [--fold RE] [--fold-alloc] [--lines] [--no-symbolize] [--timeout SECONDS]\n"
  "                         FILE|PID\n"
  "Print the allocation sites of a heap profile, largest first (ROWS, default 20); given the ID of a\n"
  "process with a control socket (MIMALLOC_PROF_CONTROL=1), of a profile taken from it now.\n"
  "  -s, --sample-index TYPE  inuse_space (default), inuse_objects, alloc_space or alloc_objects\n"
  "  --sort flat|cum          rank by the site's own amount (default) or with its callees'\n"
  "  --focus RE, --ignore RE  only stacks with / without a frame matching RE (POSIX extended)\n"
  "  --fold RE                charge innermost frames matching RE to their callers\n"
  "  --fold-alloc             the same for operator new, std::allocator, xmalloc-style helpers\n"
  "  --lines                  one site per source line (function file:line)\n"
  "  --no-symbolize           PID: leave the profile with addresses and the library's names\n"
  "  --timeout SECONDS        PID: give up when the process has not answered within this time (default 10)\n"
  "See mimalloc-prof(1).\n";

static int by_flat(const void *a, const void *b)
{
  const view_site_t *x = a, *y = b;
  if (x->flat != y->flat) return x->flat < y->flat ? 1 : -1;
  if (x->cum != y->cum) return x->cum < y->cum ? 1 : -1;
  return x->name < y->name ? -1 : x->name > y->name;
}

static int by_cum(const void *a, const void *b)
{
  const view_site_t *x = a, *y = b;
  if (x->cum != y->cum) return x->cum < y->cum ? 1 : -1;
  return by_flat(a, b);
}

static double share(int64_t part, int64_t total)
{
  return total != 0 ? 100.0 * (double)part / (double)total : 0.0;
}

/* The header: what is shown, how much, how much of it is at named sites. */
static void print_header(const view_t *v, const view_opts_t *o, const char *path)
{
  char total[32], all[32], period[32], type[256];
  printf("%s: %s, %s in %zu stacks", path, tool_escaped(v->type, type, sizeof type),
         view_value(v, v->total, total, sizeof total), v->n_stacks);
  if (v->p->period > 0) printf(" (one sample per %s allocated on average)", tool_bytes(v->p->period, period, sizeof period));
  printf("\n");
  if (o->has_focus || o->has_ignore)
    printf("--focus/--ignore kept %.1f%% of %s\n", share(v->total, v->total_all),
           view_value(v, v->total_all, all, sizeof all));
  if (v->total != 0) printf("%.1f%% of it allocated at named sites\n", share(v->named_leaf, v->total));
}

/* Whether any mapping was symbolized by this command (or another tool). */
static bool symbolized(const profile_t *p)
{
  for (size_t i = 0; i < p->n_mapping; i++) {
    if (p->mapping[i]->has_functions) return true;
  }
  return false;
}

/* A profile of the running process pid (a temporary file, removed once read); NULL after a message. */
static profile_t *live_profile(pid_t pid, bool symbolize, char *title, size_t len)
{
  char tmp[4096], err[1024];
  const char *dir = getenv("TMPDIR");
  snprintf(tmp, sizeof tmp, "%s/mimalloc-prof-top.XXXXXX", dir != NULL && dir[0] != '\0' ? dir : "/tmp");
  int fd = mkstemp(tmp);
  if (fd < 0) {
    tool_error("cannot create %s: %s", tmp, strerror(errno));
    return NULL;
  }
  close(fd);
  profile_t *p = NULL;
  if (ctl_dump_file(pid, tmp, symbolize, err, sizeof err) != 0) tool_error("%s", err);
  else if ((p = profile_read(tmp, err, sizeof err)) == NULL) tool_error("%s", err);
  unlink(tmp);
  char *cmd = ctl_command_line(pid);
  snprintf(title, len, "process %d (%.200s)", (int)pid, cmd);
  free(cmd);
  return p;
}

int cmd_top(int argc, char **argv)
{
  enum { OPT_NOSYM = 0x200 };
  static const struct option opts[] = {VIEW_LONG_OPTIONS, {"sort", required_argument, NULL, VIEW_OPT_SORT},
                                       {"no-symbolize", no_argument, NULL, OPT_NOSYM},
                                       CTL_TIMEOUT_LONG_OPTION, {NULL, 0, NULL, 0}};
  view_opts_t o;
  view_opts_init(&o);
  bool symbolize = true;
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":n:s:h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c == '?' || c == ':') return tool_getopt_error(c, argv);
    if (c == OPT_NOSYM) symbolize = false;
    else if ((rc = c == CTL_OPT_TIMEOUT ? ctl_timeout_option(optarg) : view_option(&o, c, optarg)) != 0)
      return rc;
  }
  if (optind == argc) return tool_usage_error("no profile given");
  if (optind + 1 < argc) return tool_usage_error("one profile at a time ('%s' is one too many; see diff and merge)", argv[optind + 1]);
  const char *path = argv[optind];
  char err[512], title[512];
  pid_t pid;
  profile_t *p;
  bool live = access(path, F_OK) != 0 && tool_parse_pid(path, &pid);   /* not a file: a process */
  if (live) {
    p = live_profile(pid, symbolize, title, sizeof title);
    path = title;
  } else if ((p = profile_read(path, err, sizeof err)) == NULL) {
    tool_error("%s", err);
  }
  view_t v;
  if (p == NULL || (rc = view_build(&v, p, &o)) != 0) {
    profile_free(p);
    view_opts_free(&o);
    return p == NULL ? EXIT_FAILURE : rc;
  }
  print_header(&v, &o, path);
  size_t n;
  view_site_t *sites = view_sites(&v, &n);
  qsort(sites, n, sizeof *sites, o.sort_cum ? by_cum : by_flat);
  printf("%10s %6s %6s %10s %6s  %s\n", "flat", "flat%", "sum%", "cum", "cum%", "function");
  int64_t sum = 0;
  size_t unnamed = 0;
  for (size_t i = 0; i < n && (long)i < o.rows; i++) {
    char flat[32], cum[32];
    sum = tool_add(sum, sites[i].flat);
    unnamed += !v.named[sites[i].name];
    printf("%10s %5.1f%% %5.1f%% %10s %5.1f%%  ", view_value(&v, sites[i].flat, flat, sizeof flat),
           share(sites[i].flat, v.total), share(sum, v.total), view_value(&v, sites[i].cum, cum, sizeof cum),
           share(sites[i].cum, v.total));
    const char *name = v.names[sites[i].name];
    tool_write_escaped(stdout, name, strlen(name), false);
    putchar('\n');
  }
  if (n > (size_t)o.rows) printf("(%zu more sites; -n %zu shows all)\n", n - (size_t)o.rows, n);
  view_hint(&v, &o, stdout);
  if (unnamed != 0 && !symbolized(p) && live)
    printf("(module+offset: no name in the profile yet; without --no-symbolize they are named)\n");
  else if (unnamed != 0 && !symbolized(p))
    printf("(module+offset: no name in the profile yet; `mimalloc-prof symbolize %s` names them)\n", path);
  else if (unnamed != 0)
    printf("(module+offset: no symbols were found for these; `mimalloc-prof symbolize` says why)\n");
  free(sites);
  view_free(&v);
  view_opts_free(&o);
  profile_free(p);
  return EXIT_SUCCESS;
}
