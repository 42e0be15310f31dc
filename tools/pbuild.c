/* pbuild.c - builds a new profile, interning every part: equal strings, functions, mappings, locations
 * and samples are stored once.  symbolize, merge and diff write their results through it.
 *
 * Merging follows pprof's rules: the profiles must have the same sample types and period type; a
 * mapping of the same file (build ID or name, file offset and size) is shared, and the addresses of the
 * later profiles' locations in it move by the difference of the start addresses (each process has its
 * own load address); locations are equal when mapping, address and lines are; samples are equal when
 * their locations and labels are (labels compared in a canonical order, so the order a writer chose does
 * not matter), and their values add up (saturated at the ends of int64_t).  The period becomes the
 * largest; the time the earliest start, and the duration reaches the latest end, whatever the order of
 * the profiles.
 *
 * The tables hash with tool_hash, keyed per process: the parts come from profiles that may be hostile.
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

/* An open-addressing index of entry numbers (slot = entry + 1, 0 = empty), with each entry's hash kept
 * beside it for growing. */
typedef struct htab_s {
  uint32_t *slot;
  size_t    cap;                 /* a power of two, at least twice the entries */
  uint64_t *hash;                /* by entry */
  size_t    hash_cap;
} htab_t;

struct pbuild_s {
  profile_t     p;
  char        **strings;
  size_t        n_strings, cap_strings;
  htab_t        string_ix;
  function_t  **functions;
  size_t        n_functions, cap_functions;
  htab_t        function_ix;
  mapping_t   **mappings;
  size_t        n_mappings, cap_mappings;
  htab_t        mapping_ix;
  location_t  **locations;
  size_t        n_locations, cap_locations;
  htab_t        location_ix;
  sample_t    **samples;
  size_t        n_samples, cap_samples;
  htab_t        sample_ix;
  size_t        n_values;
  size_t        cap_comments;
  pb_label_t    extra[2];      /* labels pb_sample_from gives every sample (pb_extra_labels) */
  size_t        n_extra;
  bool          failed;
};

/* Makes room for entry number `n` in an array of pointers (entry numbers fit the index's 32 bits). */
static bool grow(pbuild_t *b, void *array, size_t *cap, size_t n)
{
  void ***a = array;
  if (n < *cap) return true;
  if (n >= UINT32_MAX - 1) return b->failed = true, false;
  size_t c = *cap ? *cap * 2 : 64;
  void **bigger = realloc(*a, c * sizeof(void *));
  if (bigger == NULL) return b->failed = true, false;
  *a = bigger;
  *cap = c;
  return true;
}

/* Makes room for entry `n` in the index (rehashing when half full). */
static bool htab_reserve(pbuild_t *b, htab_t *h, size_t n)
{
  if (n >= h->hash_cap) {
    size_t c = h->hash_cap ? h->hash_cap * 2 : 64;
    uint64_t *bigger = realloc(h->hash, c * sizeof *bigger);
    if (bigger == NULL) return b->failed = true, false;
    h->hash = bigger;
    h->hash_cap = c;
  }
  if ((n + 1) * 2 <= h->cap) return true;
  size_t cap = h->cap ? h->cap * 2 : 128;
  uint32_t *slot = calloc(cap, sizeof *slot);
  if (slot == NULL) return b->failed = true, false;
  for (size_t e = 0; e < n; e++) {
    size_t i = (size_t)h->hash[e] & (cap - 1);
    while (slot[i] != 0) i = (i + 1) & (cap - 1);
    slot[i] = (uint32_t)e + 1;
  }
  free(h->slot);
  h->slot = slot;
  h->cap = cap;
  return true;
}

/* The entry x_ with this hash for which entry_eq (an expression of x_) holds, or SIZE_MAX with *pos the
 * free slot to use. */
#define HTAB_FIND(h, hv, entry_eq, pos)                                                                     \
  ({                                                                                                        \
    size_t found_ = SIZE_MAX, i_ = (size_t)(hv) & ((h)->cap - 1);                                           \
    for (; (h)->slot[i_] != 0; i_ = (i_ + 1) & ((h)->cap - 1)) {                                            \
      size_t x_ = (h)->slot[i_] - 1;                                                                        \
      if ((h)->hash[x_] == (hv) && (entry_eq)) {                                                            \
        found_ = x_;                                                                                         \
        break;                                                                                              \
      }                                                                                                     \
    }                                                                                                       \
    *(pos) = i_;                                                                                            \
    found_;                                                                                                 \
  })

static void htab_put(htab_t *h, size_t pos, uint64_t hv, size_t entry)
{
  h->slot[pos] = (uint32_t)entry + 1;
  h->hash[entry] = hv;
}

static void htab_free(htab_t *h)
{
  free(h->slot);
  free(h->hash);
}

/* ---------------------------------------------------------------------------------------------------
   Strings, functions, mappings, locations, samples
--------------------------------------------------------------------------------------------------- */

int64_t pb_string(pbuild_t *b, const char *s)
{
  if (s == NULL) s = "";
  if (!grow(b, &b->strings, &b->cap_strings, b->n_strings) || !htab_reserve(b, &b->string_ix, b->n_strings))
    return 0;
  uint64_t hv = tool_hash_str(s);
  size_t pos, e = HTAB_FIND(&b->string_ix, hv, strcmp(b->strings[x_], s) == 0, &pos);
  if (e != SIZE_MAX) return (int64_t)e;
  char *copy = strdup(s);
  if (copy == NULL) return b->failed = true, 0;
  b->strings[b->n_strings] = copy;
  htab_put(&b->string_ix, pos, hv, b->n_strings);
  return (int64_t)b->n_strings++;
}

uint64_t pb_function(pbuild_t *b, const char *name, const char *system_name, const char *file,
                     int64_t start_line)
{
  int64_t n = pb_string(b, name), sn = pb_string(b, system_name ? system_name : name), f = pb_string(b, file);
  if (!grow(b, &b->functions, &b->cap_functions, b->n_functions) ||
      !htab_reserve(b, &b->function_ix, b->n_functions))
    return 0;
  uint64_t hv = tool_hash(tool_hash(tool_hash_key(), (uint64_t)n), (uint64_t)sn);
  hv = tool_hash(tool_hash(hv, (uint64_t)f), (uint64_t)start_line);
  size_t pos, e = HTAB_FIND(&b->function_ix, hv,
                            b->functions[x_]->name == n && b->functions[x_]->system_name == sn &&
                              b->functions[x_]->filename == f && b->functions[x_]->start_line == start_line,
                            &pos);
  if (e != SIZE_MAX) return b->functions[e]->id;
  function_t *fn = malloc(sizeof *fn);
  if (fn == NULL) return b->failed = true, 0;
  perftools__profiles__function__init(fn);
  fn->id = b->n_functions + 1;
  fn->name = n;
  fn->system_name = sn;
  fn->filename = f;
  fn->start_line = start_line;
  b->functions[b->n_functions] = fn;
  htab_put(&b->function_ix, pos, hv, b->n_functions++);
  return fn->id;
}

uint64_t pb_mapping(pbuild_t *b, const profile_t *p, const mapping_t *m, int64_t *delta)
{
  int64_t file = pb_string(b, pstr(p, m->filename)), bid = pb_string(b, pstr(p, m->build_id));
  uint64_t size = m->memory_limit - m->memory_start;
  *delta = 0;
  if (!grow(b, &b->mappings, &b->cap_mappings, b->n_mappings) ||
      !htab_reserve(b, &b->mapping_ix, b->n_mappings))
    return 0;
  uint64_t key = bid != 0 ? (uint64_t)bid : (uint64_t)file;
  uint64_t hv = tool_hash(tool_hash(tool_hash(tool_hash_key(), key), m->file_offset), size);
  size_t pos, e = HTAB_FIND(&b->mapping_ix, hv,
                            (bid != 0 ? b->mappings[x_]->build_id == bid
                                      : b->mappings[x_]->filename == file) &&
                              b->mappings[x_]->file_offset == m->file_offset &&
                              b->mappings[x_]->memory_limit - b->mappings[x_]->memory_start == size,
                            &pos);
  if (e != SIZE_MAX) {
    *delta = (int64_t)(b->mappings[e]->memory_start - m->memory_start);
    mapping_t *old = b->mappings[e];
    old->has_functions &= m->has_functions;     /* true only when true of every part */
    old->has_filenames &= m->has_filenames;
    old->has_line_numbers &= m->has_line_numbers;
    old->has_inline_frames &= m->has_inline_frames;
    return old->id;
  }
  mapping_t *copy = malloc(sizeof *copy);
  if (copy == NULL) return b->failed = true, 0;
  perftools__profiles__mapping__init(copy);
  copy->id = b->n_mappings + 1;
  copy->memory_start = m->memory_start;
  copy->memory_limit = m->memory_limit;
  copy->file_offset = m->file_offset;
  copy->has_functions = m->has_functions;
  copy->has_filenames = m->has_filenames;
  copy->has_line_numbers = m->has_line_numbers;
  copy->has_inline_frames = m->has_inline_frames;
  copy->filename = file;
  copy->build_id = bid;
  b->mappings[b->n_mappings] = copy;
  htab_put(&b->mapping_ix, pos, hv, b->n_mappings++);
  return copy->id;
}

void pb_mapping_flags(pbuild_t *b, uint64_t id, bool functions, bool filenames, bool lines, bool inlines)
{
  if (id == 0 || id > b->n_mappings) return;
  mapping_t *m = b->mappings[id - 1];
  m->has_functions = functions;
  m->has_filenames = filenames;
  m->has_line_numbers = lines;
  m->has_inline_frames = inlines;
}

static bool lines_equal(const location_t *l, const pb_line_t *lines, size_t n)
{
  if (l->n_line != n) return false;
  for (size_t i = 0; i < n; i++) {
    if (l->line[i]->function_id != lines[i].function_id || l->line[i]->line != lines[i].line) return false;
  }
  return true;
}

uint64_t pb_location(pbuild_t *b, uint64_t mapping_id, uint64_t address, const pb_line_t *lines,
                     size_t n_lines)
{
  if (!grow(b, &b->locations, &b->cap_locations, b->n_locations) ||
      !htab_reserve(b, &b->location_ix, b->n_locations))
    return 0;
  uint64_t hv = tool_hash(tool_hash(tool_hash_key(), mapping_id), address);
  for (size_t i = 0; i < n_lines; i++)
    hv = tool_hash(tool_hash(hv, lines[i].function_id), (uint64_t)lines[i].line);
  size_t pos, e = HTAB_FIND(&b->location_ix, hv,
                            b->locations[x_]->mapping_id == mapping_id &&
                              b->locations[x_]->address == address &&
                              lines_equal(b->locations[x_], lines, n_lines),
                            &pos);
  if (e != SIZE_MAX) return b->locations[e]->id;
  location_t *l = malloc(sizeof *l);
  line_t **lp = malloc(n_lines * (sizeof *lp + sizeof(line_t)) + 1);   /* pointers, then the lines */
  if (l == NULL || lp == NULL) {
    free(l), free(lp);
    return b->failed = true, 0;
  }
  line_t *ls = (line_t *)(lp + n_lines);
  perftools__profiles__location__init(l);
  l->id = b->n_locations + 1;
  l->mapping_id = mapping_id;
  l->address = address;
  for (size_t i = 0; i < n_lines; i++) {
    perftools__profiles__line__init(&ls[i]);
    ls[i].function_id = lines[i].function_id;
    ls[i].line = lines[i].line;
    lp[i] = &ls[i];
  }
  l->line = lp;
  l->n_line = n_lines;
  b->locations[b->n_locations] = l;
  htab_put(&b->location_ix, pos, hv, b->n_locations++);
  return l->id;
}

uint64_t pb_copy_function(pbuild_t *b, const profile_t *p, const pindex_t *ix, uint64_t id, uint64_t *copied)
{
  size_t i = pindex_function_pos(ix, id);
  if (i == SIZE_MAX) return 0;
  if (copied[i] == 0) {
    const function_t *f = p->function[i];
    copied[i] = 1 + pb_function(b, pstr(p, f->name), pstr(p, f->system_name), pstr(p, f->filename),
                                f->start_line);
  }
  return copied[i] - 1;
}

static bool ids_equal(const sample_t *s, const uint64_t *ids, size_t n)
{
  return s->n_location_id == n && (n == 0 || memcmp(s->location_id, ids, n * sizeof *ids) == 0);
}

/* Labels in their canonical order: by key, string, number, unit (string ids of the builder). */
static int label_cmp(const pb_label_t *x, const pb_label_t *y)
{
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->str != y->str) return x->str < y->str ? -1 : 1;
  if (x->num != y->num) return x->num < y->num ? -1 : 1;
  return x->num_unit < y->num_unit ? -1 : x->num_unit > y->num_unit;
}

static int label_order(const void *x, const void *y) { return label_cmp(x, y); }

static bool labels_equal(const sample_t *s, const pb_label_t *labels, size_t n)
{
  if (s->n_label != n) return false;
  for (size_t i = 0; i < n; i++) {
    const label_t *l = s->label[i];
    if (l->key != labels[i].key || l->str != labels[i].str || l->num != labels[i].num ||
        l->num_unit != labels[i].num_unit)
      return false;
  }
  return true;
}

/* The sample's labels: pointers, then the labels, in one block. */
static label_t **labels_copy(const pb_label_t *labels, size_t n)
{
  label_t **lp = malloc(n * (sizeof *lp + sizeof(label_t)) + 1);
  if (lp == NULL) return NULL;
  label_t *ls = (label_t *)(lp + n);
  for (size_t i = 0; i < n; i++) {
    perftools__profiles__label__init(&ls[i]);
    ls[i].key = labels[i].key;
    ls[i].str = labels[i].str;
    ls[i].num = labels[i].num;
    ls[i].num_unit = labels[i].num_unit;
    lp[i] = &ls[i];
  }
  return lp;
}

static void sample_free(sample_t *s)
{
  free(s->location_id);
  free(s->value);
  free(s->label);
  free(s);
}

void pb_sample(pbuild_t *b, const uint64_t *ids, size_t n, const int64_t *values, int sign)
{
  pb_sample_labels(b, ids, n, NULL, 0, values, sign);
}

void pb_sample_labels(pbuild_t *b, const uint64_t *ids, size_t n, pb_label_t *labels, size_t n_labels,
                      const int64_t *values, int sign)
{
  if (!grow(b, &b->samples, &b->cap_samples, b->n_samples) || !htab_reserve(b, &b->sample_ix, b->n_samples))
    return;
  if (n_labels > 1) qsort(labels, n_labels, sizeof *labels, label_order);
  uint64_t hv = tool_hash_key();
  for (size_t i = 0; i < n; i++) hv = tool_hash(hv, ids[i]);
  for (size_t i = 0; i < n_labels; i++)
    hv = tool_hash(tool_hash(tool_hash(tool_hash(hv, (uint64_t)labels[i].key), (uint64_t)labels[i].str),
                             (uint64_t)labels[i].num),
                   (uint64_t)labels[i].num_unit);
  size_t pos, e = HTAB_FIND(&b->sample_ix, hv,
                            ids_equal(b->samples[x_], ids, n) &&
                              labels_equal(b->samples[x_], labels, n_labels),
                            &pos);
  if (e != SIZE_MAX) {
    for (size_t k = 0; k < b->n_values; k++)
      b->samples[e]->value[k] = tool_add(b->samples[e]->value[k], sign < 0 ? tool_neg(values[k]) : values[k]);
    return;
  }
  sample_t *s = malloc(sizeof *s);
  uint64_t *copy = malloc((n ? n : 1) * sizeof *copy);
  int64_t *v = malloc((b->n_values ? b->n_values : 1) * sizeof *v);
  label_t **lp = n_labels ? labels_copy(labels, n_labels) : NULL;
  if (s == NULL || copy == NULL || v == NULL || (n_labels && lp == NULL)) {
    free(s), free(copy), free(v), free(lp);
    b->failed = true;
    return;
  }
  perftools__profiles__sample__init(s);
  if (n != 0) memcpy(copy, ids, n * sizeof *ids);
  for (size_t k = 0; k < b->n_values; k++) v[k] = sign < 0 ? tool_neg(values[k]) : values[k];
  s->location_id = copy;
  s->n_location_id = n;
  s->value = v;
  s->n_value = b->n_values;
  s->label = lp;
  s->n_label = n_labels;
  b->samples[b->n_samples] = s;
  htab_put(&b->sample_ix, pos, hv, b->n_samples++);
}

void pb_sample_from(pbuild_t *b, const profile_t *p, const sample_t *smp, const uint64_t *ids, size_t n,
                    int sign)
{
  pb_label_t few[8], *labels = few;
  size_t n_labels = 0, cap = smp->n_label + b->n_extra;
  if (cap > sizeof few / sizeof few[0] && (labels = malloc(cap * sizeof *labels)) == NULL) {
    b->failed = true;
    return;
  }
  for (size_t i = 0; i < smp->n_label; i++) {
    const label_t *l = smp->label[i];
    pb_label_t copy = {pb_string(b, pstr(p, l->key)), l->str ? pb_string(b, pstr(p, l->str)) : 0, l->num,
                       l->num_unit ? pb_string(b, pstr(p, l->num_unit)) : 0};
    bool replaced = false;                          /* an extra label of the same key wins */
    for (size_t k = 0; k < b->n_extra; k++) replaced |= b->extra[k].key == copy.key;
    if (!replaced) labels[n_labels++] = copy;
  }
  for (size_t k = 0; k < b->n_extra; k++) labels[n_labels++] = b->extra[k];
  pb_sample_labels(b, ids, n, labels, n_labels, smp->value, sign);
  if (labels != few) free(labels);
}

/* ---------------------------------------------------------------------------------------------------
   Whole profiles
--------------------------------------------------------------------------------------------------- */

static value_type_t *value_type_copy(pbuild_t *b, const profile_t *p, const value_type_t *v)
{
  value_type_t *c = malloc(sizeof *c);
  if (c == NULL) return b->failed = true, NULL;
  perftools__profiles__value_type__init(c);
  if (v != NULL) {
    c->type = pb_string(b, pstr(p, v->type));
    c->unit = pb_string(b, pstr(p, v->unit));
  }
  return c;
}

static void pb_comment_string(pbuild_t *b, int64_t string)
{
  if (b->p.n_comment == b->cap_comments) {
    size_t cap = b->cap_comments ? b->cap_comments * 2 : 8;
    int64_t *c = realloc(b->p.comment, cap * sizeof *c);
    if (c == NULL) {
      b->failed = true;
      return;
    }
    b->p.comment = c;
    b->cap_comments = cap;
  }
  b->p.comment[b->p.n_comment++] = string;
}

/* A copy of the library's timeline (the Timeline and its three arrays in one block), or NULL. */
static timeline_t *timeline_copy(pbuild_t *b, const timeline_t *t)
{
  size_t n[3] = {t->n_offset_nanos, t->n_inuse_bytes, t->n_alloc_bytes};
  timeline_t *c = malloc(sizeof *c + (n[0] + n[1] + n[2]) * sizeof(int64_t));
  if (c == NULL) return b->failed = true, NULL;
  perftools__profiles__timeline__init(c);
  c->start_nanos = t->start_nanos;
  c->offset_nanos = (int64_t *)(c + 1);
  c->inuse_bytes = c->offset_nanos + n[0];
  c->alloc_bytes = c->inuse_bytes + n[1];
  c->n_offset_nanos = n[0];
  c->n_inuse_bytes = n[1];
  c->n_alloc_bytes = n[2];
  if (n[0] != 0) memcpy(c->offset_nanos, t->offset_nanos, n[0] * sizeof(int64_t));
  if (n[1] != 0) memcpy(c->inuse_bytes, t->inuse_bytes, n[1] * sizeof(int64_t));
  if (n[2] != 0) memcpy(c->alloc_bytes, t->alloc_bytes, n[2] * sizeof(int64_t));
  return c;
}

pbuild_t *pbuild_new(const profile_t *h)
{
  pbuild_t *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  perftools__profiles__profile__init(&b->p);
  pb_string(b, "");
  b->n_values = h->n_sample_type;
  b->p.sample_type = calloc(h->n_sample_type ? h->n_sample_type : 1, sizeof(value_type_t *));
  if (b->p.sample_type == NULL) b->failed = true;
  for (size_t i = 0; b->p.sample_type != NULL && i < h->n_sample_type; i++)
    b->p.sample_type[b->p.n_sample_type++] = value_type_copy(b, h, h->sample_type[i]);
  if (h->period_type != NULL) b->p.period_type = value_type_copy(b, h, h->period_type);
  b->p.period = h->period;
  b->p.time_nanos = h->time_nanos;
  b->p.duration_nanos = h->duration_nanos;
  b->p.drop_frames = pb_string(b, pstr(h, h->drop_frames));
  b->p.keep_frames = pb_string(b, pstr(h, h->keep_frames));
  b->p.default_sample_type = pb_string(b, pstr(h, h->default_sample_type));
  int64_t *copied = calloc(h->n_string_table + 1, sizeof *copied);   /* string + 1, by h's index */
  if (copied == NULL) b->failed = true;
  for (size_t i = 0; copied != NULL && i < h->n_comment; i++) {     /* each string hashed once */
    int64_t k = h->comment[i] >= 0 && (size_t)h->comment[i] < h->n_string_table ? h->comment[i] : 0;
    if (copied[k] == 0) copied[k] = pb_string(b, pstr(h, k)) + 1;
    pb_comment_string(b, copied[k] - 1);
  }
  free(copied);
  if (h->mimalloc_prof_timeline != NULL)
    b->p.mimalloc_prof_timeline = timeline_copy(b, h->mimalloc_prof_timeline);
  return b;
}

pbuild_t *pbuild_new_heap(int64_t period)
{
  return pbuild_new_heap_types(period, 4);
}

pbuild_t *pbuild_new_heap_types(int64_t period, size_t n_types)
{
  char *strings[] = {"", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects", "inuse_space",
                     "space", "peak_objects", "peak_space", "freed_objects", "freed_space"};
  static const int64_t types[8][2] = {{1, 2}, {3, 4}, {5, 2}, {6, 4}, {8, 2}, {9, 4}, {10, 2}, {11, 4}};
  value_type_t vt[8], *vtp[8], period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
  if (n_types > 8) n_types = 8;
  for (size_t i = 0; i < n_types; i++) {
    perftools__profiles__value_type__init(&vt[i]);
    vt[i].type = types[i][0];
    vt[i].unit = types[i][1];
    vtp[i] = &vt[i];
  }
  period_type.type = 7;
  period_type.unit = 4;
  profile_t h = PERFTOOLS__PROFILES__PROFILE__INIT;
  h.string_table = strings;
  h.n_string_table = sizeof strings / sizeof strings[0];
  h.sample_type = vtp;
  h.n_sample_type = n_types;
  h.period_type = &period_type;
  h.period = period;
  h.default_sample_type = 6;
  return pbuild_new(&h);
}

void pb_comment(pbuild_t *b, const char *text)
{
  pb_comment_string(b, pb_string(b, text));
}

/* When a profile ends: its start plus its duration (0 when negative), saturated. */
static int64_t end_of(const profile_t *p)
{
  return tool_add(p->time_nanos, p->duration_nanos > 0 ? p->duration_nanos : 0);
}

void pb_keep_max_period(pbuild_t *b, const profile_t *p)
{
  if (p->period > b->p.period) b->p.period = p->period;
  if (p->time_nanos == 0) return;                                /* no time: nothing to span */
  if (b->p.time_nanos == 0) {
    b->p.time_nanos = p->time_nanos;
    b->p.duration_nanos = p->duration_nanos;
    return;
  }
  int64_t start = p->time_nanos < b->p.time_nanos ? p->time_nanos : b->p.time_nanos;
  int64_t end = end_of(p) > end_of(&b->p) ? end_of(p) : end_of(&b->p);
  if (__builtin_sub_overflow(end, start, &b->p.duration_nanos)) b->p.duration_nanos = INT64_MAX;
  b->p.time_nanos = start;
}

bool profile_compatible(const profile_t *a, const profile_t *b, char *why, size_t why_len)
{
  char ta[256], tb[256];
  profile_sample_types(a, ta, sizeof ta);                /* both, before any comparison can stop early */
  profile_sample_types(b, tb, sizeof tb);
  if (a->n_sample_type != b->n_sample_type || strcmp(ta, tb) != 0) {
    snprintf(why, why_len, "different sample types (%s; %s)", ta, tb);
    return false;
  }
  for (size_t i = 0; i < a->n_sample_type; i++) {
    if (strcmp(pstr(a, a->sample_type[i]->unit), pstr(b, b->sample_type[i]->unit)) != 0) {
      snprintf(why, why_len, "different units of %s", pstr(a, a->sample_type[i]->type));
      return false;
    }
  }
  const char *pa = a->period_type ? pstr(a, a->period_type->type) : "";
  const char *pb = b->period_type ? pstr(b, b->period_type->type) : "";
  if (strcmp(pa, pb) != 0) {
    snprintf(why, why_len, "different period types (%s; %s)", pa, pb);
    return false;
  }
  return true;
}

bool pb_add_profile(pbuild_t *b, const profile_t *p, int sign)
{
  pindex_t ix;
  pindex_init(&ix, p);
  uint64_t *map_new = calloc(p->n_mapping + 1, sizeof *map_new);
  int64_t *map_delta = calloc(p->n_mapping + 1, sizeof *map_delta);
  uint64_t *loc_new = calloc(p->n_location + 1, sizeof *loc_new);
  uint64_t *fn_new = calloc(p->n_function + 1, sizeof *fn_new);   /* + 1: 0 until copied */
  pb_line_t *lines = NULL;
  size_t cap_lines = 0;
  uint64_t *ids = NULL;
  size_t cap_ids = 0;
  if (map_new == NULL || map_delta == NULL || loc_new == NULL || fn_new == NULL) b->failed = true;
  for (size_t i = 0; !b->failed && i < p->n_mapping; i++)
    map_new[i] = pb_mapping(b, p, p->mapping[i], &map_delta[i]);
  for (size_t i = 0; !b->failed && i < p->n_location; i++) {
    const location_t *l = p->location[i];
    if (l->n_line > cap_lines) {
      free(lines);
      lines = malloc((cap_lines = l->n_line) * sizeof *lines);
      if (lines == NULL) b->failed = true;
    }
    for (size_t k = 0; lines != NULL && k < l->n_line; k++) {
      lines[k].function_id = pb_copy_function(b, p, &ix, l->line[k]->function_id, fn_new);
      lines[k].line = l->line[k]->line;
    }
    uint64_t mid = 0;
    int64_t delta = 0;
    const mapping_t *m = l->mapping_id ? pindex_mapping(&ix, l->mapping_id) : NULL;
    if (m != NULL) {
      size_t mi = pindex_mapping_pos(&ix, l->mapping_id);
      mid = map_new[mi];
      delta = map_delta[mi];
    }
    loc_new[i] = pb_location(b, mid, l->address + (uint64_t)delta, lines, l->n_line);
  }
  for (size_t s = 0; !b->failed && s < p->n_sample; s++) {
    const sample_t *smp = p->sample[s];
    if (smp->n_value != b->n_values) continue;
    if (smp->n_location_id > cap_ids) {
      free(ids);
      ids = malloc((cap_ids = smp->n_location_id) * sizeof *ids);
      if (ids == NULL) {
        b->failed = true;
        break;
      }
    }
    size_t n = 0;
    for (size_t k = 0; k < smp->n_location_id; k++) {
      size_t pos = pindex_location_pos(&ix, smp->location_id[k]);
      if (pos != SIZE_MAX) ids[n++] = loc_new[pos];
    }
    pb_sample_from(b, p, smp, ids, n, sign);
  }
  free(ids);
  free(lines);
  free(map_new);
  free(map_delta);
  free(loc_new);
  free(fn_new);
  pindex_free(&ix);
  return !b->failed;
}

void pb_extra_labels(pbuild_t *b, const pb_label_t *labels, size_t n)
{
  b->n_extra = n < 2 ? n : 2;
  for (size_t i = 0; i < b->n_extra; i++) b->extra[i] = labels[i];
}

const profile_t *pbuild_profile(pbuild_t *b)
{
  size_t kept = 0;
  for (size_t i = 0; i < b->n_samples; i++) {
    bool zero = true;
    for (size_t k = 0; k < b->n_values; k++) zero &= b->samples[i]->value[k] == 0;
    if (!zero) b->samples[kept++] = b->samples[i];
    else sample_free(b->samples[i]);
  }
  b->n_samples = kept;
  b->p.sample = b->samples;
  b->p.n_sample = b->n_samples;
  b->p.mapping = b->mappings;
  b->p.n_mapping = b->n_mappings;
  b->p.location = b->locations;
  b->p.n_location = b->n_locations;
  b->p.function = b->functions;
  b->p.n_function = b->n_functions;
  b->p.string_table = b->strings;
  b->p.n_string_table = b->n_strings;
  return &b->p;
}

bool pbuild_failed(const pbuild_t *b) { return b->failed; }

void pbuild_free(pbuild_t *b)
{
  if (b == NULL) return;
  for (size_t i = 0; i < b->n_strings; i++) free(b->strings[i]);
  for (size_t i = 0; i < b->n_functions; i++) free(b->functions[i]);
  for (size_t i = 0; i < b->n_mappings; i++) free(b->mappings[i]);
  for (size_t i = 0; i < b->n_locations; i++) {
    free(b->locations[i]->line);
    free(b->locations[i]);
  }
  for (size_t i = 0; i < b->n_samples; i++) sample_free(b->samples[i]);
  for (size_t i = 0; i < b->p.n_sample_type; i++) free(b->p.sample_type[i]);
  free(b->p.sample_type);
  free(b->p.period_type);
  free(b->p.comment);
  free(b->p.mimalloc_prof_timeline);
  free(b->strings);
  free(b->functions);
  free(b->mappings);
  free(b->locations);
  free(b->samples);
  htab_free(&b->string_ix);
  htab_free(&b->function_ix);
  htab_free(&b->mapping_ix);
  htab_free(&b->location_ix);
  htab_free(&b->sample_ix);
  free(b);
}
