/* view.c - a profile as the reports see it: for one sample type, a list of stacks of frame names
 * (innermost first) with a value each, after the options every report takes.
 *
 * A location gives one frame per Line (inlined functions first, as pprof orders them), named by its
 * Function's name (demangled when it is still a mangled C++ name), else "module+0xOFFSET" (offset in
 * the file).  What applies, in this order, the same for every report:
 *   drop_frames, keep_frames  the profile's own: as go tool pprof does (its profile.Prune), a location
 *                            line whose function name (up to its first '(' that is not part of
 *                            "(anonymous namespace)" or "operator()") matches ^(drop_frames)$ and not
 *                            ^(keep_frames)$ is dropped with everything it called; scanning a stack from
 *                            the outermost frame, the first such location after a frame that does not
 *                            match is where the stack is cut (a matching location's inner lines go
 *                            wherever the location is: pprof trims them in the profile);
 *   --fold RE, --fold-alloc  innermost frames whose function name matches are dropped, so what allocator
 *                            wrappers allocate is charged to their callers (one frame is always kept);
 *   --focus RE               only stacks with a frame matching RE;
 *   --ignore RE              no stacks with a frame matching RE;
 *   --tag KEY=VALUE          only samples whose labels match (labels.c).
 * Regular expressions are POSIX extended ones, matched anywhere in a name: --fold and --fold-alloc see
 * the function's whole name (demangled; not short, not "function file:line"), --focus and --ignore that
 * or the frame's name as shown, so the short and the line views keep what the full view shows.
 */
#include "tool.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Allocator wrappers --fold-alloc folds: C++'s operator new, the standard allocators and the container
 * internals that only call them (their names may start with a return type), CPython's allocation
 * functions, and common x*alloc / GLib helpers. */
static const char fold_std_re[] =
  "^(operator new|std::allocator|std::__new_allocator|__gnu_cxx::new_allocator|std::allocator_traits)|"
  "(^|[ *&])std::(_Vector_base<.*>::(_M_allocate|_M_create_storage|_Vector_base)|"
  "_Rb_tree<.*>::(_M_get_node|_M_create_node|_Auto_node)|_Hashtable_alloc<.*>::_M_allocate_(node|buckets)|"
  "__cxx11::basic_string<.*>::_M_create)\\(|"
  "^_?Py(Object|Mem)_(Raw)?(Malloc|Calloc|Realloc)$|"
  "^(x|g_|g_try_)(malloc|malloc0|calloc|realloc|zalloc|strdup|strndup|memdup)([ (]|$)";

/* What a profile may make a view hold, in proportion to its size S (its encoded bytes): a location
 * named a thousand times by a sample of a thousand bytes, each of its lines a function of a long name,
 * would otherwise make a few kilobytes of profile into gigabytes of frames and text.  Real profiles stay
 * far inside: per byte, the symbolized 100,000-location profile of bench/symbolize.sh unfolds into 0.05
 * frames, 0.9 bytes of folded text (2.2 with --lines) and 0.05 bytes of distinct names (0.7), a python3
 * profile into 0.09 frames, 1.9 bytes of text (3.9) and 0.2 bytes of names (0.6). */
#define FRAMES_FLOOR  ((uint64_t)1 << 20)  /* frames of all stacks: 2^20 + 4 S (and under 2^31) */
#define FRAMES_RATIO  4
#define TEXT_FLOOR    ((uint64_t)64 << 20) /* the stacks as text (their frames' names): 64 MiB + 256 S */
#define TEXT_RATIO    256
#define NAMES_FLOOR   ((uint64_t)16 << 20) /* distinct frame names: 16 MiB + 16 S */
#define NAMES_RATIO   16
#define MATCH_MAX     4096                 /* regular expressions see this much of a name */
#define DROP_RE_MAX   4096                 /* longer drop_frames/keep_frames are ignored (hostile) */

/* What drop_frames makes of a location (go tool pprof's profile.Prune): nothing, "prune beneath" (a
 * line matched: the lines inside it are gone, and a stack is cut below it), or "prune" (its outermost
 * line matched: a stack is cut above it). */
enum { LOC_USER = 0, LOC_BENEATH = 1, LOC_PRUNE = 2 };

typedef struct line_name_s {
  size_t   fn;                   /* function position + 1; 0: an empty slot */
  int64_t  line;
  uint32_t name;
} line_name_t;

typedef struct view_priv_s {
  uint32_t  *slot;               /* name index: open addressing, id + 1 */
  size_t     cap;
  uint32_t  *name_len;           /* by name id */
  uint64_t   size;               /* the profile's, encoded */
  uint64_t   name_bytes, max_name_bytes;
  uint32_t  *fn_name;            /* by function position: its name as shown + 1, 0 until named */
  uint32_t  *fn_full;            /* by function position, once named: its full name (demangled) */
  bool       full_names;         /* --full-names: C++ names are shown whole */
  const char **fn_file;          /* by function position, once named: its file's last two components */
  line_name_t *line_names;       /* --lines: the name of each (function, line), open addressing */
  size_t     n_line_names, cap_line_names;
  const char **map_base;         /* by mapping position: its file name without directories */
  uint32_t **loc_frames;         /* by location position */
  uint32_t **loc_fns;            /* the same frames' function names (with --lines: without file:line) */
  uint32_t  *loc_depth;
  unsigned char *loc_drop;       /* by location position: LOC_USER, LOC_BENEATH or LOC_PRUNE */
  uint32_t  *scratch, *scratch_fn; /* one stack's frames while it is built */
  size_t     scratch_cap;
  unsigned char *fold_match, *fold_std_match, *focus_match, *ignore_match;   /* by name id: 0 not tried,
                                                                               1 no match, 2 a match */
  regex_t    fold_std;
  bool       has_fold_std;
  char       over[192];          /* the limit the profile passed, "" */
} view_priv_t;

void view_opts_init(view_opts_t *o)
{
  memset(o, 0, sizeof *o);
  o->rows = 20;
  o->min_share = 0.01;
  o->noise = 2;
}

void view_opts_free(view_opts_t *o)
{
  if (o->has_focus) regfree(&o->focus);
  if (o->has_ignore) regfree(&o->ignore);
  if (o->has_fold) regfree(&o->fold);
  view_tags_free(o);
}

static int compile(regex_t *re, bool *has, const char *opt, const char *text)
{
  if (*has) return tool_usage_error("%s given twice (join the expressions with |)", opt);
  int rc = regcomp(re, text, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char msg[256];
    regerror(rc, re, msg, sizeof msg);
    return tool_usage_error("%s '%s': not a regular expression (%s)", opt, text, msg);
  }
  *has = true;
  return 0;
}

int view_option(view_opts_t *o, int c, const char *arg)
{
  switch (c) {
  case 's': o->sample_index = arg; return 0;
  case 'n':
    if (!tool_parse_count(arg, 1, 1000000000, &o->rows))
      return tool_usage_error("-n '%s': expected a number of rows from 1 up", arg);
    return 0;
  case VIEW_OPT_FOCUS: return compile(&o->focus, &o->has_focus, "--focus", arg);
  case VIEW_OPT_IGNORE: return compile(&o->ignore, &o->has_ignore, "--ignore", arg);
  case VIEW_OPT_FOLD: return compile(&o->fold, &o->has_fold, "--fold", arg);
  case VIEW_OPT_FOLDSTD: o->fold_std = true; return 0;
  case VIEW_OPT_TAG: return view_tag_option(o, arg);
  case VIEW_OPT_LINES: o->lines = true; return 0;
  case VIEW_OPT_FULLNAMES: o->full_names = true; return 0;
  case VIEW_OPT_STDERR: o->show_stderr = true; return 0;
  case VIEW_OPT_NOISE: {
    char *end;
    double k = strtod(arg, &end);
    if (end == arg || *end != '\0' || !(k >= 0 && k <= 1000))
      return tool_usage_error("--noise '%s': expected a number of standard errors from 0 to 1000", arg);
    o->noise = k;
    return 0;
  }
  case VIEW_OPT_SORT:
    if (strcmp(arg, "flat") == 0) o->sort_cum = false;
    else if (strcmp(arg, "cum") == 0) o->sort_cum = true;
    else return tool_usage_error("--sort '%s': expected flat or cum", arg);
    return 0;
  default: return -1;
  }
}

/* ---------------------------------------------------------------------------------------------------
   Frame names
--------------------------------------------------------------------------------------------------- */

/* Whether `s` holds a byte a terminal might act on (escape.c): a control or a byte above 0x7f. */
static bool needs_escape(const char *s)
{
  for (const unsigned char *u = (const unsigned char *)s; *u != '\0'; u++) {
    if (*u < 0x20 || *u >= 0x7f) return true;
  }
  return false;
}

/* The id of `name` as it is (a new one when it is new); UINT32_MAX when the names would pass their
 * limit. */
static uint32_t name_id_raw(view_t *v, const char *name, bool named)
{
  view_priv_t *pv = v->priv;
  if ((v->n_names + 1) * 2 > pv->cap) {
    size_t cap = pv->cap ? pv->cap * 2 : 1024;
    uint32_t *slot = calloc(cap, sizeof *slot);
    if (slot == NULL) abort();
    for (size_t i = 0; i < v->n_names; i++) {
      size_t k = (size_t)tool_hash_str(v->names[i]) & (cap - 1);
      while (slot[k] != 0) k = (k + 1) & (cap - 1);
      slot[k] = (uint32_t)i + 1;
    }
    free(pv->slot);
    pv->slot = slot;
    pv->cap = cap;
  }
  size_t k = (size_t)tool_hash_str(name) & (pv->cap - 1);
  for (; pv->slot[k] != 0; k = (k + 1) & (pv->cap - 1)) {
    if (strcmp(v->names[pv->slot[k] - 1], name) == 0) return pv->slot[k] - 1;
  }
  size_t len = strlen(name);
  pv->name_bytes += len + 1;
  if (pv->name_bytes > pv->max_name_bytes || len >= UINT32_MAX) {
    snprintf(pv->over, sizeof pv->over, "frame names of more than %llu bytes (the limit for a profile of "
             "%llu bytes)", (unsigned long long)pv->max_name_bytes, (unsigned long long)pv->size);
    return UINT32_MAX;
  }
  if (v->n_names == v->cap_names) {
    v->cap_names = v->cap_names ? v->cap_names * 2 : 1024;
    v->names = realloc(v->names, v->cap_names * sizeof *v->names);
    v->named = realloc(v->named, v->cap_names * sizeof *v->named);
    pv->name_len = realloc(pv->name_len, v->cap_names * sizeof *pv->name_len);
    if (v->names == NULL || v->named == NULL || pv->name_len == NULL) abort();
  }
  v->names[v->n_names] = strdup(name);
  if (v->names[v->n_names] == NULL) abort();
  v->named[v->n_names] = named;
  pv->name_len[v->n_names] = (uint32_t)len;
  pv->slot[k] = (uint32_t)v->n_names + 1;
  return (uint32_t)v->n_names++;
}

/* The id of `name`, kept escaped (escape.c: escaping twice changes nothing), so that every report can
 * print the names as they are, safe on a terminal. */
static uint32_t name_id(view_t *v, const char *name, bool named)
{
  if (!needs_escape(name)) return name_id_raw(v, name, named);
  size_t len = strlen(name), cap = len * 4 + 1;    /* \xHH for a byte, at most */
  char *safe = malloc(cap);
  if (safe == NULL) abort();
  tool_escape(safe, cap, name, len, false);
  uint32_t id = name_id_raw(v, safe, named);
  free(safe);
  return id;
}

/* The last two components of a path (Objects/listobject.c), enough to tell files apart. */
static const char *short_path(const char *path)
{
  const char *last = strrchr(path, '/');
  if (last == NULL) return path;
  const char *p = last;
  while (p > path && p[-1] != '/') p--;
  return p > path ? p : path;
}

/* A function's name as shown (shortname.c: C++ names short, unless --full-names), and its full name
 * (*full: demangled when it is still a mangled C++ name, else its system name, else "?"), which --fold,
 * --fold-alloc, --focus and --ignore see. */
static uint32_t function_name(view_t *v, const function_t *f, uint32_t *full)
{
  view_priv_t *pv = v->priv;
  const char *name = pstr(v->p, f->name);
  if (name[0] == '\0') name = pstr(v->p, f->system_name);
  char *demangled = name[0] == '_' && name[1] == 'Z' ? tool_demangle(name) : NULL;
  if (demangled != NULL) name = demangled;
  if (name[0] == '\0') name = "?";
  *full = name_id(v, name, true);
  char *shown = pv->full_names || *full == UINT32_MAX ? NULL : tool_short_name(name);
  uint32_t id = shown != NULL ? name_id(v, shown, true) : *full;
  free(shown);
  free(demangled);
  return id;
}

/* The frame name of a location's line: its function's name, or with --lines (when the function names
 * its file) "function file:line".  Each is made once per function, and per function and line: a
 * function named by many lines is demangled, and its file's path shortened, once. */
static uint32_t line_frame(view_t *v, const pindex_t *ix, const line_t *line, bool with_lines,
                           uint32_t *fn_name)
{
  view_priv_t *pv = v->priv;
  size_t fi = pindex_function_pos(ix, line->function_id);
  if (fi == SIZE_MAX) return *fn_name = name_id(v, "?", true);
  const function_t *f = v->p->function[fi];
  if (pv->fn_name[fi] == 0) {
    uint32_t full, id = function_name(v, f, &full);
    if (id == UINT32_MAX || full == UINT32_MAX) return UINT32_MAX;
    pv->fn_name[fi] = id + 1;
    pv->fn_full[fi] = full;
    pv->fn_file[fi] = short_path(pstr(v->p, f->filename));
  }
  *fn_name = pv->fn_full[fi];
  if (!with_lines || pv->fn_file[fi][0] == '\0') return pv->fn_name[fi] - 1;
  if ((pv->n_line_names + 1) * 2 > pv->cap_line_names) {
    size_t cap = pv->cap_line_names ? pv->cap_line_names * 2 : 1024;
    line_name_t *t = calloc(cap, sizeof *t);
    if (t == NULL) abort();
    for (size_t i = 0; i < pv->cap_line_names; i++) {
      const line_name_t *e = &pv->line_names[i];
      if (e->fn == 0) continue;
      size_t k = (size_t)tool_hash(tool_hash(tool_hash_key(), e->fn), (uint64_t)e->line) & (cap - 1);
      while (t[k].fn != 0) k = (k + 1) & (cap - 1);
      t[k] = *e;
    }
    free(pv->line_names);
    pv->line_names = t;
    pv->cap_line_names = cap;
  }
  size_t mask = pv->cap_line_names - 1;
  size_t k = (size_t)tool_hash(tool_hash(tool_hash_key(), fi + 1), (uint64_t)line->line) & mask;
  for (; pv->line_names[k].fn != 0; k = (k + 1) & mask) {
    if (pv->line_names[k].fn == fi + 1 && pv->line_names[k].line == line->line) return pv->line_names[k].name;
  }
  const char *name = v->names[pv->fn_name[fi] - 1], *file = pv->fn_file[fi];
  size_t len = pv->name_len[pv->fn_name[fi] - 1] + strlen(file) + 32;
  char *buf = malloc(len);
  if (buf == NULL) abort();
  if (line->line > 0) snprintf(buf, len, "%s %s:%lld", name, file, (long long)line->line);
  else snprintf(buf, len, "%s %s", name, file);
  uint32_t id = name_id(v, buf, true);
  free(buf);
  if (id != UINT32_MAX) {
    pv->line_names[k] = (line_name_t){fi + 1, line->line, id};
    pv->n_line_names++;
  }
  return id;
}

/* A location without lines: "module+0xOFFSET" (the offset in the file), or its address. */
static uint32_t address_frame(view_t *v, const pindex_t *ix, const location_t *l)
{
  view_priv_t *pv = v->priv;
  size_t mi = l->mapping_id ? pindex_mapping_pos(ix, l->mapping_id) : SIZE_MAX;
  char buf[512];
  if (mi != SIZE_MAX) {
    const mapping_t *m = v->p->mapping[mi];
    if (pv->map_base[mi] == NULL) pv->map_base[mi] = profile_mapping_base(v->p, m);
    snprintf(buf, sizeof buf, "%.400s+0x%llx", pv->map_base[mi],
             (unsigned long long)(l->address - m->memory_start + m->file_offset));
  } else {
    snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)l->address);
  }
  return name_id(v, buf, false);
}

/* The frames of every location, innermost first; false when the names pass their limit. */
static bool name_locations(view_t *v, const pindex_t *ix, bool with_lines)
{
  const profile_t *p = v->p;
  view_priv_t *pv = v->priv;
  pv->loc_frames = calloc(p->n_location + 1, sizeof *pv->loc_frames);
  pv->loc_fns = calloc(p->n_location + 1, sizeof *pv->loc_fns);
  pv->loc_depth = calloc(p->n_location + 1, sizeof *pv->loc_depth);
  pv->fn_name = calloc(p->n_function + 1, sizeof *pv->fn_name);
  pv->fn_full = calloc(p->n_function + 1, sizeof *pv->fn_full);
  pv->fn_file = calloc(p->n_function + 1, sizeof *pv->fn_file);
  pv->map_base = calloc(p->n_mapping + 1, sizeof *pv->map_base);
  if (pv->loc_frames == NULL || pv->loc_fns == NULL || pv->loc_depth == NULL || pv->fn_name == NULL ||
      pv->fn_full == NULL || pv->fn_file == NULL || pv->map_base == NULL)
    abort();
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    uint32_t depth = l->n_line ? (uint32_t)l->n_line : 1;
    uint32_t *frames = malloc(depth * sizeof *frames), *fns = malloc(depth * sizeof *fns);
    if (frames == NULL || fns == NULL) abort();
    pv->loc_frames[i] = frames;
    pv->loc_fns[i] = fns;
    pv->loc_depth[i] = depth;
    for (uint32_t k = 0; k < depth; k++) {
      if (l->n_line == 0) frames[k] = fns[k] = address_frame(v, ix, l);
      else frames[k] = line_frame(v, ix, l->line[k], with_lines, &fns[k]);
      if (frames[k] == UINT32_MAX) return false;
    }
  }
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   drop_frames and keep_frames
--------------------------------------------------------------------------------------------------- */

/* "^(" RE ")$" compiled (as go tool pprof anchors them); false when `re` is empty, or not a POSIX
 * extended regular expression (then the profile's expression is ignored, as pprof ignores one it cannot
 * compile), or one a hostile profile could make costly: longer than DROP_RE_MAX, or with an interval
 * ('{': glibc's regcomp copies the repeated part, so nested intervals grow exponentially) or a
 * back-reference (regexec is exponential with them).  The library's expression has neither. */
static bool compile_frames_re(regex_t *out, const char *re)
{
  size_t len = strlen(re);
  if (len == 0 || len > DROP_RE_MAX || strchr(re, '{') != NULL) return false;
  for (const char *bs = strchr(re, '\\'); bs != NULL; bs = strchr(bs + 2, '\\')) {
    if (bs[1] >= '1' && bs[1] <= '9') return false;
    if (bs[1] == '\0') break;
  }
  char *anchored = malloc(len + 5);
  if (anchored == NULL) abort();
  snprintf(anchored, len + 5, "^(%s)$", re);
  bool ok = regcomp(out, anchored, REG_EXTENDED | REG_NOSUB) == 0;
  free(anchored);
  return ok;
}

/* pprof's simplifyFunc: the name up to its first '(' that does not begin "(anonymous namespace)" and is
 * not the one of "operator()" (a leading '.' of the PPC64 ELFv1 ABI left out); its length, from *start. */
static size_t simple_name_len(const char *name, const char **start)
{
  if (name[0] == '.') name++;
  *start = name;
  static const char anon[] = "(anonymous namespace)", call[] = "operator()";
  size_t i = 0;
  while (name[i] != '\0') {
    if (strncmp(name + i, anon, sizeof anon - 1) == 0) i += sizeof anon - 1;
    else if (strncmp(name + i, call, sizeof call - 1) == 0) i += sizeof call - 1;
    else if (name[i] == '(') break;
    else i++;
  }
  return i;
}

/* Whether function `id` is one drop_frames drops (once per function: memo by position, 0 not tried, 1 no,
 * 2 yes). */
static bool drops_function(const view_t *v, const pindex_t *ix, const regex_t *drop, const regex_t *keep,
                           unsigned char *memo, uint64_t id)
{
  size_t fi = pindex_function_pos(ix, id);
  if (fi == SIZE_MAX) return false;
  if (memo[fi] == 0) {
    const char *start, *name = pstr(v->p, v->p->function[fi]->name);
    size_t len = simple_name_len(name, &start);
    regmatch_t range = {0, (regoff_t)(len < MATCH_MAX ? len : MATCH_MAX)};
    bool drop_it = name[0] != '\0' && len <= MATCH_MAX && regexec(drop, start, 1, &range, REG_STARTEND) == 0;
    if (drop_it && keep != NULL) {
      range = (regmatch_t){0, (regoff_t)len};
      drop_it = regexec(keep, start, 1, &range, REG_STARTEND) != 0;
    }
    memo[fi] = drop_it ? 2 : 1;
  }
  return memo[fi] == 2;
}

/* Marks each location LOC_USER, LOC_BENEATH or LOC_PRUNE by the profile's drop_frames and keep_frames,
 * and takes a LOC_BENEATH location's lines inside its outermost matching line away (pprof's Prune). */
static void drop_locations(view_t *v, const pindex_t *ix)
{
  const profile_t *p = v->p;
  view_priv_t *pv = v->priv;
  pv->loc_drop = calloc(p->n_location + 1, 1);
  if (pv->loc_drop == NULL) abort();
  regex_t drop, keep;
  if (!compile_frames_re(&drop, pstr(p, p->drop_frames))) return;
  bool has_keep = compile_frames_re(&keep, pstr(p, p->keep_frames));
  unsigned char *memo = calloc(p->n_function + 1, 1);
  if (memo == NULL) abort();
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    size_t k = l->n_line;
    while (k-- > 0) {
      if (drops_function(v, ix, &drop, has_keep ? &keep : NULL, memo, l->line[k]->function_id)) break;
    }
    if (k == SIZE_MAX) continue;
    if (k + 1 == l->n_line) {
      pv->loc_drop[i] = LOC_PRUNE;
      continue;
    }
    pv->loc_drop[i] = LOC_BENEATH;
    size_t keep_n = pv->loc_depth[i] - (k + 1);
    memmove(pv->loc_frames[i], pv->loc_frames[i] + k + 1, keep_n * sizeof *pv->loc_frames[i]);
    memmove(pv->loc_fns[i], pv->loc_fns[i] + k + 1, keep_n * sizeof *pv->loc_fns[i]);
    pv->loc_depth[i] = (uint32_t)keep_n;
  }
  free(memo);
  regfree(&drop);
  if (has_keep) regfree(&keep);
}

/* The first of sample smp's locations (innermost first) that its stack keeps: scanning from the
 * outermost, the first LOC_PRUNE location after a LOC_USER one is cut with all inside it, a LOC_BENEATH
 * one is kept with what it holds but not what it called; before any LOC_USER, nothing is cut (pprof:
 * "to avoid pruning everything"). */
static size_t first_kept(const view_t *v, const pindex_t *ix, const sample_t *smp)
{
  view_priv_t *pv = v->priv;
  bool user = false;
  for (size_t k = smp->n_location_id; k-- > 0;) {
    size_t pos = pindex_location_pos(ix, smp->location_id[k]);
    unsigned char d = pos == SIZE_MAX ? LOC_USER : pv->loc_drop[pos];
    if (d == LOC_USER) user = true;
    else if (user) return d == LOC_PRUNE ? k + 1 : k;
  }
  return 0;
}

/* Whether the name matches (regular expressions see its first MATCH_MAX bytes: glibc's regexec takes
 * time quadratic in the length of the text for some expressions), once per name and expression. */
static bool matches(const view_t *v, const regex_t *re, unsigned char *memo, uint32_t name)
{
  if (memo[name] == 0) {
    view_priv_t *pv = v->priv;
    regmatch_t range = {0, pv->name_len[name] < MATCH_MAX ? (regoff_t)pv->name_len[name] : MATCH_MAX};
    memo[name] = regexec(re, v->names[name], 1, &range, REG_STARTEND) == 0 ? 2 : 1;
  }
  return memo[name] == 2;
}

static bool any_matches(const view_t *v, const regex_t *re, unsigned char *memo, const uint32_t *frames,
                        size_t depth)
{
  for (size_t i = 0; i < depth; i++) {
    if (matches(v, re, memo, frames[i])) return true;
  }
  return false;
}

/* ---------------------------------------------------------------------------------------------------
   The view
--------------------------------------------------------------------------------------------------- */

/* The sample type to show: the option's, else inuse_space, else the profile's default, else the last. */
static int pick_type(view_t *v, const view_opts_t *o)
{
  const profile_t *p = v->p;
  char types[256];
  if (p->n_sample_type == 0) return tool_error("the profile has no sample types");
  if (o->sample_index != NULL) {
    v->vi = profile_sample_type(p, o->sample_index);
    if (v->vi == SIZE_MAX)
      return tool_usage_error("-s '%s': the profile has no such sample type (it has %s)", o->sample_index,
                              profile_sample_types(p, types, sizeof types));
  } else {
    v->vi = profile_sample_type(p, "inuse_space");
    if (v->vi == SIZE_MAX) v->vi = profile_sample_type(p, pstr(p, p->default_sample_type));
    if (v->vi == SIZE_MAX) v->vi = p->n_sample_type - 1;
  }
  v->type = pstr(p, p->sample_type[v->vi]->type);
  v->unit = pstr(p, p->sample_type[v->vi]->unit);
  v->bytes = strcmp(v->unit, "bytes") == 0;
  return 0;
}

/* The count that goes with a space type (inuse_objects for inuse_space), or SIZE_MAX. */
static size_t objects_index(const view_t *v)
{
  char name[128];
  const char *us = strrchr(v->type, '_');
  if (us == NULL || strcmp(us, "_space") != 0) return SIZE_MAX;
  snprintf(name, sizeof name, "%.*s_objects", (int)(us - v->type), v->type);
  return profile_sample_type(v->p, name);
}

int view_open(view_t *v, const char *path, const view_opts_t *o)
{
  char err[512];
  profile_t *p = profile_read(path, err, sizeof err);
  if (p == NULL) return tool_error("%s", err);
  int rc = view_build(v, p, o);
  if (rc != 0) profile_free(p);
  return rc;
}

void view_close(view_t *v)
{
  profile_t *p = (profile_t *)(uintptr_t)v->p;
  view_free(v);
  profile_free(p);
}

/* floor + ratio x size, saturated at `max`. */
static uint64_t scaled(uint64_t floor, uint64_t ratio, uint64_t size, uint64_t max)
{
  uint64_t v;
  if (__builtin_mul_overflow(ratio, size, &v) || __builtin_add_overflow(v, floor, &v) || v > max) return max;
  return v;
}

/* Whether the innermost frame `name` is one --fold or --fold-alloc drops. */
static bool folds(const view_t *v, const view_opts_t *o, uint32_t name)
{
  view_priv_t *pv = v->priv;
  return (o->has_fold && matches(v, &o->fold, pv->fold_match, name)) ||
         (pv->has_fold_std && matches(v, &pv->fold_std, pv->fold_std_match, name));
}

/* The frames of sample smp into pv->scratch (innermost first); their number, or SIZE_MAX when the
 * stack passes PROFILE_MAX_FRAMES. */
static size_t expand(view_t *v, const pindex_t *ix, const sample_t *smp)
{
  view_priv_t *pv = v->priv;
  size_t depth = 0;
  for (size_t k = first_kept(v, ix, smp); k < smp->n_location_id; k++) {
    size_t pos = pindex_location_pos(ix, smp->location_id[k]);
    if (pos == SIZE_MAX) continue;
    if (pv->loc_depth[pos] > PROFILE_MAX_FRAMES - depth) return SIZE_MAX;
    if (depth + pv->loc_depth[pos] > pv->scratch_cap) {
      pv->scratch_cap = (depth + pv->loc_depth[pos]) * 2 + 64;
      pv->scratch = realloc(pv->scratch, pv->scratch_cap * sizeof *pv->scratch);
      pv->scratch_fn = realloc(pv->scratch_fn, pv->scratch_cap * sizeof *pv->scratch_fn);
      if (pv->scratch == NULL || pv->scratch_fn == NULL) abort();
    }
    memcpy(pv->scratch + depth, pv->loc_frames[pos], pv->loc_depth[pos] * sizeof *pv->scratch);
    memcpy(pv->scratch_fn + depth, pv->loc_fns[pos], pv->loc_depth[pos] * sizeof *pv->scratch_fn);
    depth += pv->loc_depth[pos];
  }
  return depth;
}

int view_build(view_t *v, const profile_t *p, const view_opts_t *o)
{
  memset(v, 0, sizeof *v);
  v->p = p;
  view_priv_t *pv = calloc(1, sizeof *pv);
  if (pv == NULL) abort();
  v->priv = pv;
  int rc = pick_type(v, o);
  if (rc != 0) {
    view_free(v);
    return rc;
  }
  if (o->fold_std) {
    if (regcomp(&pv->fold_std, fold_std_re, REG_EXTENDED | REG_NOSUB) != 0) abort();
    pv->has_fold_std = true;
  }
  uint64_t size = pv->size = perftools__profiles__profile__get_packed_size(p);
  uint64_t max_frames = scaled(FRAMES_FLOOR, FRAMES_RATIO, size, (uint64_t)1 << 31);
  uint64_t max_text = scaled(TEXT_FLOOR, TEXT_RATIO, size, UINT64_MAX);
  uint64_t frames_all = 0, text = 0;
  pv->max_name_bytes = scaled(NAMES_FLOOR, NAMES_RATIO, size, UINT64_MAX);
  pindex_t ix;
  pindex_init(&ix, p);
  pv->full_names = o->full_names;
  bool named = name_locations(v, &ix, o->lines);
  if (named) drop_locations(v, &ix);
  pv->fold_match = calloc(v->n_names + 1, 1);
  pv->fold_std_match = calloc(v->n_names + 1, 1);
  pv->focus_match = calloc(v->n_names + 1, 1);
  pv->ignore_match = calloc(v->n_names + 1, 1);
  v->stacks = calloc(p->n_sample + 1, sizeof *v->stacks);
  if (pv->fold_match == NULL || pv->fold_std_match == NULL || pv->focus_match == NULL ||
      pv->ignore_match == NULL || v->stacks == NULL)
    abort();
  size_t oi = objects_index(v), pair = view_paired_index(v);
  double rate = (double)p->period * (strncmp(v->type, "peak_", 5) == 0 ? 2 : 1);
  v->has_var = p->period > 0 && pair != SIZE_MAX;
  for (size_t s = 0; named && s < p->n_sample; s++) {
    const sample_t *smp = p->sample[s];
    if (v->vi >= smp->n_value || smp->value[v->vi] == 0) continue;
    int64_t value = smp->value[v->vi];
    v->total_all = tool_add(v->total_all, value);
    size_t depth = expand(v, &ix, smp);
    if (depth == SIZE_MAX) {
      snprintf(pv->over, sizeof pv->over, "a stack of more than %zu frames", PROFILE_MAX_FRAMES);
      break;
    }
    uint32_t *frames = pv->scratch, *fns = pv->scratch_fn;
    frames_all += depth;
    for (size_t k = 0; k < depth; k++) text += pv->name_len[frames[k]] + 1;
    if (frames_all > max_frames || text > max_text) {
      snprintf(pv->over, sizeof pv->over, "stacks of more than %llu %s in all (the limit for a profile of "
               "%llu bytes)", (unsigned long long)(frames_all > max_frames ? max_frames : max_text),
               frames_all > max_frames ? "frames" : "bytes of frame names", (unsigned long long)size);
      break;
    }
    while (depth > 1 && folds(v, o, fns[0])) {
      frames++;
      fns++;
      depth--;
    }
    if (o->has_focus && !any_matches(v, &o->focus, pv->focus_match, frames, depth) &&
        !any_matches(v, &o->focus, pv->focus_match, fns, depth))
      continue;
    if (o->has_ignore && (any_matches(v, &o->ignore, pv->ignore_match, frames, depth) ||
                          any_matches(v, &o->ignore, pv->ignore_match, fns, depth)))
      continue;
    if (o->n_tags != 0 && !view_tags_match(p, smp, o->tags, o->n_tags)) continue;
    view_stack_t *st = &v->stacks[v->n_stacks++];
    st->frames = malloc((depth ? depth : 1) * sizeof *st->frames);
    if (st->frames == NULL) abort();
    if (depth != 0) memcpy(st->frames, frames, depth * sizeof *frames);
    st->depth = (uint32_t)depth;
    st->value = value;
    st->sample = s;
    st->objects = oi != SIZE_MAX && oi < smp->n_value ? smp->value[oi] : 0;
    st->var = v->has_var ? view_sample_variance(v, pair, rate, smp) : 0;
    v->total = tool_add(v->total, value);
    if (depth > 0 && v->named[frames[0]]) v->named_leaf = tool_add(v->named_leaf, value);
    for (size_t k = 0; k < depth; k++) v->unnamed_frames += !v->named[frames[k]];
  }
  pindex_free(&ix);
  if (pv->over[0] == '\0') return 0;
  rc = tool_error("the profile has %s: not a profile a profiler writes", pv->over);
  view_free(v);
  return rc;
}

void view_free(view_t *v)
{
  view_priv_t *pv = v->priv;
  if (pv != NULL) {
    for (size_t i = 0; pv->loc_frames != NULL && i < v->p->n_location; i++) free(pv->loc_frames[i]);
    for (size_t i = 0; pv->loc_fns != NULL && i < v->p->n_location; i++) free(pv->loc_fns[i]);
    free(pv->loc_frames);
    free(pv->loc_fns);
    free(pv->loc_drop);
    free(pv->loc_depth);
    free(pv->slot);
    free(pv->name_len);
    free(pv->fn_name);
    free(pv->fn_full);
    free(pv->fn_file);
    free(pv->line_names);
    free(pv->map_base);
    free(pv->scratch);
    free(pv->scratch_fn);
    free(pv->fold_match);
    free(pv->fold_std_match);
    free(pv->focus_match);
    free(pv->ignore_match);
    if (pv->has_fold_std) regfree(&pv->fold_std);
    free(pv);
  }
  for (size_t i = 0; i < v->n_names; i++) free(v->names[i]);
  free(v->names);
  free(v->named);
  for (size_t i = 0; i < v->n_stacks; i++) free(v->stacks[i].frames);
  free(v->stacks);
  memset(v, 0, sizeof *v);
}

const char *view_value(const view_t *v, int64_t value, char *buf, size_t len)
{
  return v->bytes ? tool_bytes(value, buf, len) : tool_count(value, buf, len);
}

void view_hint(const view_t *v, const view_opts_t *o, FILE *f)
{
  if (v->total_all != 0 || o->sample_index != NULL || strncmp(v->type, "inuse_", 6) != 0) return;
  char other[64], buf[32];
  snprintf(other, sizeof other, "alloc_%s", v->type + 6);
  size_t ai = profile_sample_type(v->p, other);
  if (ai == SIZE_MAX) return;
  int64_t total = 0;
  for (size_t s = 0; s < v->p->n_sample; s++) {
    if (ai < v->p->sample[s]->n_value) total = tool_add(total, v->p->sample[s]->value[ai]);
  }
  if (total != 0)
    fprintf(f, "(nothing was in use when the profile was written, but %s%s were allocated: add -s %s)\n",
            v->bytes ? tool_bytes(total, buf, sizeof buf) : tool_count(total, buf, sizeof buf),
            v->bytes ? "" : " objects", other);
}

view_site_t *view_sites(const view_t *v, size_t *n)
{
  int64_t *flat = calloc(v->n_names + 1, sizeof *flat), *cum = calloc(v->n_names + 1, sizeof *cum);
  double *flat_var = calloc(v->n_names + 1, sizeof *flat_var);
  double *cum_var = calloc(v->n_names + 1, sizeof *cum_var);
  size_t *last = calloc(v->n_names + 1, sizeof *last);
  if (flat == NULL || cum == NULL || flat_var == NULL || cum_var == NULL || last == NULL) abort();
  for (size_t s = 0; s < v->n_stacks; s++) {
    const view_stack_t *st = &v->stacks[s];
    if (st->depth > 0) {
      flat[st->frames[0]] = tool_add(flat[st->frames[0]], st->value);
      flat_var[st->frames[0]] += st->var;
    }
    for (size_t k = 0; k < st->depth; k++) {
      uint32_t id = st->frames[k];
      if (last[id] == s + 1) continue;       /* a recursive function counts once per stack */
      last[id] = s + 1;
      cum[id] = tool_add(cum[id], st->value);
      cum_var[id] += st->var;
    }
  }
  view_site_t *sites = malloc((v->n_names + 1) * sizeof *sites);
  if (sites == NULL) abort();
  *n = 0;
  for (size_t i = 0; i < v->n_names; i++) {
    if (flat[i] != 0 || cum[i] != 0)
      sites[(*n)++] = (view_site_t){(uint32_t)i, flat[i], cum[i], flat_var[i], cum_var[i]};
  }
  free(flat);
  free(cum);
  free(flat_var);
  free(cum_var);
  free(last);
  return sites;
}
