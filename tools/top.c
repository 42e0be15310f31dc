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
  "                         [--fold RE] [--fold-alloc] [--lines] [--full-names] [--tag KEY=VALUE]...\n"
  "                         [--stderr]\n"
  "                         [--by LABEL | --temporary[=DURATION]] [--no-symbolize] [--timeout SECONDS]\n"
  "                         FILE|PID\n"
  "Print the allocation sites of a heap profile, largest first (ROWS, default 20); given the ID of a\n"
  "process with a control socket (MIMALLOC_PROF_CONTROL=1), of a profile taken from it now.\n"
  "  -s, --sample-index TYPE  inuse_space (default), inuse_objects, alloc_space, alloc_objects,\n"
  "                           peak_space, peak_objects (at the peak), freed_space, freed_objects\n"
  "  --sort flat|cum          rank by the site's own amount (default) or with its callees'\n"
  "  --focus RE, --ignore RE  only stacks with / without a frame matching RE (POSIX extended)\n"
  "  --fold RE                charge innermost frames matching RE to their callers\n"
  "  --fold-alloc             the same for operator new, std::allocator, xmalloc-style helpers\n"
  "  --lines                  one site per source line (function file:line)\n"
  "  --full-names             C++ names whole (default: short, std::vector<>::push_back)\n"
  "  --stderr                 each value's standard error (sampling noise), from the rate and counts\n"
  "  --tag KEY=VALUE          only samples labelled so: thread=NAME, bytes=1k-64k, lifetime=-1ms, ...\n"
  "  --by LABEL               a table of the label's values instead: thread, size, process, or any key\n"
  "  --temporary[=DURATION]   sites by the bytes freed within DURATION of their allocation (default\n"
  "                           1ms; units ns, us, ms, s); needs a profile of `run --lifetimes`\n"
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

/* The header: what is shown, how much, how much of it is at named sites; then the heap's totals
 * whatever is shown (in use when written, the peak and when, allocated), and the way to the peak when
 * what is in use is a tenth of it or less. */
static void print_header(const view_t *v, const view_opts_t *o, const char *path)
{
  char total[32], all[32], period[32], type[256], a[32], b[32], c[32], when[32];
  printf("%s: %s, %s in %zu stacks", path, tool_escaped(v->type, type, sizeof type),
         view_value(v, v->total, total, sizeof total), v->n_stacks);
  if (v->p->period > 0)
    printf(" (one sample per %s allocated on average)", tool_bytes(v->p->period, period, sizeof period));
  printf("\n");
  if (o->has_focus || o->has_ignore || o->n_tags != 0)
    printf("%s kept %.1f%% of %s\n", o->n_tags == 0 ? "--focus/--ignore" : "--focus/--ignore/--tag",
           share(v->total, v->total_all), view_value(v, v->total_all, all, sizeof all));
  if (v->total != 0) printf("%.1f%% of it allocated at named sites\n", share(v->named_leaf, v->total));
  heap_totals_t t;
  heap_totals(v->p, &t);
  if (t.stopped_ns != 0) {
    printf("sampling is stopped");
    if (v->p->time_nanos >= t.stopped_ns)
      printf(" (%s before this profile was written)",
             tool_duration(v->p->time_nanos - t.stopped_ns, when, sizeof when));
    printf(": what it shows was sampled until then\n");
  }
  if (!t.has_inuse) return;
  printf("heap: %s in use when written", tool_bytes(t.inuse_bytes, a, sizeof a));
  if (t.has_peak) {
    printf(", peak %s", tool_bytes(t.peak_bytes, b, sizeof b));
    if (t.peak_ns > 0 && t.start_ns > 0 && t.peak_ns >= t.start_ns)
      printf(" (%s after sampling started)", tool_duration(t.peak_ns - t.start_ns, when, sizeof when));
  }
  if (t.has_alloc) printf(", %s allocated", tool_bytes(t.alloc_bytes, c, sizeof c));
  printf("\n");
  heap_peak_note(stdout, &t, "");
  /* give or take one sample's weight (the period: estimates move by whole samples) and 2% of the peak
   * (the recorded peak is the half-B estimate at half A's highest point, which can come a sample or two
   * before the true top: a program at exactly a tenth reads either side of it) */
  int64_t slack = tool_add(v->p->period > 0 ? v->p->period : 0, t.peak_bytes / 50);
  bool small = t.has_peak && t.peak_bytes > 0 && t.inuse_bytes <= tool_add(t.peak_bytes / 10, slack);
  if (small && strncmp(v->type, "peak_", 5) != 0)
    printf("(in use when written is a tenth of the peak or less: -s peak_space shows the sites at the "
           "peak)\n");
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

/* ---------------------------------------------------------------------------------------------------
   --by LABEL: a table of the label's values
--------------------------------------------------------------------------------------------------- */

static void print_by(const view_t *v, const view_opts_t *o, const char *label)
{
  size_t n;
  bool numeric;
  label_group_t *g = label_groups(v, label, &n, &numeric);
  int width = (int)strlen(label), vw = (int)strlen(v->type) > 10 ? (int)strlen(v->type) : 10;
  for (size_t i = 0; i < n && (long)i < o->rows; i++) {
    int w = (int)strlen(g[i].text);
    if (w > width) width = w > 40 ? 40 : w;
  }
  printf("%*s %6s  %-*s  %s\n", vw, v->type, "share", width, label, "largest site");
  for (size_t i = 0; i < n && (long)i < o->rows; i++) {
    char value[32], top[32];
    const char *site = g[i].top_site == UINT32_MAX ? "?" : v->names[g[i].top_site];
    view_value(v, g[i].top_value, top, sizeof top);
    printf("%*s %5.1f%%  %-*s  %s (%s)\n", vw, view_value(v, g[i].value, value, sizeof value),
           share(g[i].value, v->total), width, g[i].text, site, top);
  }
  if (n > (size_t)o->rows) printf("(%zu more values; -n %zu shows all)\n", n - (size_t)o->rows, n);
  if (n == 0) printf("(no samples)\n");
  else if (n == 1 && strcmp(g[0].text, "(no label)") == 0)
    printf("(no sample has the label %s: the profile's samples carry no such label)\n", label);
  label_groups_free(g, n);
}

/* ---------------------------------------------------------------------------------------------------
   --temporary: bytes that lived less than a duration, by allocation site
--------------------------------------------------------------------------------------------------- */

/* Whether a freed sample of p carries a lifetime label. */
static bool has_lifetimes(const profile_t *p, size_t fi)
{
  for (size_t s = 0; s < p->n_sample; s++) {
    const sample_t *smp = p->sample[s];
    const label_t *l = sample_label(p, smp, "lifetime");
    if (l != NULL && l->str == 0 && fi < smp->n_value && smp->value[fi] != 0) return true;
  }
  return false;
}

typedef struct temp_site_s {
  uint32_t name;
  int64_t  temporary, allocated;
} temp_site_t;

static int by_temporary(const void *a, const void *b)
{
  const temp_site_t *x = a, *y = b;
  if (x->temporary != y->temporary) return x->temporary < y->temporary ? 1 : -1;
  if (x->allocated != y->allocated) return x->allocated < y->allocated ? 1 : -1;
  return x->name < y->name ? -1 : x->name > y->name;
}

/* The sites' flat values of `type` under the options, indexed by name id (the views of one profile
 * under the same options name the same frames with the same ids: names are made from the locations
 * before any sample is read). */
static int64_t *flat_by_name(const profile_t *p, const view_opts_t *o, const char *type, view_t *v, int *rc)
{
  view_opts_t to = *o;
  to.sample_index = type;
  if ((*rc = view_build(v, p, &to)) != 0) return NULL;
  int64_t *flat = calloc(v->n_names + 1, sizeof *flat);
  if (flat == NULL) abort();
  for (size_t i = 0; i < v->n_stacks; i++) {
    if (v->stacks[i].depth > 0)
      flat[v->stacks[i].frames[0]] = tool_add(flat[v->stacks[i].frames[0]], v->stacks[i].value);
  }
  return flat;
}

static int print_temporary(const profile_t *p, const view_opts_t *o, const char *path, int64_t below)
{
  size_t fi = profile_sample_type(p, "freed_space");
  if (fi == SIZE_MAX || !has_lifetimes(p, fi))
    return tool_error("%s records no lifetimes (no freed_space samples with a lifetime label): profile the "
                      "program with `mimalloc-prof run --lifetimes`, or MIMALLOC_PROF_LIFETIMES=1", path);
  if (profile_sample_type(p, "alloc_space") == SIZE_MAX) return tool_error("%s has no alloc_space", path);
  /* The freed samples whose lifetime bucket starts below the duration: a tag of its own group. */
  view_opts_t fo = *o;
  fo.tags = malloc((o->n_tags + 1) * sizeof *fo.tags);
  if (fo.tags == NULL) abort();
  if (o->n_tags != 0) memcpy(fo.tags, o->tags, o->n_tags * sizeof *fo.tags);
  fo.tags[o->n_tags] = (view_tag_t){"lifetime", "", true, INT64_MIN, below - 1, (int)o->n_tags};
  fo.n_tags = o->n_tags + 1;
  view_t tv, av;
  int rc;
  int64_t *temp = flat_by_name(p, &fo, "freed_space", &tv, &rc);
  free(fo.tags);
  if (temp == NULL) return rc;
  int64_t *alloc = flat_by_name(p, o, "alloc_space", &av, &rc);
  if (alloc == NULL) {
    free(temp);
    view_free(&tv);
    return rc;
  }
  if (av.n_names != tv.n_names) abort();           /* see flat_by_name */
  temp_site_t *sites = malloc((tv.n_names + 1) * sizeof *sites);
  if (sites == NULL) abort();
  size_t n = 0;
  for (size_t i = 0; i < tv.n_names; i++) {
    if (temp[i] != 0 || alloc[i] != 0) sites[n++] = (temp_site_t){(uint32_t)i, temp[i], alloc[i]};
  }
  qsort(sites, n, sizeof *sites, by_temporary);

  char d[32], lo[32], hi[32], t[32], a[32], period[32];
  printf("%s: temporary allocations: bytes freed less than %s after their allocation", path,
         tool_duration(below, d, sizeof d));
  if (p->period > 0)
    printf(" (one sample per %s allocated on average)", tool_bytes(p->period, period, sizeof period));
  printf("\n");
  /* The library's buckets are [2^(b-1), 2^b) ns, labelled with their lower bound: the one holding the
   * duration starts below it and counts whole, unless the duration is a power of two (a bucket's bound). */
  int64_t straddle_lo = (int64_t)1 << (63 - __builtin_clzll((unsigned long long)below));
  if (straddle_lo < below && straddle_lo <= INT64_MAX / 2)
    printf("(lifetimes are kept in power-of-two buckets: [%s, %s) holds %s and counts whole)\n",
           tool_duration(straddle_lo, lo, sizeof lo), tool_duration(2 * straddle_lo, hi, sizeof hi), d);
  printf("%s temporary of %s allocated (%.1f%%)\n", tool_bytes(tv.total, t, sizeof t),
         tool_bytes(av.total, a, sizeof a), share(tv.total, av.total));
  printf("%10s %6s %8s %10s  %s\n", "temporary", "temp%", "of site", "allocated", "function");
  for (size_t i = 0; i < n && (long)i < o->rows; i++) {
    printf("%10s %5.1f%% %7.1f%% %10s  %s\n", tool_bytes(sites[i].temporary, t, sizeof t),
           share(sites[i].temporary, tv.total), share(sites[i].temporary, sites[i].allocated),
           tool_bytes(sites[i].allocated, a, sizeof a), tv.names[sites[i].name]);
  }
  if (n > (size_t)o->rows) printf("(%zu more sites; -n %zu shows all)\n", n - (size_t)o->rows, n);
  free(sites);
  free(temp);
  free(alloc);
  view_free(&tv);
  view_free(&av);
  return EXIT_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------------
   The command
--------------------------------------------------------------------------------------------------- */

static void print_sites(const view_t *v, const view_opts_t *o, const profile_t *p, const char *path,
                        bool live)
{
  size_t n;
  view_site_t *sites = view_sites(v, &n);
  qsort(sites, n, sizeof *sites, o->sort_cum ? by_cum : by_flat);
  /* --stderr: each value's standard error beside it ("\u00b1" is two bytes, one column: widths + 1) */
  if (o->show_stderr)
    printf("%10s %11s %6s %6s %10s %11s %6s  %s\n", "flat", "stderr", "flat%", "sum%", "cum", "stderr",
           "cum%", "function");
  else
    printf("%10s %6s %6s %10s %6s  %s\n", "flat", "flat%", "sum%", "cum", "cum%", "function");
  int64_t sum = 0;
  size_t unnamed = 0;
  for (size_t i = 0; i < n && (long)i < o->rows; i++) {
    char flat[32], cum[32], fse[40], cse[40];
    sum = tool_add(sum, sites[i].flat);
    unnamed += !v->named[sites[i].name];
    view_value(v, sites[i].flat, flat, sizeof flat);
    view_value(v, sites[i].cum, cum, sizeof cum);
    if (o->show_stderr)
      printf("%10s %12s %5.1f%% %5.1f%% %10s %12s %5.1f%%  ", flat,
             view_stderr(v, sites[i].flat_var, fse, sizeof fse), share(sites[i].flat, v->total),
             share(sum, v->total), cum, view_stderr(v, sites[i].cum_var, cse, sizeof cse),
             share(sites[i].cum, v->total));
    else
      printf("%10s %5.1f%% %5.1f%% %10s %5.1f%%  ", flat, share(sites[i].flat, v->total),
             share(sum, v->total), cum, share(sites[i].cum, v->total));
    const char *name = v->names[sites[i].name];
    tool_write_escaped(stdout, name, strlen(name), false);
    putchar('\n');
  }
  if (n > (size_t)o->rows) printf("(%zu more sites; -n %zu shows all)\n", n - (size_t)o->rows, n);
  if (o->show_stderr && !v->has_var)
    printf("(stderr: the profile has no sample rate, or no %s type to pair with %s: not known)\n",
           v->bytes ? "objects" : "space", v->type);
  view_hint(v, o, stdout);
  if (unnamed != 0 && !symbolized(p) && live)
    printf("(module+offset: no name in the profile yet; without --no-symbolize they are named)\n");
  else if (unnamed != 0 && !symbolized(p))
    printf("(module+offset: no name in the profile yet; `mimalloc-prof symbolize %s` names them)\n", path);
  else if (unnamed != 0)
    printf("(module+offset: no symbols were found for these; `mimalloc-prof symbolize` says why)\n");
  free(sites);
}

int cmd_top(int argc, char **argv)
{
  enum { OPT_NOSYM = 0x200, OPT_BY, OPT_TEMPORARY };
  static const struct option opts[] = {VIEW_LONG_OPTIONS, {"sort", required_argument, NULL, VIEW_OPT_SORT},
                                       {"no-symbolize", no_argument, NULL, OPT_NOSYM}, VIEW_STDERR_OPTION,
                                       {"by", required_argument, NULL, OPT_BY},
                                       {"temporary", optional_argument, NULL, OPT_TEMPORARY},
                                       CTL_TIMEOUT_LONG_OPTION, {NULL, 0, NULL, 0}};
  view_opts_t o;
  view_opts_init(&o);
  bool symbolize = true;
  const char *by = NULL;
  int64_t temporary = 0;                          /* ns; 0: not asked for */
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":n:s:h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c == '?' || c == ':') return tool_getopt_error(c, argv);
    if (c == OPT_NOSYM) symbolize = false;
    else if (c == OPT_BY && optarg[0] == '\0')
      return tool_usage_error("--by: expected a label (thread, size, ...)");
    else if (c == OPT_BY) by = optarg;
    else if (c == OPT_TEMPORARY) {
      temporary = 1000000;
      if (optarg != NULL && (!tool_parse_duration(optarg, &temporary) || temporary <= 0))
        return tool_usage_error("--temporary '%s': expected a duration above 0 with its unit (such as 1ms, "
                                "500us, 2s)", optarg);
    } else if ((rc = c == CTL_OPT_TIMEOUT ? ctl_timeout_option(optarg) : view_option(&o, c, optarg)) != 0)
      return rc;
  }
  if (by != NULL && temporary != 0) return tool_usage_error("--by and --temporary exclude each other");
  if (temporary != 0 && o.sample_index != NULL)
    return tool_usage_error("--temporary shows freed_space by lifetime: -s does not apply");
  if ((rc = tool_one_profile(argc, argv, "; see diff and merge")) != 0) return rc;
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
  if (p == NULL) {
    view_opts_free(&o);
    return EXIT_FAILURE;
  }
  if (temporary != 0) {
    rc = print_temporary(p, &o, path, temporary);
  } else {
    view_t v;
    if ((rc = view_build(&v, p, &o)) == 0) {
      print_header(&v, &o, path);
      if (by != NULL) print_by(&v, &o, by);
      else print_sites(&v, &o, p, path, live);
      view_free(&v);
    }
  }
  view_opts_free(&o);
  profile_free(p);
  return rc;
}
