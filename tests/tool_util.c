/* tool_util.c - see tool_util.h. */
#define _GNU_SOURCE
#include "tool_util.h"

#include <ftw.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

static char run_dir[PATH_MAX / 4];

void tool_dirs_setup(void)
{
  const char *base = getenv("TMPDIR");
  snprintf(run_dir, sizeof run_dir, "%s/mprof-tool-XXXXXX", base != NULL && base[0] != '\0' ? base : "/tmp");
  if (mkdtemp(run_dir) == NULL) run_dir[0] = '\0';
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  (void)st, (void)type, (void)ftw;
  remove(path);
  return 0;
}

void tool_dirs_teardown(void)
{
  if (run_dir[0] != '\0') nftw(run_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  run_dir[0] = '\0';
}

const char *tool_tmpdir(char *buf, size_t len)
{
  ck_assert_msg(run_dir[0] != '\0', "no temporary directory (TMPDIR)");
  snprintf(buf, len, "%s/XXXXXX", run_dir);
  ck_assert_ptr_nonnull(mkdtemp(buf));
  return buf;
}

probe_run_t tool_run(const char *const *args, const char *const *env)
{
  probe_opts_t o = {.env = env, .watchdog_s = 120};
  return probe_run(probe_getenv("MPROF_TEST_TOOL"), args, &o);
}

void tool_assert_usage_error(const probe_run_t *r, const char *cmd, const char *words)
{
  char prefix[64], hint[80];
  snprintf(prefix, sizeof prefix, "mimalloc-prof %s: ", cmd);
  snprintf(hint, sizeof hint, "Try 'mimalloc-prof %s --help'.\n", cmd);
  ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 2, "exit status %d, stderr:\n%s", r->status, r->err);
  ck_assert_msg(strncmp(r->err, prefix, strlen(prefix)) == 0, "stderr does not start with '%s':\n%s", prefix, r->err);
  const char *nl = strchr(r->err, '\n');
  ck_assert_msg(nl != NULL && strcmp(nl + 1, hint) == 0, "not one line + the hint:\n%s", r->err);
  ck_assert_msg(strstr(r->err, words) != NULL && strstr(r->err, words) < nl, "'%s' not in the message:\n%s", words,
                r->err);
}

profile_t *tool_profile(const char *path)
{
  char err[512];
  profile_t *p = profile_read(path, err, sizeof err);
  ck_assert_msg(p != NULL, "%s", err);
  return p;
}

const char *tool_line_name(const profile_t *p, const pindex_t *ix, const location_t *l, size_t k)
{
  if (k >= l->n_line) return "";
  const function_t *f = pindex_function(ix, l->line[k]->function_id);
  return f ? pstr(p, f->name) : "";
}

bool tool_exists(const char *path)
{
  struct stat st;
  return lstat(path, &st) == 0;
}

/* The mapping of a synthetic profile: `file` (NULL: /synthetic/prog) at `start`. */
static uint64_t synthetic_mapping(pbuild_t *b, uint64_t start, const char *file)
{
  mapping_t m = PERFTOOLS__PROFILES__MAPPING__INIT;
  profile_t mp = PERFTOOLS__PROFILES__PROFILE__INIT;
  char *mstrings[] = {"", (char *)(file ? file : "/synthetic/prog"), "0123456789abcdef"};
  mp.string_table = mstrings;
  mp.n_string_table = 3;
  m.memory_start = start;
  m.memory_limit = start + 0x100000;
  m.filename = 1;
  m.build_id = 2;
  int64_t delta;
  return pb_mapping(b, &mp, &m, &delta);
}

/* The locations of "outer;...;inner", innermost first, into ids (up to 64); returns how many. */
static size_t synthetic_stack(pbuild_t *b, uint64_t mid, uint64_t start, const char *frames, uint64_t *ids)
{
  size_t depth = 0;
  char *copy = strdup(frames), *save = NULL;
  char *names[64];
  for (char *f = strtok_r(copy, ";", &save); f != NULL && depth < 64; f = strtok_r(NULL, ";", &save))
    names[depth++] = f;
  for (size_t k = 0; k < depth; k++) {                    /* innermost first */
    const char *name = names[depth - 1 - k];
    bool dropped = strcmp(name, "[dropped]") == 0;
    pb_line_t line = {pb_function(b, dropped ? "[mimalloc-prof: dropped (unwind)]" : name, NULL, "", 0), 0};
    uint64_t addr = start + 0x1000 + 16 * (uint64_t)(strlen(name) * 131 + (unsigned char)name[0] + k * 7919);
    ids[k] = pb_location(b, dropped ? 0 : mid, dropped ? 2 : addr, &line, 1);
  }
  free(copy);
  return depth;
}

static void synthetic_write(pbuild_t *b, const char *path)
{
  char err[512];
  ck_assert(!pbuild_failed(b));
  ck_assert_msg(profile_write(pbuild_profile(b), path, err, sizeof err) == 0, "%s", err);
  pbuild_free(b);
}

void tool_synthetic(const char *path, const tool_stack_t *stacks, size_t n, uint64_t start, const char *file)
{
  pbuild_t *b = pbuild_new_heap(524288);
  ck_assert_ptr_nonnull(b);
  uint64_t mid = synthetic_mapping(b, start, file);
  for (size_t s = 0; s < n; s++) {
    uint64_t ids[64];
    size_t depth = synthetic_stack(b, mid, start, stacks[s].frames, ids);
    int64_t v[4] = {stacks[s].alloc_bytes / 1024, stacks[s].alloc_bytes, stacks[s].inuse_bytes / 1024,
                    stacks[s].inuse_bytes};
    pb_sample(b, ids, depth, v, 1);
  }
  synthetic_write(b, path);
}

void tool_synthetic_labelled(const char *path, const tool_sample_t *samples, size_t n, bool lifetimes,
                             const char *const *comments, const timeline_t *timeline)
{
  pbuild_t *types = pbuild_new_heap_types(524288, lifetimes ? 8 : 6);
  ck_assert_ptr_nonnull(types);
  profile_t h = *pbuild_profile(types);
  h.time_nanos = TOOL_SYNTHETIC_T0 + 1000000000;          /* written 1 s after the session started */
  h.duration_nanos = 1000000000;
  h.mimalloc_prof_timeline = (timeline_t *)(uintptr_t)timeline;
  pbuild_t *b = pbuild_new(&h);
  ck_assert_ptr_nonnull(b);
  pbuild_free(types);
  for (const char *const *c = comments; c != NULL && *c != NULL; c++) pb_comment(b, *c);
  uint64_t mid = synthetic_mapping(b, 0x555500000000ull, NULL);
  for (size_t s = 0; s < n; s++) {
    const tool_sample_t *t = &samples[s];
    uint64_t ids[64];
    size_t depth = synthetic_stack(b, mid, 0x555500000000ull, t->frames, ids);
    pb_label_t labels[3];
    size_t nl = 0;
    if (t->thread != NULL) labels[nl++] = (pb_label_t){pb_string(b, "thread"), pb_string(b, t->thread), 0, 0};
    if (t->bytes > 0) labels[nl++] = (pb_label_t){pb_string(b, "bytes"), 0, t->bytes, pb_string(b, "bytes")};
    if (t->lifetime >= 0 && t->freed != 0)
      labels[nl++] = (pb_label_t){pb_string(b, "lifetime"), 0, t->lifetime, pb_string(b, "nanoseconds")};
    int64_t v[8] = {t->alloc / 1024, t->alloc, t->inuse / 1024, t->inuse,
                    t->peak / 1024,  t->peak,  t->freed / 1024, t->freed};
    pb_sample_labels(b, ids, depth, labels, nl, v, 1);
  }
  synthetic_write(b, path);
}

char *tool_file_text(const char *path)
{
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s", path);
  char *text = NULL;
  size_t cap = 0;
  ck_assert_int_ge(getdelim(&text, &cap, '\0', f), 0);
  fclose(f);
  return text;
}
