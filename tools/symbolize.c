/* symbolize.c - `mimalloc-prof symbolize`: give every location of a profile its function names, source
 * files, lines and inlined frames (dwarf.c finds them), and say what stayed unnamed and why.
 *
 * Rules: a location without a mapping keeps what it has (the library names its dropped-sample frames
 * "[mimalloc-prof: dropped (REASON)]" that way); so do locations of a mapping already symbolized
 * (has_functions), so symbolizing twice changes nothing; a location whose object gives no name keeps the
 * name the library wrote (dladdr's).  An object is looked for once, when a location needs it: a profile
 * of 65,536 mappings and one location opens one file, not 65,536 (nor asks debuginfod for them).  A
 * mapping of an object found says has_functions when the object had a symbol table or DWARF,
 * has_filenames and has_line_numbers when it had line tables, has_inline_frames when it had DWARF: pprof
 * then trusts the names and does not look for the binaries.
 *
 * Why a location stayed unnamed is kept in the profile, one comment per object with unnamed locations:
 *   "mimalloc-prof symbolize: unnamed in PATH (build ID ID): REASON"
 * (a comment: go tool pprof reads and shows it, and it needs no field of our own).  A later run keeps the
 * locations of a mapping symbolized before as they are, and says the recorded reason again for those of
 * them without a name; the comments are written anew each run, never twice.
 */
#include "sym.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 64              /* inlined frames of one address: deeper nests are cut */

static const char usage[] =
  "usage: mimalloc-prof symbolize [-o OUT] [--debug-dir DIR]... [-q] FILE\n"
  "Name the functions, source lines and inlined frames of a heap profile, from the program's files,\n"
  "their debug files (/usr/lib/debug, by build ID or .gnu_debuglink) or debuginfod (DEBUGINFOD_URLS).\n"
  "  -o OUT           write the result to OUT (default: replace FILE)\n"
  "  --debug-dir DIR  also look in DIR (laid out as /usr/lib/debug), before /usr/lib/debug\n"
  "  -q, --quiet      no summary on stderr\n"
  "See mimalloc-prof(1).\n";

/* One object (file) of the profile and what became of its locations. */
typedef struct object_s {
  const char  *path, *build_id;
  bool         opened;                      /* sym_obj_open was tried (when a location needed it) */
  sym_obj_t   *obj;
  sym_status_t status;
  char         detail[256];
  size_t       named, unnamed, uncovered;   /* locations */
  size_t       kept_unnamed;                /* locations of a mapping symbolized before, without a name */
  const char  *recorded;                    /* the reason an earlier run recorded (p's string), or NULL */
} object_t;

#define REASON_PREFIX "mimalloc-prof symbolize: unnamed in "

typedef struct report_s {
  size_t locations, named, kept, unmapped, inlined;
} report_t;

/* The objects of the profile's mappings (mappings of one file share one, found through a table of
 * (path, build ID): a profile may have many mappings); none opened yet. */
static object_t *objects_find(const profile_t *p, size_t **of_mapping, size_t *n_objects)
{
  object_t *objs = calloc(p->n_mapping + 1, sizeof *objs);
  *of_mapping = calloc(p->n_mapping + 1, sizeof **of_mapping);
  size_t cap = 16;
  while (cap < 2 * p->n_mapping) cap *= 2;
  size_t *slot = calloc(cap, sizeof *slot);                  /* object + 1 */
  if (objs == NULL || *of_mapping == NULL || slot == NULL) abort();
  size_t n = 0;
  for (size_t i = 0; i < p->n_mapping; i++) {
    const char *path = pstr(p, p->mapping[i]->filename), *bid = pstr(p, p->mapping[i]->build_id);
    size_t k = (size_t)tool_hash(tool_hash_str(path), tool_hash_str(bid)) & (cap - 1);
    for (; slot[k] != 0; k = (k + 1) & (cap - 1)) {
      const object_t *ob = &objs[slot[k] - 1];
      if (strcmp(ob->path, path) == 0 && strcmp(ob->build_id, bid) == 0) break;
    }
    if (slot[k] == 0) {
      objs[n].path = path;
      objs[n].build_id = bid;
      slot[k] = ++n;
    }
    (*of_mapping)[i] = slot[k] - 1;
  }
  free(slot);
  *n_objects = n;
  return objs;
}

/* The new lines of one location; 0 when it keeps its own. */
static size_t symbolize_location(pbuild_t *b, object_t *ob, const mapping_t *m, const location_t *l,
                                 pb_line_t *lines, const sym_opts_t *o)
{
  uint64_t addr;
  sym_frame_t frames[MAX_FRAMES];
  if (!ob->opened) {
    ob->opened = true;
    ob->obj = sym_obj_open(ob->path, ob->build_id, o, &ob->status, ob->detail, sizeof ob->detail);
  }
  if (ob->obj == NULL || !sym_obj_addr(ob->obj, m, l->address, &addr)) return 0;
  size_t n = sym_obj_lookup(ob->obj, addr, frames, MAX_FRAMES);
  for (size_t i = 0; i < n; i++) {
    const char *decl_file = frames[i].decl_file[0] ? frames[i].decl_file : frames[i].file;
    lines[i].function_id =
      pb_function(b, frames[i].name, frames[i].system_name, decl_file, frames[i].decl_line);
    lines[i].line = frames[i].line;
  }
  sym_frames_free(frames, n);
  return n;
}

/* A location copied as it is (copied[]: as pb_copy_function). */
static size_t copy_lines(pbuild_t *b, const profile_t *p, const pindex_t *ix, const location_t *l,
                         pb_line_t *lines, uint64_t *copied)
{
  size_t n = l->n_line < MAX_FRAMES ? l->n_line : MAX_FRAMES;
  for (size_t k = 0; k < n; k++) {
    lines[k].function_id = pb_copy_function(b, p, ix, l->line[k]->function_id, copied);
    lines[k].line = l->line[k]->line;
  }
  return n;
}

static void symbolize(pbuild_t *b, const profile_t *p, const sym_opts_t *o, object_t *objs,
                      const size_t *of_mapping, report_t *r)
{
  pindex_t ix;
  pindex_init(&ix, p);
  uint64_t *map_new = calloc(p->n_mapping + 1, sizeof *map_new);
  uint64_t *loc_new = calloc(p->n_location + 1, sizeof *loc_new);
  uint64_t *fn_new = calloc(p->n_function + 1, sizeof *fn_new);
  if (map_new == NULL || loc_new == NULL || fn_new == NULL) abort();
  for (size_t i = 0; i < p->n_mapping; i++) {
    int64_t delta;
    map_new[i] = pb_mapping(b, p, p->mapping[i], &delta);
  }
  pb_line_t lines[MAX_FRAMES];
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    size_t mi = l->mapping_id ? pindex_mapping_pos(&ix, l->mapping_id) : SIZE_MAX;
    size_t n = 0;
    r->locations++;
    if (mi == SIZE_MAX) {
      n = copy_lines(b, p, &ix, l, lines, fn_new);
      if (n != 0) r->kept++;
      else r->unmapped++;
    } else {
      object_t *ob = &objs[of_mapping[mi]];
      const mapping_t *m = p->mapping[mi];
      if (m->has_functions) {
        n = copy_lines(b, p, &ix, l, lines, fn_new);
        if (n != 0) r->kept++;
        else ob->kept_unnamed++;
        r->inlined += n > 1;
      } else if ((n = symbolize_location(b, ob, m, l, lines, o)) != 0) {
        r->named++;
        ob->named++;
        r->inlined += n > 1;
      } else {
        n = copy_lines(b, p, &ix, l, lines, fn_new);   /* dladdr's name, when the library found one */
        if (ob->obj != NULL) ob->uncovered++;
        else ob->unnamed++;
        if (n != 0) r->kept++;
      }
    }
    loc_new[i] = pb_location(b, mi == SIZE_MAX ? 0 : map_new[mi], l->address, lines, n);
  }
  for (size_t i = 0; i < p->n_mapping; i++) {     /* what the objects opened could tell */
    const object_t *ob = &objs[of_mapping[i]];
    if (ob->obj != NULL && !p->mapping[i]->has_functions) {
      bool fn, has_lines, inl;
      sym_obj_caps(ob->obj, &fn, &has_lines, &inl);
      pb_mapping_flags(b, map_new[i], fn, has_lines, has_lines, inl);
    }
  }
  uint64_t *ids = NULL;
  size_t cap = 0;
  for (size_t s = 0; s < p->n_sample; s++) {
    const sample_t *smp = p->sample[s];
    if (smp->n_location_id > cap) {
      free(ids);
      ids = malloc((cap = smp->n_location_id) * sizeof *ids);
      if (ids == NULL) abort();
    }
    size_t n = 0;
    for (size_t k = 0; k < smp->n_location_id; k++) {
      size_t pos = pindex_location_pos(&ix, smp->location_id[k]);
      if (pos != SIZE_MAX) ids[n++] = loc_new[pos];
    }
    if (smp->n_value == p->n_sample_type) pb_sample_from(b, p, smp, ids, n, 1);
  }
  free(ids);
  free(map_new);
  free(loc_new);
  free(fn_new);
  pindex_free(&ix);
}

/* Why the object's unnamed locations are unnamed (into buf): what this run found, else what an earlier
 * run recorded; NULL when none is. */
static const char *object_reason(const object_t *ob, char *buf, size_t len)
{
  const char *bid = ob->build_id[0] ? ob->build_id : "none";
  if (ob->unnamed == 0 && ob->uncovered == 0) {
    if (ob->kept_unnamed == 0) return NULL;
    snprintf(buf, len, "%s", ob->recorded != NULL ? ob->recorded : "unnamed when the profile was symbolized "
             "before (the reason was not recorded; symbolize the raw profile again to see it)");
    return buf;
  }
  if (ob->uncovered != 0) {
    snprintf(buf, len, "no symbol covers the address (stripped local functions?)");
    return buf;
  }
  switch (ob->status) {
  case SYM_NO_FILE:
    snprintf(buf, len, "no such file, and no file with build ID %s in the debug directories%s", bid,
             getenv("DEBUGINFOD_URLS") ? " or from debuginfod" : " (DEBUGINFOD_URLS is not set)");
    break;
  case SYM_MISMATCH:
    snprintf(buf, len, "build-ID mismatch (the file has %s, the profile %s: it changed since the profile was "
             "written), and no file with build ID %s was found", ob->detail, bid, bid);
    break;
  case SYM_NO_SYMBOLS:
    snprintf(buf, len, "no symbols (%s has neither a symbol table nor debug information; install the "
             "package's debug symbols, -dbgsym or -dbg, or give --debug-dir)", ob->detail);
    break;
  case SYM_NOT_ELF:
    snprintf(buf, len, "not an ELF object whose segments match the mapping (%s)",
             ob->detail[0] ? ob->detail : ob->path);
    break;
  case SYM_NOT_REGULAR:
    snprintf(buf, len, "not a regular file (%s: not read), and no file with build ID %s was found",
             ob->detail, bid);
    break;
  case SYM_FOUND: return NULL;
  }
  return buf;
}

/* The start of the comment that records an object's reason: REASON_PREFIX PATH " (build ID " ID "): "
 * (malloc'd). */
static char *reason_key(const object_t *ob)
{
  size_t len = sizeof REASON_PREFIX + strlen(ob->path) + strlen(ob->build_id) + 32;
  char *key = malloc(len);
  if (key == NULL) abort();
  snprintf(key, len, REASON_PREFIX "%s (build ID %s): ", ob->path, ob->build_id[0] ? ob->build_id : "none");
  return key;
}

static int by_string(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The reason an earlier run recorded for each object that needs one (kept_unnamed): the recorded comments
 * sorted once, each key found by binary search (a hostile profile may have many of both). */
static void find_recorded(const profile_t *p, object_t *objs, size_t n_objs)
{
  const char **rec = malloc((p->n_comment + 1) * sizeof *rec);
  if (rec == NULL) abort();
  size_t n = 0;
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = pstr(p, p->comment[i]);
    if (strncmp(c, REASON_PREFIX, sizeof REASON_PREFIX - 1) == 0) rec[n++] = c;
  }
  qsort(rec, n, sizeof *rec, by_string);
  for (size_t i = 0; i < n_objs && n != 0; i++) {
    if (objs[i].kept_unnamed == 0) continue;
    char *key = reason_key(&objs[i]);
    size_t len = strlen(key), lo = 0, hi = n;
    while (lo < hi) {                          /* the first comment not below the key */
      size_t mid = (lo + hi) / 2;
      if (strcmp(rec[mid], key) < 0) lo = mid + 1;
      else hi = mid;
    }
    if (lo < n && strncmp(rec[lo], key, len) == 0) objs[i].recorded = rec[lo] + len;
    free(key);
  }
  free(rec);
}

/* Records each object's reason in the profile being built. */
static void record_reasons(pbuild_t *b, const object_t *objs, size_t n_objs)
{
  for (size_t i = 0; i < n_objs; i++) {
    char reason[1024];
    if (object_reason(&objs[i], reason, sizeof reason) == NULL) continue;
    char *key = reason_key(&objs[i]);
    size_t len = strlen(key) + strlen(reason) + 1;
    char *comment = malloc(len);
    if (comment == NULL) abort();
    snprintf(comment, len, "%s%s", key, reason);
    pb_comment(b, comment);
    free(comment);
    free(key);
  }
}

/* What stayed unnamed, one line per object, with the reason (escaped: the paths and a recorded reason
 * come from the profile). */
static void print_report(const char *path, const report_t *r, const object_t *objs, size_t n_objs)
{
  size_t unnamed = r->locations - r->named - r->kept;
  char a[32], b[32], c[32];
  tool_note("%s: %s of %s locations named (%s with inlined frames)%s", path,
            tool_count((int64_t)(r->named + r->kept), a, sizeof a),
            tool_count((int64_t)r->locations, b, sizeof b), tool_count((int64_t)r->inlined, c, sizeof c),
            unnamed ? "; unnamed:" : "");
  for (size_t i = 0; i < n_objs; i++) {
    const object_t *ob = &objs[i];
    char reason[1024];
    if (object_reason(ob, reason, sizeof reason) == NULL) continue;
    fprintf(stderr, "  %zu in ", ob->unnamed + ob->uncovered + ob->kept_unnamed);
    tool_write_escaped(stderr, ob->path, strlen(ob->path), false);
    fputs(": ", stderr);
    tool_write_escaped(stderr, reason, strlen(reason), false);
    fputc('\n', stderr);
  }
  if (r->unmapped != 0)
    fprintf(stderr, "  %zu outside any file (code generated at run time, or the vDSO)\n", r->unmapped);
}

int symbolize_file(const char *in, const char *out, const sym_opts_t *o)
{
  char err[512];
  profile_t *p = profile_read(in, err, sizeof err);
  if (p == NULL) return tool_error("%s", err);
  size_t n_objs, *of_mapping;
  object_t *objs = objects_find(p, &of_mapping, &n_objs);
  profile_t h;
  int64_t *kept;
  pbuild_t *b = pbuild_new(profile_header_without(p, REASON_PREFIX, &h, &kept));   /* reasons written anew */
  free(kept);
  if (b == NULL) {
    free(objs);
    free(of_mapping);
    profile_free(p);
    return tool_error("out of memory");
  }
  report_t r = {0};
  symbolize(b, p, o, objs, of_mapping, &r);
  free(of_mapping);
  find_recorded(p, objs, n_objs);
  record_reasons(b, objs, n_objs);
  const profile_t *result = pbuild_profile(b);
  int rc = EXIT_SUCCESS;
  if (pbuild_failed(b)) rc = tool_error("%s: out of memory", in);
  else if (profile_write(result, out ? out : in, err, sizeof err) != 0) rc = tool_error("%s", err);
  else if (!o->quiet) print_report(out ? out : in, &r, objs, n_objs);
  for (size_t i = 0; i < n_objs; i++) sym_obj_close(objs[i].obj);
  free(objs);
  sym_finish();
  pbuild_free(b);
  profile_free(p);
  return rc;
}

int cmd_symbolize(int argc, char **argv)
{
  enum { OPT_DEBUGDIR = 0x200 };
  static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                       {"debug-dir", required_argument, NULL, OPT_DEBUGDIR},
                                       {"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *out = NULL, *dirs[64];
  sym_opts_t o = {.debug_dirs = dirs};
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":o:qh", opts, NULL)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case 'q': o.quiet = true; break;
    case OPT_DEBUGDIR:
      if (o.n_debug_dirs == sizeof dirs / sizeof dirs[0]) return tool_usage_error("too many --debug-dir");
      dirs[o.n_debug_dirs++] = optarg;
      break;
    case 'h': return tool_help(usage);
    default: return tool_getopt_error(c, argv);
    }
  }
  if ((rc = tool_one_profile(argc, argv, "")) != 0) return rc;
  return symbolize_file(argv[optind], out, &o);
}
