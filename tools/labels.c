/* labels.c - the labels of samples as the reports use them: --tag filters (view.c applies them) and the
 * table of a label's values (`top --by`).
 *
 * The library labels each sample with `thread` (a string), `bytes` (the requested size, a number in
 * bytes) and, on freed_* samples, `lifetime` (a number in nanoseconds); a profile that joins several
 * processes may carry `process` and `pid`.  Any other key a profile carries works the same way.  `size`
 * is another name for `bytes`.
 *
 * --tag KEY=VALUE keeps the samples whose label KEY is VALUE: a string label equal to VALUE, or a
 * numeric one equal to the number VALUE or within the range LO-HI (also LO:HI as pprof writes it; LO-
 * and -HI are open; both ends included).  Numbers take the suffixes k, m, g, t (KiB ...; KiB, MiB, ...
 * too) and ns, us, ms, s (for nanoseconds).  Tags of one key are alternatives; tags of different keys
 * must all hold.  A sample without the label does not match.
 */
#include "tool.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TAGS 64

/* The label key `name` stands for ("size" is "bytes"). */
static const char *label_key(const char *name)
{
  return strcmp(name, "size") == 0 ? "bytes" : name;
}

/* ---------------------------------------------------------------------------------------------------
   Numbers with units
--------------------------------------------------------------------------------------------------- */

static const struct {
  const char *suffix;
  double      scale;
  bool        time;            /* a duration in nanoseconds, else a byte count or a plain number */
} units[] = {
  {"", 1, false},                 {"B", 1, false},
  {"k", 1024.0, false},           {"K", 1024.0, false},           {"KiB", 1024.0, false},
  {"m", 1048576.0, false},        {"M", 1048576.0, false},        {"MiB", 1048576.0, false},
  {"g", 1073741824.0, false},     {"G", 1073741824.0, false},     {"GiB", 1073741824.0, false},
  {"t", 1099511627776.0, false},  {"T", 1099511627776.0, false},  {"TiB", 1099511627776.0, false},
  {"ns", 1, true}, {"us", 1e3, true}, {"\xc2\xb5s", 1e3, true}, {"ms", 1e6, true}, {"s", 1e9, true},
};

/* A decimal number (a fraction allowed) and one of the suffixes, of durations only when `time`. */
static bool parse_scaled(const char *text, bool time_only, int64_t *out)
{
  if ((text[0] < '0' || text[0] > '9') && text[0] != '.') return false;
  errno = 0;
  char *end;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || !isfinite(v)) return false;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if ((time_only && !units[i].time) || strcmp(end, units[i].suffix) != 0) continue;
    double scaled = v * units[i].scale;
    if (scaled >= 9.2e18) return false;
    *out = (int64_t)llround(scaled);
    return true;
  }
  return false;
}

bool tool_parse_amount(const char *text, int64_t *out)
{
  return parse_scaled(text, false, out);
}

bool tool_parse_duration(const char *text, int64_t *ns)
{
  return parse_scaled(text, true, ns);
}

const char *tool_duration(int64_t ns, char *buf, size_t len)
{
  static const char *const unit[] = {"ns", "us", "ms", "s"};
  double v = (double)ns;
  size_t u = 0;
  while (u < 3 && (v >= 999.5 || v <= -999.5)) v /= 1000, u++;
  if (u == 0) snprintf(buf, len, "%lld ns", (long long)ns);
  else if (v < 9.995 && v > -9.995) snprintf(buf, len, "%.2f %s", v, unit[u]);
  else if (v < 99.95 && v > -99.95) snprintf(buf, len, "%.1f %s", v, unit[u]);
  else snprintf(buf, len, "%.0f %s", v, unit[u]);
  return buf;
}

/* ---------------------------------------------------------------------------------------------------
   --tag
--------------------------------------------------------------------------------------------------- */

int view_tag_option(view_opts_t *o, const char *arg)
{
  const char *eq = strchr(arg, '=');
  if (eq == NULL || eq == arg || eq[1] == '\0')
    return tool_usage_error("--tag '%s': expected KEY=VALUE (such as thread=worker or bytes=1k-64k)", arg);
  if (o->n_tags == MAX_TAGS) return tool_usage_error("--tag given more than %d times", MAX_TAGS);
  view_tag_t *tags = realloc(o->tags, (o->n_tags + 1) * sizeof *tags);
  if (tags == NULL) abort();
  o->tags = tags;
  view_tag_t *t = &tags[o->n_tags];
  memset(t, 0, sizeof *t);
  char key[128];
  snprintf(key, sizeof key, "%.*s", (int)(eq - arg), arg);
  t->key = strdup(label_key(key));
  t->str = strdup(eq + 1);
  if (t->key == NULL || t->str == NULL) abort();
  t->group = (int)o->n_tags;
  for (size_t i = 0; i < o->n_tags; i++) {
    if (strcmp(tags[i].key, t->key) == 0) t->group = tags[i].group;
  }
  /* The numeric reading, for numeric labels: N, LO-HI, LO:HI, LO-, -HI. */
  const char *v = eq + 1;
  char lo[64] = "", hi[64] = "";
  const char *sep = strpbrk(v + (v[0] == '-' || v[0] == ':' ? 0 : 1), "-:");
  t->lo = INT64_MIN;
  t->hi = INT64_MAX;
  if (sep == NULL) {
    t->numeric = tool_parse_amount(v, &t->lo) && (t->hi = t->lo, true);
  } else if ((size_t)(sep - v) < sizeof lo && strlen(sep + 1) < sizeof hi) {
    snprintf(lo, sizeof lo, "%.*s", (int)(sep - v), v);
    snprintf(hi, sizeof hi, "%s", sep + 1);
    t->numeric = (lo[0] != '\0' || hi[0] != '\0') && (lo[0] == '\0' || tool_parse_amount(lo, &t->lo)) &&
                 (hi[0] == '\0' || tool_parse_amount(hi, &t->hi)) && t->lo <= t->hi;
  }
  o->n_tags++;
  return 0;
}

void view_tags_free(view_opts_t *o)
{
  for (size_t i = 0; i < o->n_tags; i++) {
    free(o->tags[i].key);
    free(o->tags[i].str);
  }
  free(o->tags);
  o->tags = NULL;
  o->n_tags = 0;
}

const label_t *sample_label(const profile_t *p, const sample_t *s, const char *key)
{
  for (size_t i = 0; i < s->n_label; i++) {
    if (strcmp(pstr(p, s->label[i]->key), key) == 0) return s->label[i];
  }
  return NULL;
}

static bool tag_matches(const profile_t *p, const sample_t *s, const view_tag_t *t)
{
  const label_t *l = sample_label(p, s, t->key);
  if (l == NULL) return false;
  if (l->str != 0) return strcmp(pstr(p, l->str), t->str) == 0;
  return t->numeric && l->num >= t->lo && l->num <= t->hi;
}

bool view_tags_match(const profile_t *p, const sample_t *s, const view_tag_t *tags, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (tags[i].group != (int)i) continue;     /* the first tag of its group checks the group */
    bool any = false;
    for (size_t k = i; k < n && !any; k++) any = tags[k].group == (int)i && tag_matches(p, s, &tags[k]);
    if (!any) return false;
  }
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   --by: the table of a label's values
--------------------------------------------------------------------------------------------------- */

/* One stack's group and site, for sorting. */
typedef struct by_entry_s {
  int64_t  num;                /* numeric label: the value (or the size class's lower bound) */
  const char *str;             /* string label, "" for a numeric one; NULL: the sample has no such label */
  uint32_t site;
  int64_t  value, objects;
} by_entry_t;

static int by_entry_cmp(const void *a, const void *b)
{
  const by_entry_t *x = a, *y = b;
  if ((x->str == NULL) != (y->str == NULL)) return x->str == NULL ? 1 : -1;
  if (x->str != NULL) {
    int c = strcmp(x->str, y->str);
    if (c != 0) return c;
  }
  if (x->num != y->num) return x->num < y->num ? -1 : 1;
  return x->site < y->site ? -1 : x->site > y->site;
}

/* The lower bound of the power-of-two class of a size: 0, 1, 2, 4, 8, ... */
static int64_t size_class(int64_t bytes)
{
  if (bytes <= 0) return 0;
  return (int64_t)1 << (63 - __builtin_clzll((unsigned long long)bytes));
}

static void group_text(const by_entry_t *e, const char *unit, bool classes, char *buf, size_t len)
{
  char a[32], b[32];
  if (e->str == NULL) snprintf(buf, len, "(no label)");
  else if (e->str[0] != '\0') snprintf(buf, len, "%s", e->str);
  else if (classes && e->num > 0 && e->num < INT64_MAX / 2)
    snprintf(buf, len, "%s - %s", tool_bytes(e->num, a, sizeof a), tool_bytes(e->num * 2 - 1, b, sizeof b));
  else if (strcmp(unit, "bytes") == 0) tool_bytes(e->num, buf, len);
  else if (strcmp(unit, "nanoseconds") == 0) tool_duration(e->num, buf, len);
  else snprintf(buf, len, "%lld%s%s", (long long)e->num, unit[0] ? " " : "", unit);
}

static int by_group_value(const void *a, const void *b)
{
  const label_group_t *x = a, *y = b;
  if (x->value != y->value) return x->value < y->value ? 1 : -1;
  return strcmp(x->text, y->text);
}

label_group_t *label_groups(const view_t *v, const char *name, size_t *n_groups, bool *numeric)
{
  const profile_t *p = v->p;
  const char *key = label_key(name);
  bool classes = strcmp(name, "size") == 0;   /* sizes in power-of-two classes; `bytes` gives each value */
  by_entry_t *e = malloc((v->n_stacks + 1) * sizeof *e);
  if (e == NULL) abort();
  const char *unit = "";
  *numeric = false;
  for (size_t i = 0; i < v->n_stacks; i++) {
    const view_stack_t *st = &v->stacks[i];
    const label_t *l = sample_label(p, p->sample[st->sample], key);
    e[i] = (by_entry_t){0, NULL, st->depth ? st->frames[0] : UINT32_MAX, st->value, st->objects};
    if (l == NULL) continue;
    if (l->str != 0) {
      e[i].str = pstr(p, l->str);
    } else {
      e[i].str = "";
      e[i].num = classes ? size_class(l->num) : l->num;
      unit = pstr(p, l->num_unit);
      *numeric = true;
    }
  }
  qsort(e, v->n_stacks, sizeof *e, by_entry_cmp);
  label_group_t *g = calloc(v->n_stacks + 1, sizeof *g);
  if (g == NULL) abort();
  size_t n = 0;
  for (size_t i = 0; i < v->n_stacks;) {
    label_group_t *cur = &g[n++];
    char text[256];
    group_text(&e[i], unit, classes, text, sizeof text);
    cur->text = strdup(text);
    if (cur->text == NULL) abort();
    cur->top_site = UINT32_MAX;
    size_t j = i;
    while (j < v->n_stacks && (e[j].str == NULL) == (e[i].str == NULL) &&
           (e[i].str == NULL || strcmp(e[j].str, e[i].str) == 0) && e[j].num == e[i].num) {
      size_t k = j;                                   /* one site within the group */
      int64_t site_value = 0;
      for (; k < v->n_stacks && by_entry_cmp(&e[k], &e[j]) == 0; k++) {
        site_value = tool_add(site_value, e[k].value);
        cur->value = tool_add(cur->value, e[k].value);
        cur->objects = tool_add(cur->objects, e[k].objects);
      }
      if (cur->top_site == UINT32_MAX || site_value > cur->top_value) {
        cur->top_site = e[j].site;
        cur->top_value = site_value;
      }
      j = k;
    }
    i = j;
  }
  free(e);
  if (!*numeric) qsort(g, n, sizeof *g, by_group_value);   /* strings: largest first; numbers: in order */
  *n_groups = n;
  return g;
}

void label_groups_free(label_group_t *g, size_t n)
{
  for (size_t i = 0; i < n; i++) free(g[i].text);
  free(g);
}
