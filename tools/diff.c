/* diff.c - `mimalloc-prof diff BASE NEW`: what changed between two profiles, as pprof's -base does:
 * NEW's samples minus BASE's, matched by location (pbuild.c), so what grew is positive.
 *
 * Sampling noise: the two profiles' estimates are independent, so a site's change has the variance of
 * BASE's value plus NEW's (noise.c); a change smaller than --noise K (default 2) times
 * its standard error is marked "(noise)": with no real change, 95% of the sites stay within 2 standard
 * errors. */
#include "tool.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
  "usage: mimalloc-prof diff [-n ROWS] [-s TYPE] [--sort flat|cum] [--focus RE] [--ignore RE]\n"
  "                          [--fold RE] [--fold-alloc] [--lines] [--full-names] [--tag KEY=VALUE]...\n"
  "                          [--noise K] [-o OUT] BASE NEW\n"
  "Print what changed from profile BASE to profile NEW (NEW minus BASE), largest change first;\n"
  "with -o, also write the difference as a profile.  Symbolize both, or neither, so that their\n"
  "locations match.  Other options as for top.\n"
  "  --noise K   mark changes smaller than K standard errors of sampling noise (default 2; 0: none)\n"
  "See mimalloc-prof(1).\n";

static bool sort_cum;

static int by_change(const void *a, const void *b)
{
  const view_site_t *x = a, *y = b;
  int64_t vx = sort_cum ? x->cum : x->flat, vy = sort_cum ? y->cum : y->flat;
  vx = vx < 0 ? tool_neg(vx) : vx;
  vy = vy < 0 ? tool_neg(vy) : vy;
  if (vx != vy) return vx < vy ? 1 : -1;
  return x->name < y->name ? -1 : x->name > y->name;
}

static int64_t type_total(const profile_t *p, const char *type)
{
  size_t i = profile_sample_type(p, type);
  int64_t total = 0;
  for (size_t s = 0; i != SIZE_MAX && s < p->n_sample; s++) {
    if (i < p->sample[s]->n_value) total = tool_add(total, p->sample[s]->value[i]);
  }
  return total;
}

/* A view's sites by name, for the variances of the sites of another view of the same options. */
typedef struct named_sites_s {
  const view_t *v;
  view_site_t  *sites;
  size_t        n;
} named_sites_t;

static const view_t *sort_view;

static int by_name(const void *a, const void *b)
{
  const view_site_t *x = a, *y = b;
  return strcmp(sort_view->names[x->name], sort_view->names[y->name]);
}

static void named_sites(named_sites_t *ns, const view_t *v)
{
  ns->v = v;
  ns->sites = view_sites(v, &ns->n);
  sort_view = v;
  qsort(ns->sites, ns->n, sizeof *ns->sites, by_name);
}

/* The variance of the site `name` (flat, or with cum its cum's); 0 when the view has no such site. */
static double site_var(const named_sites_t *ns, const char *name, bool cum)
{
  size_t lo = 0, hi = ns->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(ns->v->names[ns->sites[mid].name], name);
    if (c == 0) return cum ? ns->sites[mid].cum_var : ns->sites[mid].flat_var;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

static void print_diff(const view_t *v, const view_opts_t *o, const profile_t *base, const profile_t *new,
                       const named_sites_t *bs, const named_sites_t *ns)
{
  char a[32], b[32], d[32];
  int64_t tb = type_total(base, v->type), tn = type_total(new, v->type);
  printf("%s: %s (BASE) -> %s (NEW), change %s%s\n", v->type, view_value(v, tb, a, sizeof a),
         view_value(v, tn, b, sizeof b), tn >= tb ? "+" : "",
         view_value(v, tool_add(tn, tool_neg(tb)), d, sizeof d));
  size_t n;
  view_site_t *sites = view_sites(v, &n);
  sort_cum = o->sort_cum;
  qsort(sites, n, sizeof *sites, by_change);
  bool noise = o->noise > 0 && bs->v->has_var && ns->v->has_var;
  if (noise)
    printf("(noise): a %s change within %g standard errors of sampling noise (--noise 0: no marks)\n",
           o->sort_cum ? "cum" : "flat", o->noise);
  printf("%11s %11s  %s\n", "flat", "cum", "function");
  size_t shown = 0;
  for (size_t i = 0; i < n && (long)shown < o->rows; i++) {
    if (sites[i].flat == 0 && sites[i].cum == 0) continue;
    char f[32], c[32], fs[40], cs[40];
    const char *name = v->names[sites[i].name];
    snprintf(fs, sizeof fs, "%s%s", sites[i].flat > 0 ? "+" : "", view_value(v, sites[i].flat, f, sizeof f));
    snprintf(cs, sizeof cs, "%s%s", sites[i].cum > 0 ? "+" : "", view_value(v, sites[i].cum, c, sizeof c));
    int64_t change = o->sort_cum ? sites[i].cum : sites[i].flat;
    double se = sqrt(site_var(bs, name, o->sort_cum) + site_var(ns, name, o->sort_cum));
    bool is_noise = noise && fabs((double)change) < o->noise * se;
    printf("%11s %11s  %s%s\n", fs, cs, is_noise ? "(noise) " : "", name);
    shown++;
  }
  if (n > shown) printf("(%zu more sites; -n %zu shows all)\n", n - shown, n);
  if (n == 0) printf("(no change)\n");
  free(sites);
}

int cmd_diff(int argc, char **argv)
{
  static const struct option opts[] = {VIEW_LONG_OPTIONS, {"sort", required_argument, NULL, VIEW_OPT_SORT},
                                       {"output", required_argument, NULL, 'o'},
                                       {"noise", required_argument, NULL, VIEW_OPT_NOISE},
                                       {NULL, 0, NULL, 0}};
  view_opts_t o;
  view_opts_init(&o);
  const char *out = NULL;
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":n:s:o:h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c == '?' || c == ':') return tool_getopt_error(c, argv);
    if (c == 'o') out = optarg;
    else if ((rc = view_option(&o, c, optarg)) != 0) return rc;
  }
  if (argc - optind != 2)
    return tool_usage_error("expected two profiles, BASE and NEW (got %d)", argc - optind);
  char err[512], why[512];
  profile_t *base = profile_read(argv[optind], err, sizeof err), *new = NULL;
  if (base == NULL || (new = profile_read(argv[optind + 1], err, sizeof err)) == NULL) {
    profile_free(base);
    view_opts_free(&o);
    return tool_error("%s", err);
  }
  rc = EXIT_SUCCESS;
  pbuild_t *b = NULL;
  profile_t h;                               /* NEW's header without its peak and timeline (peak.c) */
  int64_t *kept = NULL;
  if (!profile_compatible(base, new, why, sizeof why)) {
    rc = tool_error("%s and %s cannot be compared: %s", argv[optind], argv[optind + 1], why);
  } else if ((b = pbuild_new(heap_header_alone(new, &h, &kept))) == NULL || !pb_add_profile(b, new, 1) ||
             !pb_add_profile(b, base, -1)) {
    rc = tool_error("out of memory");
  } else {
    pb_comment(b, "difference of two profiles (NEW minus BASE) by mimalloc-prof diff");
    const profile_t *d = pbuild_profile(b);
    view_t v, bv, nv;
    if ((rc = view_build(&v, d, &o)) == 0) {
      if ((rc = view_build(&bv, base, &o)) == 0) {
        if ((rc = view_build(&nv, new, &o)) == 0) {
          named_sites_t bs, ns;
          named_sites(&bs, &bv);
          named_sites(&ns, &nv);
          print_diff(&v, &o, base, new, &bs, &ns);
          free(bs.sites);
          free(ns.sites);
          view_free(&nv);
        }
        view_free(&bv);
      }
      view_free(&v);
    }
    if (rc == 0 && out != NULL && profile_write(d, out, err, sizeof err) != 0) rc = tool_error("%s", err);
  }
  pbuild_free(b);
  free(kept);
  profile_free(base);
  profile_free(new);
  view_opts_free(&o);
  return rc;
}
