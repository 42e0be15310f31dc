/* tool.h - what the files of the mimalloc-prof command share: messages and option parsing (cli.c),
 * reading and writing profiles (profile.c), building new profiles (pbuild.c), the report model of
 * top/tree/diff/flame/folded (view.c) and its sampling noise (noise.c), symbolization (symbolize.c,
 * dwarf.c), demangling (demangle.cc), the control socket of running processes (client.c), and one entry
 * point per subcommand (run.c, top.c, ...).
 *
 * Exit statuses, for every subcommand: 0 success, 1 an error while doing the work (unreadable file,
 * nothing to write), 2 a usage error (bad option or value, wrong number of arguments); `run` passes its
 * program's status through.
 */
#ifndef MPROF_TOOL_H
#define MPROF_TOOL_H

#include "config.h"

#include <glob.h>
#include <limits.h>
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "profile.pb-c.h"

#define EXIT_USAGE 2

typedef Perftools__Profiles__Profile   profile_t;
typedef Perftools__Profiles__ValueType value_type_t;
typedef Perftools__Profiles__Sample    sample_t;
typedef Perftools__Profiles__Label     label_t;
typedef Perftools__Profiles__Timeline  timeline_t;
typedef Perftools__Profiles__Mapping   mapping_t;
typedef Perftools__Profiles__Location  location_t;
typedef Perftools__Profiles__Line      line_t;
typedef Perftools__Profiles__Function  function_t;

/* ---------------------------------------------------------------------------------------------------
   "cli.c": messages ("mimalloc-prof CMD: ..."), option values
--------------------------------------------------------------------------------------------------- */

extern const char *tool_cmd;     /* the subcommand running, for messages ("run", "top", ...) */

/* One line on stderr; return 2 (usage: adds "Try 'mimalloc-prof CMD --help'.") or 1. */
int  tool_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int  tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tool_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The message for a getopt_long result of '?' or ':' (optstring starting with ':'). */
int  tool_getopt_error(int c, char *const *argv);

/* A whole decimal number in min..max (no sign, no suffix); false when it is not one. */
bool tool_parse_count(const char *text, long min, long max, long *out);

/* The one profile a report reads, at argv[optind]: 0, or the usage error's status when none or more than one
 * is given (`more`: what the message adds about the extra one, such as "; see diff and merge"). */
int  tool_one_profile(int argc, char *const *argv, const char *more);

/* Prints a usage text to stdout (--help) and returns 0. */
int  tool_help(const char *text);

/* `bytes` for people: 512 B, 1.50 KiB, 12.3 MiB, 4.00 GiB (three significant digits, sign kept). */
const char *tool_bytes(int64_t bytes, char *buf, size_t len);
/* A count with thousands separators: 1,234,567. */
const char *tool_count(int64_t n, char *buf, size_t len);
/* a + b and -a, saturated at INT64_MIN and INT64_MAX: a profile's values may be anything (one from
 * elsewhere, a diff), and a sum that wrapped around would print as its opposite. */
static inline int64_t tool_add(int64_t a, int64_t b)
{
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return a < 0 ? INT64_MIN : INT64_MAX;
}

static inline int64_t tool_neg(int64_t a)
{
  return a == INT64_MIN ? INT64_MAX : -a;
}

/* ---------------------------------------------------------------------------------------------------
   "escape.c": text from elsewhere (a process, a profile) made safe to print on a terminal
--------------------------------------------------------------------------------------------------- */

/* `text` (len bytes, any bytes) into out (cap bytes, NUL-terminated; truncated at a whole escape) with
 * control characters, C1 controls, bidirectional overrides and bytes that are not UTF-8 escaped; '\n'
 * kept as it is when `newlines`, else "\n".  Returns the length written. */
size_t      tool_escape(char *out, size_t cap, const void *text, size_t len, bool newlines);
/* The same for a string, newlines escaped too; returns buf. */
const char *tool_escaped(const char *s, char *buf, size_t len);
/* The same written to f, whatever its length. */
void        tool_write_escaped(FILE *f, const void *text, size_t len, bool newlines);
/* One byte of text for XML (the SVG pictures): & < > " ' as entities, a control character other than tab
 * left out (XML 1.0 forbids most; a label is one line), any other byte as it is. */
void        tool_xml_byte(FILE *f, unsigned char c);

/* ---------------------------------------------------------------------------------------------------
   "profile.c": reading, writing, looking things up by id
--------------------------------------------------------------------------------------------------- */

/* Reads a profile: gzip-compressed (as profiles are written) or not.  NULL with a reason in err, also for
 * one over the limits (every command treats a profile as hostile):
 *   - decompressed, at most PROFILE_READ_LIMIT bytes, or $MIMALLOC_PROF_READ_LIMIT (profile_read_limit);
 *     while that variable is unset, a gzip stream that inflates past 16 MiB to more than 64 times the
 *     compressed bytes read is refused as a gzip bomb;
 *   - decoding (protobuf-c) takes at most 24 bytes per byte of profile, plus 4 MiB;
 *   - at most 2^26 samples, locations, functions and strings, 65,536 mappings, 1,024 sample types,
 *     and per sample PROFILE_MAX_FRAMES locations, 1,024 labels and 1,024 values; PROFILE_MAX_FRAMES
 *     lines per location. */
profile_t *profile_read(const char *path, char *err, size_t err_len);
#define PROFILE_READ_LIMIT ((size_t)1 << 30)
#define PROFILE_MAX_FRAMES ((size_t)1 << 17)   /* also: frames of one stack, inlined ones included */
/* The decompressed-size limit in force: $MIMALLOC_PROF_READ_LIMIT (bytes; k, m, g, t for KiB..TiB) when
 * set (*set then true), else PROFILE_READ_LIMIT; 0 with a reason in err for a malformed value. */
size_t     profile_read_limit(bool *set, char *err, size_t err_len);
void       profile_free(profile_t *p);

/* Writes `p` gzip-compressed to `path` (as tool_out_open: through a temporary file renamed over a regular
 * `path` when complete, in place to a device or FIFO).  0, or -1 with a reason in err. */
int profile_write(const profile_t *p, const char *path, char *err, size_t err_len);

/* An output file (outfile.c): tool_out_open gives a descriptor to write path's new contents to (a
 * temporary file beside a regular or new file; the path itself for a device, FIFO or terminal), or -1
 * with errno; tool_out_close(ok) closes it and, when ok, renames the temporary file over path; when not
 * ok (or the close or rename fails) removes the temporary file.  0, or -1 with errno (the first error). */
typedef struct tool_out_s {
  int fd;
  char tmp[4096];                      /* "" when writing in place */
} tool_out_t;
int tool_out_open(tool_out_t *o, const char *path);
int tool_out_close(tool_out_t *o, const char *path, bool ok);

/* Hashing for the tables that intern a profile's parts (pbuild.c, view.c, calltree.c): keyed with a
 * random number drawn once per process, so that no profile can be made to put its parts into one bucket
 * (with a fixed hash that keeps few bits, 2 KB of repeated frames make `tree` quadratic).  tool_hash
 * mixes v into h (start with tool_hash_key()); every bit of the result depends on every bit of h and v,
 * so a table of a power-of-two size takes hash & (size - 1).  A value hashes alike within one process
 * only: nothing a command prints depends on hashes. */
uint64_t tool_hash_key(void);
uint64_t tool_hash_str(const char *s);
static inline uint64_t tool_hash(uint64_t h, uint64_t v)
{
  h = (h ^ v) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

/* string_table[i], "" for an index out of range. */
const char *pstr(const profile_t *p, int64_t i);

/* Lookups by id (ids are usually 1..n in order; any order works). */
typedef struct pindex_s {
  const profile_t *p;
  void *loc_ids, *fn_ids, *map_ids;       /* (id, position) sorted by id when not positional, else NULL */
} pindex_t;
void              pindex_init(pindex_t *ix, const profile_t *p);
void              pindex_free(pindex_t *ix);
const location_t *pindex_location(const pindex_t *ix, uint64_t id);
const function_t *pindex_function(const pindex_t *ix, uint64_t id);
size_t            pindex_function_pos(const pindex_t *ix, uint64_t id);   /* SIZE_MAX when unknown */
const mapping_t  *pindex_mapping(const pindex_t *ix, uint64_t id);
size_t            pindex_location_pos(const pindex_t *ix, uint64_t id);   /* SIZE_MAX when unknown */
size_t            pindex_mapping_pos(const pindex_t *ix, uint64_t id);

/* The sample type named `name` (its position), or SIZE_MAX. */
size_t profile_sample_type(const profile_t *p, const char *name);
/* "alloc_objects, alloc_space, ..." for messages. */
const char *profile_sample_types(const profile_t *p, char *buf, size_t len);

/* p's header in *h without the comments that start with `prefix` (*kept: malloc'd, for the caller to free
 * once a builder has copied the header); returns h. */
const profile_t *profile_header_without(const profile_t *p, const char *prefix, profile_t *h, int64_t **kept);

/* The file name of a mapping without its directories ("python3.11"). */
const char *profile_mapping_base(const profile_t *p, const mapping_t *m);

/* ---------------------------------------------------------------------------------------------------
   "pbuild.c": a new profile, with every string, function, mapping, location and sample interned
--------------------------------------------------------------------------------------------------- */

typedef struct pbuild_s pbuild_t;

typedef struct pb_line_s {
  uint64_t function_id;
  int64_t  line;
} pb_line_t;

/* A builder whose header (sample types, period, times, comments, drop/keep frames, the library's
 * timeline) is copied from `header`; NULL on no memory. */
pbuild_t *pbuild_new(const profile_t *header);
/* A heap profile as the library writes it: alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes (the default), period `period` space/bytes; NULL when out of memory. */
pbuild_t *pbuild_new_heap(int64_t period);
/* The same with the first n_types (4, 6 or 8) of the library's sample types: then peak_objects/count,
 * peak_space/bytes, freed_objects/count, freed_space/bytes. */
pbuild_t *pbuild_new_heap_types(int64_t period, size_t n_types);
void      pbuild_free(pbuild_t *b);
bool      pbuild_failed(const pbuild_t *b);   /* an allocation failed somewhere */

int64_t  pb_string(pbuild_t *b, const char *s);
uint64_t pb_function(pbuild_t *b, const char *name, const char *system_name, const char *file,
                     int64_t start_line);
/* A mapping; one already there for the same file (build ID, file name, offset and size) is reused, and
 * *delta says how far this one's addresses must move to land in it. */
uint64_t pb_mapping(pbuild_t *b, const profile_t *p, const mapping_t *m, int64_t *delta);
/* Sets the has_* flags of a mapping the builder made. */
void     pb_mapping_flags(pbuild_t *b, uint64_t id, bool functions, bool filenames, bool lines, bool inlines);
uint64_t pb_location(pbuild_t *b, uint64_t mapping_id, uint64_t address, const pb_line_t *lines,
                     size_t n_lines);
/* The builder's function for function `id` of `p` (0 when p has none), copied once: copied[] (one per
 * function of p, zeroed) remembers each copy, so a function named by many lines costs one lookup of its
 * strings (a hostile profile names one long-named function a million times). */
uint64_t pb_copy_function(pbuild_t *b, const profile_t *p, const pindex_t *ix, uint64_t id, uint64_t *copied);
/* Adds `sign` x values to the sample with these locations and no labels (a new one when there is none). */
void     pb_sample(pbuild_t *b, const uint64_t *location_ids, size_t n, const int64_t *values, int sign);
/* A label of a sample being built: key, str and num_unit are the builder's string ids (pb_string; 0:
 * none). */
typedef struct pb_label_s {
  int64_t key, str, num, num_unit;
} pb_label_t;
/* The same, to the sample with these locations and these labels (sorted in place into their canonical
 * order, so that equal sets match whatever order they come in). */
void     pb_sample_labels(pbuild_t *b, const uint64_t *location_ids, size_t n, pb_label_t *labels,
                          size_t n_labels, const int64_t *values, int sign);
/* pb_sample_labels with the values and the labels of `smp`, a sample of `p`. */
void     pb_sample_from(pbuild_t *b, const profile_t *p, const sample_t *smp, const uint64_t *location_ids,
                        size_t n, int sign);
/* Labels (up to 2; n 0: none) that pb_sample_from gives every sample it copies from now on, in place of
 * the sample's own of the same key: the process of each part of a merged profile (`run`). */
void     pb_extra_labels(pbuild_t *b, const pb_label_t *labels, size_t n);
/* Copies the whole of `p` in (locations and functions as they are): merging profiles is calling this
 * for each. */
bool     pb_add_profile(pbuild_t *b, const profile_t *p, int sign);
void     pb_comment(pbuild_t *b, const char *text);
/* Period = the largest; time = the earliest start, duration up to the latest end (each profile's start
 * plus its duration): the same whatever the order the profiles come in (pbuild_new takes the first's). */
void     pb_keep_max_period(pbuild_t *b, const profile_t *p);
/* The profile (owned by the builder; samples whose values are all 0 are left out). */
const profile_t *pbuild_profile(pbuild_t *b);

/* Whether two profiles can be merged (same sample types and period type); else why. */
bool profile_compatible(const profile_t *a, const profile_t *b, char *why, size_t why_len);

/* ---------------------------------------------------------------------------------------------------
   "view.c": a profile as stacks of frame names with one value each, for the reports
--------------------------------------------------------------------------------------------------- */

/* A --tag filter (labels.c). */
typedef struct view_tag_s {
  char   *key;                  /* the label key ("size" given: "bytes") */
  char   *str;                  /* the value as given: what a string label must equal */
  bool    numeric;              /* str reads as a number or range: what a numeric label must lie in */
  int64_t lo, hi;               /* that range, both ends included */
  int     group;                /* the index of the key's first tag: tags of a key are alternatives */
} view_tag_t;

typedef struct view_opts_s {
  const char *sample_index;     /* NULL: inuse_space, else the profile's default */
  regex_t     focus, ignore, fold;
  bool        has_focus, has_ignore, has_fold;
  bool        lines;            /* frames are "function file:line" */
  bool        full_names;       /* --full-names: C++ names whole, not short (shortname.c) */
  bool        fold_std;         /* fold the allocator wrappers of C++ and common C helpers */
  long        rows;             /* -n: rows or stacks to show */
  bool        sort_cum;         /* --sort=cum */
  bool        show_stderr;      /* top, tree --stderr: each row's standard error */
  double      noise;            /* diff --noise K: changes within K standard errors are noise (2) */
  double      min_share;        /* tree: hide nodes below this fraction of the total */
  view_tag_t *tags;             /* --tag: only samples whose labels match */
  size_t      n_tags;
} view_opts_t;

/* Long options every report takes; `view_option` handles them (and -n, -s). */
#define VIEW_OPT_FOCUS   0x101
#define VIEW_OPT_IGNORE  0x102
#define VIEW_OPT_FOLD    0x103
#define VIEW_OPT_LINES   0x104
#define VIEW_OPT_SORT    0x105
#define VIEW_OPT_FOLDSTD 0x106
#define VIEW_OPT_TAG     0x107
#define VIEW_OPT_STDERR  0x108
#define VIEW_OPT_NOISE   0x109
#define VIEW_OPT_FULLNAMES 0x10a
#define VIEW_STDERR_OPTION {"stderr", no_argument, NULL, VIEW_OPT_STDERR}
#define VIEW_LONG_OPTIONS \
  {"sample-index", required_argument, NULL, 's'}, {"focus", required_argument, NULL, VIEW_OPT_FOCUS}, \
  {"tag", required_argument, NULL, VIEW_OPT_TAG}, \
  {"ignore", required_argument, NULL, VIEW_OPT_IGNORE}, {"fold", required_argument, NULL, VIEW_OPT_FOLD}, \
  {"fold-alloc", no_argument, NULL, VIEW_OPT_FOLDSTD}, {"lines", no_argument, NULL, VIEW_OPT_LINES}, \
  {"full-names", no_argument, NULL, VIEW_OPT_FULLNAMES}, \
  {"help", no_argument, NULL, 'h'}
void view_opts_init(view_opts_t *o);
void view_opts_free(view_opts_t *o);
/* Handles one option of VIEW_LONG_OPTIONS (or -n, -s, --sort); -1 when `c` is not one of them, 0 when
 * handled, else the exit status of a usage error (already reported). */
int  view_option(view_opts_t *o, int c, const char *arg);

typedef struct view_stack_s {
  uint32_t *frames;              /* name ids, innermost first */
  uint32_t  depth;
  int64_t   value;
  int64_t   objects;             /* the matching count (inuse_objects for inuse_space, ...), or 0 */
  double    var;                 /* the estimated variance of value (view_variance), 0 when unknown */
  size_t    sample;              /* its sample: p->sample[sample] */
} view_stack_t;

typedef struct view_s {
  const profile_t *p;
  size_t       vi;               /* the sample type shown */
  const char  *type, *unit;
  bool         bytes;            /* unit is bytes */
  char       **names;            /* frame names by id, escaped (escape.c): safe to print as they are */
  bool        *named;            /* whether the name came from a symbol (not module+offset) */
  size_t       n_names, cap_names;
  view_stack_t *stacks;          /* one per sample that passed focus/ignore, with a nonzero value */
  size_t       n_stacks;
  int64_t      total;            /* over those stacks */
  int64_t      total_all;        /* over every sample, before focus/ignore */
  int64_t      named_leaf;       /* of total: stacks whose innermost frame is named */
  size_t       unnamed_frames;   /* frames (of kept stacks) shown as module+offset */
  bool         has_var;          /* the profile gives what variances need (a rate, the paired type) */
  void        *priv;
} view_t;

/* Builds the view; on error prints a message, frees what it made and returns its exit status (else 0).
 * A profile of S bytes (encoded) is refused when its stacks would hold more than 2^20 + 4 S frames, or a
 * stack more than PROFILE_MAX_FRAMES, or their names more than 64 MiB + 256 S bytes written out, or its
 * distinct frame names more than 16 MiB + 16 S bytes (view.c says why). */
int  view_build(view_t *v, const profile_t *p, const view_opts_t *o);
void view_free(view_t *v);
/* Reads the profile at `path` and builds its view; on error prints a message and returns its exit
 * status (else 0).  view_close() frees the view and the profile it owns. */
int  view_open(view_t *v, const char *path, const view_opts_t *o);
void view_close(view_t *v);
/* One line, or nothing: the hint printed when the chosen type is empty and another is not. */
void view_hint(const view_t *v, const view_opts_t *o, FILE *f);
/* A value for people: bytes as KiB/MiB, counts with separators. */
const char *view_value(const view_t *v, int64_t value, char *buf, size_t len);

/* Per-name totals (flat: innermost frame; cum: every stack the name is in, once per stack). */
typedef struct view_site_s {
  uint32_t name;
  int64_t  flat, cum;
  double   flat_var, cum_var;    /* their estimated variances (sums over the stacks) */
} view_site_t;
view_site_t *view_sites(const view_t *v, size_t *n);   /* one per name with a nonzero flat or cum */

/* ---------------------------------------------------------------------------------------------------
   "noise.c": the sampling noise of the estimates (variances, standard errors)
--------------------------------------------------------------------------------------------------- */

/* The sample type paired with the view's (X_objects for X_space, X_space for X_objects), or SIZE_MAX. */
size_t      view_paired_index(const view_t *v);
/* The estimated variance of sample smp's value at rate `rate` (the period; twice it for peak_*), with
 * the value of the paired type `pair`: Var(B) = B s (1-p)/p, Var(N) = N (1-p)/p, s = B/N, p = 1 -
 * exp(-s/R) (noise.c derives it); 0 when a value is not positive. */
double      view_sample_variance(const view_t *v, size_t pair, double rate, const sample_t *smp);
/* "\u00b11.23 MiB": the standard error for a variance, as view_value prints values ("?" when
 * !v->has_var). */
const char *view_stderr(const view_t *v, double var, char *buf, size_t len);

/* ---------------------------------------------------------------------------------------------------
   "labels.c": --tag filters, the table of a label's values (top --by), amounts with units
--------------------------------------------------------------------------------------------------- */

/* Adds a --tag KEY=VALUE; 0, or the exit status of a usage error (already reported). */
int  view_tag_option(view_opts_t *o, const char *arg);
void view_tags_free(view_opts_t *o);
/* Whether sample s of p passes the tags: for each key, one of its tags matches the sample's label. */
bool view_tags_match(const profile_t *p, const sample_t *s, const view_tag_t *tags, size_t n);
/* The sample's label `key`, or NULL. */
const label_t *sample_label(const profile_t *p, const sample_t *s, const char *key);

/* The view's stacks grouped by label `name` (`size`: the `bytes` label in power-of-two classes), the
 * largest group first for a string label, in the label's order for a numeric one (*numeric); stacks
 * without the label form a group "(no label)". */
typedef struct label_group_s {
  char    *text;                 /* the value for people: "worker", "1.00 KiB - 2.00 KiB", "(no label)" */
  int64_t  value, objects;       /* of its stacks */
  uint32_t top_site;             /* the innermost frame with the group's largest value (UINT32_MAX: none) */
  int64_t  top_value;
} label_group_t;
label_group_t *label_groups(const view_t *v, const char *name, size_t *n_groups, bool *numeric);
void           label_groups_free(label_group_t *g, size_t n);

/* A number with an optional suffix: k, m, g, t (KiB, ... powers of 1024) or ns, us, ms, s (in
 * nanoseconds); a fraction is allowed (1.5ms).  tool_parse_duration requires a time suffix. */
bool tool_parse_amount(const char *text, int64_t *out);
bool tool_parse_duration(const char *text, int64_t *ns);
/* A duration for people: 850 ns, 12.5 us, 1.50 ms, 3.02 s (three significant digits, as tool_bytes). */
const char *tool_duration(int64_t ns, char *buf, size_t len);

/* ---------------------------------------------------------------------------------------------------
   "peak.c": the heap over time (totals, the peak, the timeline in the library's comments)
--------------------------------------------------------------------------------------------------- */

typedef struct heap_totals_s {
  bool    has_inuse, has_alloc;  /* the profile has inuse_space, alloc_space */
  bool    has_peak;              /* a peak comment, or the peak_space sample type */
  int64_t inuse_bytes;           /* sum of inuse_space: in use when the profile was written */
  int64_t alloc_bytes;           /* sum of alloc_space */
  int64_t peak_bytes;            /* the peak comment's bytes, else the sum of peak_space */
  int64_t peak_ns;               /* when the peak was reached (CLOCK_REALTIME ns); 0 unknown */
  int64_t start_ns;              /* when the session started (its end - duration_nanos); 0 unknown */
  int64_t stopped_ns;            /* the stop comment's time: sampling stopped then (CLOCK_REALTIME ns);
                                    0: it was running (or the profile does not say) */
} heap_totals_t;
void heap_totals(const profile_t *p, heap_totals_t *t);
/* When in use reads more than the peak (both estimates: the peak from half of the samples), a line after
 * `indent` that says why they disagree; nothing otherwise. */
void heap_peak_note(FILE *f, const heap_totals_t *t, const char *indent);

typedef struct tl_point_s {
  int64_t t_ns;                  /* CLOCK_REALTIME ns */
  int64_t inuse, alloc;          /* estimated bytes in use, allocated */
} tl_point_t;
/* The timeline's points in time order (malloc'd; NULL when there are none); *malformed counts the
 * points left out (beyond the shortest of the three arrays, or at a time that does not fit). */
tl_point_t *timeline_read(const profile_t *p, size_t *n_points, size_t *malformed);

/* For the header of a profile built from several (merge) or from a difference (diff): p's header in *h
 * without the peak comment and the timeline, which describe one process's heap (*kept: malloc'd, for
 * the caller to free once the builder has copied the header). */
const profile_t *heap_header_alone(const profile_t *p, profile_t *h, int64_t **kept);
/* The view's sites with a positive flat value, largest first (malloc'd). */
view_site_t *heap_top_sites(const view_t *v, size_t *n);
/* Up to `rows` of them, "  VALUE  SHARE%  NAME" after `indent`, and how many more there are. */
void heap_print_top_sites(FILE *f, const view_t *v, size_t rows, const char *indent);
/* The summary `run` prints: peak (and when, after start_ns; 0: not said), in use at exit, allocated,
 * the top three sites at the peak. */
void heap_summary(FILE *f, const char *path, int64_t start_ns);
/* `run --leak`: what is in use in the profile at path (its total bytes and objects), and up to `rows`
 * sites holding it, largest first, with their shares of that total (allocator wrappers folded). */
void heap_leaks(FILE *f, const char *path, size_t rows);

/* ---------------------------------------------------------------------------------------------------
   "timeline.c", "timeline_svg.c": the heap over time as a chart
--------------------------------------------------------------------------------------------------- */

typedef struct tl_chart_s {
  const char    *path;
  profile_t     *p;
  tl_point_t    *pts;            /* the timeline, the recorded peak added as a point */
  size_t         n;              /* at least 1 */
  size_t         n_timeline;     /* of them, from the timeline (the others: the recorded peak) */
  size_t         peak;           /* the point at the recorded peak's time (else the highest) */
  int64_t        peak_bytes;     /* the recorded peak's estimate (else that point's in use) */
  int64_t        top;            /* the most in use at any point */
  int64_t        t0, span;       /* the first point's time and the time to the last (ns) */
  heap_totals_t  totals;
  view_t         peak_view;      /* peak_space, when has_peak_view */
  bool           has_peak_view;
  size_t         n_sites;        /* sites at the peak to name */
} tl_chart_t;

/* Reads the profile at path and its timeline; on error prints a message and returns its exit status. */
int  tl_chart_load(tl_chart_t *c, const char *path, size_t sites);
void tl_chart_free(tl_chart_t *c);
/* The unit to show a span of time in (s, ms, us, ns) and nanoseconds per unit; the same for bytes. */
void tl_time_unit(int64_t span_ns, const char **unit, double *per);
void tl_bytes_unit(int64_t max, const char **unit, double *per);
/* Writes the chart as an SVG picture to out (as tool_out_open); 0, or 1 after a message. */
int  tl_write_svg(const tl_chart_t *c, const char *out, const char *title);

/* ---------------------------------------------------------------------------------------------------
   "calltree.c": the view's stacks merged into a tree (tree, flame)
--------------------------------------------------------------------------------------------------- */

typedef struct ctree_node_s {
  uint32_t name;                 /* view name id (the root: UINT32_MAX) */
  uint32_t parent, first_child, next_sibling, depth;   /* node numbers; 0 = none (the root is 0) */
  int64_t  value;                /* of the stacks through this node */
  int64_t  self;                 /* of the stacks ending here */
  int64_t  objects;
  double   var;                  /* the estimated variance of value */
} ctree_node_t;

typedef struct ctree_s {
  ctree_node_t *nodes;           /* nodes[0] is the root */
  size_t        n, cap;
  uint64_t     *index;           /* (parent, name) -> node, open addressing */
  size_t        index_cap;
  uint32_t      max_depth;
} ctree_t;

/* callers: the innermost frame at the first level (who calls the allocation sites); else the
 * outermost (main, then what it calls).  Children are sorted by value, largest first. */
void ctree_build(ctree_t *t, const view_t *v, bool callers);
void ctree_free(ctree_t *t);

/* ---------------------------------------------------------------------------------------------------
   "symbolize.c", "dwarf.c", "demangle.cc"
--------------------------------------------------------------------------------------------------- */

typedef struct sym_opts_s {
  const char **debug_dirs;       /* searched before /usr/lib/debug (build-id and debuglink) */
  size_t       n_debug_dirs;
  bool         quiet;            /* no summary line */
} sym_opts_t;

/* Symbolizes the profile in `in` into `out` (a new gzip file, `in` when out is NULL).  Prints a
 * summary on stderr.  Returns 0, or 1 after an error message. */
int symbolize_file(const char *in, const char *out, const sym_opts_t *o);

/* The demangled form of a C++ name (malloc'd), or NULL when `name` is not a mangled name. */
char *tool_demangle(const char *name);
/* A demangled C++ name made short (shortname.c: template arguments "<>", no parameters, qualifiers or
 * return type), malloc'd; NULL when it stays as it is. */
char *tool_short_name(const char *name);

/* ---------------------------------------------------------------------------------------------------
   "runtree.c": the profiles of the processes `run` started
--------------------------------------------------------------------------------------------------- */

typedef struct tree_dump_s {
  char  path[PATH_MAX];
  pid_t pid;
  char  kind;                   /* f (final), i, u, s, p, m (mimalloc_prof(3), Automatic dumps) */
  char  program[256];           /* tree_keep: the program's file name */
  size_t samples;               /* tree_keep: its number of samples */
} tree_dump_t;

typedef struct tree_s {
  glob_t       before;          /* the names there before the run */
  bool         have_before;
  tree_dump_t *dump;            /* the profiles the run wrote, by name */
  size_t       n;
} tree_t;

/* Before the run: the profiles already under prefix (PREFIX.PID.SEQ.KIND.pb.gz); false on an error. */
bool   tree_before(const char *prefix, tree_t *t);
/* After it: those that are new (regular files only); false on an error. */
bool   tree_after(const char *prefix, tree_t *t);
void   tree_free(tree_t *t);
size_t tree_finals(const tree_t *t);
/* The program a profile was written by: its first mapping's file name ("unknown" without one). */
void   tree_program(const profile_t *p, char *buf, size_t len);
/* The final profiles as one, written to out, each sample labelled process and pid (main_pid's header
 * first); 0, or -1 with a message in err. */
int    tree_merge(const tree_t *t, pid_t main_pid, const char *out, char *err, size_t err_len);
/* Symbolizes every profile (unless so is NULL; summaries for the final ones) and, when rename_them,
 * renames each to PREFIX.PROGRAM.PID.SEQ.KIND.pb.gz (never replacing a name). */
void   tree_keep(tree_t *t, const char *prefix, bool rename_them, const sym_opts_t *so);

/* ---------------------------------------------------------------------------------------------------
   "client.c": the control socket of a running process (ctl, top PID, ps, serve)
--------------------------------------------------------------------------------------------------- */

typedef struct ctl_reply_s {
  bool                 ok;            /* the status line is "ok" */
  char                 status[256];   /* the status line: "ok", or "error ENAME: message" (as sent) */
  unsigned char       *body;          /* the whole reply (malloc'd, NUL-terminated) */
  const unsigned char *data;          /* what follows the status line: "key value" lines, or a profile
                                         (as sent: tool_write_escaped shows it) */
  size_t               data_len;
} ctl_reply_t;

/* A process ID argument: decimal digits, 1 up. */
bool tool_parse_pid(const char *text, pid_t *pid);
/* The effective user ID of process pid (/proc/PID/status), or -1 when there is no such process. */
long ctl_process_uid(pid_t pid);
/* Where process pid's control socket is; 0, or -1 with the reason in why. */
int  ctl_socket_path(pid_t pid, char *out, size_t len, char *why, size_t why_len);

/* Every request's exchange (connect, send, the whole reply) ends within the timeout: --timeout SECONDS
 * (ctl, top, ps, serve), 0.001 to 86400, default 10.  ctl_timeout_option sets it from the option's value
 * and returns 0, or reports a usage error and returns its exit status. */
#define CTL_TIMEOUT_DEFAULT_MS 10000
#define CTL_OPT_TIMEOUT        0x180
#define CTL_TIMEOUT_LONG_OPTION {"timeout", required_argument, NULL, CTL_OPT_TIMEOUT}
int     ctl_timeout_option(const char *text);
/* The options that ctl, ps and serve take after their own: --timeout, -h/--help (prints `usage`), and
 * getopt_long's '?' and ':'.  -1 when parsing goes on (a valid --timeout), else the exit status to return
 * now (0 after --help, 2 after a usage error). */
int     ctl_common_option(int c, char *const *argv, const char *usage);
int64_t ctl_timeout_ms(void);

/* One request ("stats", "start 65536", ...) and its reply; 0 (whatever the status), or -1 with a message
 * in err when no reply came: the process could not be reached, did not answer in time, or is not the
 * one asked (SO_PEERCRED: another process, or another user unless we are root).  Messages carry no text
 * from the process but escaped (escape.c). */
int  ctl_request(pid_t pid, const char *request, ctl_reply_t *reply, char *err, size_t err_len);
/* Whether an exchange that failed (ctl_request's -1) found the socket with no process listening on it
 * (ECONNREFUSED): a socket left behind. */
bool ctl_request_refused(void);
void ctl_reply_free(ctl_reply_t *r);
/* The number of the "key value" line named key in an ok reply's data; false when there is none. */
bool ctl_reply_number(const ctl_reply_t *r, const char *key, uint64_t *value);
/* An error reply for people, escaped: "sampling is on already (EALREADY)". */
const char *ctl_reply_error(const ctl_reply_t *r, char *buf, size_t len);
/* Takes a heap profile of pid into path (written beside it, then renamed) and symbolizes it unless
 * !symbolize; 0, or -1 with a message in err. */
int  ctl_dump_file(pid_t pid, const char *path, bool symbolize, char *err, size_t err_len);
/* The process's command line with spaces between the arguments, escaped (malloc'd; "" when unreadable). */
char *ctl_command_line(pid_t pid);

/* ---------------------------------------------------------------------------------------------------
   "access.c": whom serve serves (the Host header, --token-file or our own user, connections per client)
--------------------------------------------------------------------------------------------------- */

#define SERVE_CONNECTIONS_MAX 128      /* connections at a time, in all */
#define SERVE_PER_CLIENT      16       /* of them, held by one client that is not our own user */

typedef struct serve_client_s serve_client_t;

/* Reads the token of --token-file; 0, or the exit status after a message (not a regular file of ours
 * or root's, open to group or others, not one line of 16 to 1024 visible ASCII characters). */
int  serve_token_file(const char *path);
bool serve_token_set(void);
/* One more name that Host may carry (the string is kept, not copied); false when there are too many. */
bool serve_allow_host(const char *host);
/* Whether a request with this Host header (NULL: none) may be answered. */
bool serve_host_allowed(const char *host);
/* At a connection's start: who is at the other end; NULL when that client holds SERVE_PER_CLIENT
 * connections already (or there is no memory): the connection must be closed.  Thread-safe. */
serve_client_t *serve_client_open(int fd);
void serve_client_close(serve_client_t *c);     /* at its end; NULL is fine */
/* 0 when the client may be served (with this Authorization header, NULL: none); else the HTTP status
 * to refuse with (401, 403) and why. */
unsigned serve_request_allowed(const serve_client_t *c, const char *authorization, char *why, size_t len);

/* ---------------------------------------------------------------------------------------------------
   Subcommands (argv[0] is the subcommand's name)
--------------------------------------------------------------------------------------------------- */

int cmd_run(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_tree(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_flame(int argc, char **argv);
int cmd_folded(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
