/* noise.c - the sampling noise of the reports' estimates: the variance of a sample's value (view.c keeps
 * it per stack, view_sites and ctree_build add it up per row), the standard error as printed (top and
 * tree --stderr), and through them diff's noise marks. */
#include "tool.h"

#include <math.h>
#include <string.h>

/* The type paired with the one shown, the other half of its estimate: X_objects for X_space, X_space for
 * X_objects; SIZE_MAX when there is none. */
size_t view_paired_index(const view_t *v)
{
  char name[128];
  const char *us = strrchr(v->type, '_');
  if (us == NULL || strcmp(us, v->bytes ? "_space" : "_objects") != 0) return SIZE_MAX;
  snprintf(name, sizeof name, "%.*s_%s", (int)(us - v->type), v->type, v->bytes ? "objects" : "space");
  return profile_sample_type(v->p, name);
}

/* The estimated variance of a sample's value (top and tree --stderr, diff's noise).
 *
 * A block of s bytes is sampled with probability p = 1 - exp(-s/R) (R: the rate, the profile's period),
 * independently of every other block (Poisson sampling), and a sampled one stands for 1/p blocks and s/p
 * bytes.  An estimate is so a Horvitz-Thompson sum, and the sum over the sampled blocks of
 *     s^2 (1 - p) / p^2   (bytes)        (1 - p) / p^2   (objects)
 * estimates its variance without bias.  A profile's sample keeps the totals of its blocks, bytes B and
 * objects N, not the blocks; its blocks have one size class (the bytes label: within 20%), so with
 * s = B / N and p = 1 - exp(-s/R), N p blocks were sampled and
 *     Var(B) = B s (1 - p) / p,          Var(N) = N (1 - p) / p,
 * exact when the blocks share one size.  For s much smaller than R, Var(B) is about B R: the standard
 * error of B bytes is sqrt(B R), 2.2% of 1 GiB at the default rate of 512 KiB.  The peak types are
 * estimated with half of the samples (lib/peak.c: each half samples at rate 2R), so R is 2R for them.
 * Samples are independent, so a row's variance is the sum over its stacks (view_sites, ctree_build)
 * and its standard error the root of that.  A sample whose value or paired value is not positive (a
 * difference of profiles) has no variance of its own: 0. */
double view_sample_variance(const view_t *v, size_t pair, double rate, const sample_t *smp)
{
  if (pair >= smp->n_value || v->vi >= smp->n_value) return 0;
  double own = (double)smp->value[v->vi], other = (double)smp->value[pair];
  double bytes = v->bytes ? own : other, objects = v->bytes ? other : own;
  if (!(bytes > 0 && objects > 0)) return 0;
  double s = bytes / objects, p = -expm1(-s / rate);
  if (!(p > 0)) return 0;
  return (v->bytes ? bytes * s : objects) * (1 - p) / p;
}

const char *view_stderr(const view_t *v, double var, char *buf, size_t len)
{
  if (!v->has_var) {
    snprintf(buf, len, "?");
    return buf;
  }
  char value[32];
  double se = sqrt(var > 0 ? var : 0);
  int64_t rounded = se < 0x1p62 ? (int64_t)llround(se) : INT64_MAX;
  snprintf(buf, len, "\u00b1%s", view_value(v, rounded, value, sizeof value));
  return buf;
}
