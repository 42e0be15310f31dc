/* test_pprof.c - heap profiles in pprof format (lib/pprof.c, lib/dump.c): catalogue D29-D33, the dump
 * parts of C22 (rate 1) and C24 (memory budget), and dump errors.
 *
 * Profiles are decoded the way pprof reads them: gunzip (zlib), then protobuf-c's unpack with the code
 * generated from proto/profile.proto, and every decoded profile is checked against the rules of
 * profile.proto (profile_assert_wellformed).  In-process tests compare a dump with mi_prof_stats and
 * mi_prof_visit taken around it with nothing allocated in between; Check's passing assertions allocate
 * (and may be sampled), so every measurement is taken first and asserted afterwards.  The automatic
 * triggers, the leak report and the budget depend on MIMALLOC_PROF_* options, read once at load, so
 * those tests run tests/pprof_probe (MPROF_TEST_PPROF_PROBE) in a subprocess, with MIMALLOC_PROF_PREFIX
 * in a temporary directory.  `go tool pprof` is run when `go` is on PATH; without it, those checks are
 * skipped and the rest of the test still runs (and passes).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-prof.h"
#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF

#include <zlib.h>

#include "profile.pb-c.h"

#define SEED 0x9a0f11eull

typedef Perftools__Profiles__Profile  profile_t;
typedef Perftools__Profiles__Mapping  mapping_t;
typedef Perftools__Profiles__Location location_t;
typedef Perftools__Profiles__Function function_t;
typedef Perftools__Profiles__Sample   sample_t;

/* The sample values, in the order the profile declares them. */
enum { V_ALLOC_OBJECTS, V_ALLOC_SPACE, V_INUSE_OBJECTS, V_INUSE_SPACE, N_VALUES };

static uint64_t realtime_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------------
   Temporary directories: one per test, inside one per run made and removed by an unchecked fixture,
   which runs in Check's parent process, so the files go even when a failed assertion ends a test's own
   process (it leaves with _exit).
--------------------------------------------------------------------------------------------------- */

static char run_dir[PATH_MAX / 4];
static char tmp_dir[PATH_MAX / 2];

static void run_dir_setup(void)
{
  const char *base = getenv("TMPDIR");
  snprintf(run_dir, sizeof run_dir, "%s/mprof-pprof-XXXXXX", base != NULL && base[0] != '\0' ? base : "/tmp");
  if (mkdtemp(run_dir) == NULL) run_dir[0] = '\0';    /* tmp_dir_make fails the tests that need it */
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  (void)st, (void)type, (void)ftw;
  remove(path);
  return 0;
}

static void run_dir_teardown(void)
{
  if (run_dir[0] != '\0') nftw(run_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  run_dir[0] = '\0';
}

static const char *tmp_dir_make(void)
{
  ck_assert_msg(run_dir[0] != '\0', "no temporary directory (TMPDIR)");
  snprintf(tmp_dir, sizeof tmp_dir, "%s/XXXXXX", run_dir);
  ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
  return tmp_dir;
}

/* ---------------------------------------------------------------------------------------------------
   Decoding: gunzip, protobuf-c unpack, the rules of profile.proto
--------------------------------------------------------------------------------------------------- */

static unsigned char *file_read(const char *path, size_t *len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ck_assert_msg(fd >= 0, "cannot open %s: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  ck_assert_ptr_nonnull(buf);
  for (;;) {
    if (n == cap) {
      buf = realloc(buf, cap *= 2);
      ck_assert_ptr_nonnull(buf);
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    ck_assert_int_ge(r, 0);
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  *len = n;
  return buf;
}

/* Inflates exactly one complete gzip member with nothing after it; NULL otherwise. */
static unsigned char *gunzip(const unsigned char *gz, size_t len, size_t *out_len)
{
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return NULL;
  size_t cap = 4 * len + 4096;
  unsigned char *out = malloc(cap);
  z.next_in = (Bytef *)(uintptr_t)gz;
  z.avail_in = (uInt)len;
  int rc = Z_OK;
  while (out != NULL && rc == Z_OK) {
    if (z.total_out == cap) out = realloc(out, cap *= 2);
    if (out == NULL) break;
    z.next_out = out + z.total_out;
    z.avail_out = (uInt)(cap - z.total_out);
    rc = inflate(&z, Z_NO_FLUSH);
  }
  *out_len = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || z.avail_in != 0) {
    free(out);
    return NULL;
  }
  return out;
}

static const char *pstr(const profile_t *p, int64_t i)
{
  ck_assert_msg(i >= 0 && (uint64_t)i < p->n_string_table, "string index %" PRId64 " of %zu", i,
                p->n_string_table);
  return p->string_table[i];
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The ids, sorted, after asserting that each is nonzero and distinct (caller frees). */
static uint64_t *ids_checked(size_t n, uint64_t (*id_of)(const profile_t *, size_t), const profile_t *p,
                             const char *what)
{
  uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);
  ck_assert_ptr_nonnull(ids);
  for (size_t i = 0; i < n; i++) ids[i] = id_of(p, i);
  qsort(ids, n, sizeof *ids, cmp_u64);
  for (size_t i = 0; i < n; i++) {
    ck_assert_msg(ids[i] != 0, "%s id 0", what);
    ck_assert_msg(i == 0 || ids[i] != ids[i - 1], "%s id %" PRIu64 " twice", what, ids[i]);
  }
  return ids;
}

static bool id_known(const uint64_t *ids, size_t n, uint64_t id)
{
  return id != 0 && bsearch(&id, ids, n, sizeof *ids, cmp_u64) != NULL;
}

static uint64_t mapping_id_at(const profile_t *p, size_t i) { return p->mapping[i]->id; }
static uint64_t location_id_at(const profile_t *p, size_t i) { return p->location[i]->id; }
static uint64_t function_id_at(const profile_t *p, size_t i) { return p->function[i]->id; }

static const mapping_t *mapping_by_id(const profile_t *p, uint64_t id)
{
  for (size_t i = 0; i < p->n_mapping; i++)
    if (p->mapping[i]->id == id) return p->mapping[i];
  return NULL;
}

static const location_t *location_by_id(const profile_t *p, uint64_t id)
{
  for (size_t i = 0; i < p->n_location; i++)
    if (p->location[i]->id == id) return p->location[i];
  return NULL;
}

static bool is_hex(const char *s)
{
  for (; *s != '\0'; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return false;
  return true;
}

static void assert_header(const profile_t *p)
{
  static const char *const types[N_VALUES][2] = {
    {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
  ck_assert_uint_ge(p->n_string_table, 1);
  ck_assert_str_eq(p->string_table[0], "");
  ck_assert_uint_eq(p->n_sample_type, N_VALUES);
  for (size_t i = 0; i < N_VALUES; i++) {
    ck_assert_str_eq(pstr(p, p->sample_type[i]->type), types[i][0]);
    ck_assert_str_eq(pstr(p, p->sample_type[i]->unit), types[i][1]);
  }
  ck_assert_ptr_nonnull(p->period_type);
  ck_assert_str_eq(pstr(p, p->period_type->type), "space");
  ck_assert_str_eq(pstr(p, p->period_type->unit), "bytes");
  ck_assert_int_gt(p->period, 0);
  ck_assert_str_eq(pstr(p, p->default_sample_type), "inuse_space");
  ck_assert_ptr_nonnull(strstr(pstr(p, p->drop_frames), "malloc"));
  ck_assert_int_ge(p->time_nanos, 0);
  ck_assert_int_ge(p->duration_nanos, 0);
  for (size_t i = 0; i < p->n_comment; i++) pstr(p, p->comment[i]);
}

/* Mappings: distinct nonzero ids, named files, non-overlapping ranges, a file offset congruent with the
 * address modulo the page size (ELF: p_offset = p_vaddr mod p_align), build IDs in lower-case hex. */
static void assert_mappings(const profile_t *p)
{
  free(ids_checked(p->n_mapping, mapping_id_at, p, "mapping"));
  ck_assert_uint_ge(p->n_mapping, 1);
  for (size_t i = 0; i < p->n_mapping; i++) {
    const mapping_t *m = p->mapping[i];
    ck_assert_uint_lt(m->memory_start, m->memory_limit);
    ck_assert_str_ne(pstr(p, m->filename), "");
    ck_assert_uint_eq((m->memory_start - m->file_offset) % 4096, 0);
    const char *build_id = pstr(p, m->build_id);
    ck_assert_msg(strlen(build_id) % 2 == 0 && is_hex(build_id), "build id \"%s\"", build_id);
    for (size_t j = 0; j < i; j++) {
      const mapping_t *o = p->mapping[j];
      ck_assert_msg(m->memory_limit <= o->memory_start || o->memory_limit <= m->memory_start,
                    "mappings %" PRIu64 " and %" PRIu64 " overlap", m->id, o->id);
    }
  }
}

/* Functions, locations and samples: every reference resolves; a location lies inside its mapping;
 * a sample has four values, in use never above allocated. */
static void assert_references(const profile_t *p)
{
  uint64_t *fn = ids_checked(p->n_function, function_id_at, p, "function");
  for (size_t i = 0; i < p->n_function; i++) ck_assert_str_ne(pstr(p, p->function[i]->name), "");
  uint64_t *loc = ids_checked(p->n_location, location_id_at, p, "location");
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    const mapping_t *m = mapping_by_id(p, l->mapping_id);
    if (l->mapping_id == 0 && l->n_line == 1) {     /* a "dropped" frame: no code, only its name */
      const char *name = pstr(p, p->function[l->line[0]->function_id - 1]->name);
      ck_assert_msg(strncmp(name, "[mimalloc-prof: dropped (", 25) == 0, "unmapped location named %s", name);
      continue;
    }
    ck_assert_msg(m != NULL, "location %" PRIu64 " has mapping id %" PRIu64, l->id, l->mapping_id);
    ck_assert_msg(l->address >= m->memory_start && l->address < m->memory_limit,
                  "location %#" PRIx64 " outside its mapping", l->address);
    for (size_t k = 0; k < l->n_line; k++) ck_assert(id_known(fn, p->n_function, l->line[k]->function_id));
  }
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    ck_assert_uint_eq(s->n_value, N_VALUES);
    for (size_t v = 0; v < N_VALUES; v++) ck_assert_int_ge(s->value[v], 0);
    ck_assert_int_le(s->value[V_INUSE_OBJECTS], s->value[V_ALLOC_OBJECTS]);
    ck_assert_int_le(s->value[V_INUSE_SPACE], s->value[V_ALLOC_SPACE]);
    ck_assert_uint_ge(s->n_location_id, 1);
    for (size_t k = 0; k < s->n_location_id; k++) ck_assert(id_known(loc, p->n_location, s->location_id[k]));
  }
  free(fn);
  free(loc);
}

static void profile_assert_wellformed(const profile_t *p)
{
  assert_header(p);
  assert_mappings(p);
  assert_references(p);
}

static profile_t *profile_decode(const unsigned char *gz, size_t len)
{
  size_t raw_len;
  unsigned char *raw = gunzip(gz, len, &raw_len);
  if (raw == NULL) return NULL;
  profile_t *p = perftools__profiles__profile__unpack(NULL, raw_len, raw);
  free(raw);
  return p;
}

/* Reads, decodes and checks the profile at path. */
static profile_t *profile_load(const char *path)
{
  size_t len;
  unsigned char *gz = file_read(path, &len);
  ck_assert_msg(len >= 18 && gz[0] == 0x1f && gz[1] == 0x8b, "%s is not gzip (%zu bytes)", path, len);
  profile_t *p = profile_decode(gz, len);
  free(gz);
  ck_assert_msg(p != NULL, "%s: gunzip or protobuf-c unpack failed", path);
  profile_assert_wellformed(p);
  return p;
}

static void profile_free(profile_t *p) { perftools__profiles__profile__free_unpacked(p, NULL); }

static void profile_sums(const profile_t *p, int64_t sum[N_VALUES])
{
  memset(sum, 0, N_VALUES * sizeof *sum);
  for (size_t i = 0; i < p->n_sample; i++)
    for (size_t v = 0; v < N_VALUES; v++) sum[v] += p->sample[i]->value[v];
}

/* The number after " key=" in the comment that starts with `head`; false when there is none. */
static bool comment_value(const profile_t *p, const char *head, const char *key, uint64_t *out)
{
  char pattern[64];
  snprintf(pattern, sizeof pattern, " %s=", key);
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = pstr(p, p->comment[i]);
    if (strncmp(c, head, strlen(head)) != 0) continue;
    const char *at = strstr(c, pattern);
    if (at == NULL) return false;
    *out = strtoull(at + strlen(pattern), NULL, 10);
    return true;
  }
  return false;
}

static uint64_t comment_number(const profile_t *p, const char *head, const char *key)
{
  uint64_t v = 0;
  ck_assert_msg(comment_value(p, head, key, &v), "no comment \"%s... %s=N\"", head, key);
  return v;
}

/* The function name of a location's first line ("" when the profile names none). */
static const char *location_name(const profile_t *p, const location_t *l)
{
  if (l->n_line == 0) return "";
  for (size_t i = 0; i < p->n_function; i++)
    if (p->function[i]->id == l->line[0]->function_id) return pstr(p, p->function[i]->name);
  return "";
}

/* The sample's innermost location (the program's frame that called the allocator). */
static const location_t *sample_leaf(const profile_t *p, const sample_t *s)
{
  const location_t *l = location_by_id(p, s->location_id[0]);
  ck_assert_ptr_nonnull(l);
  return l;
}

/* Sum of value v over the samples whose innermost frame the profile names `fn`. */
static int64_t leaf_total(const profile_t *p, const char *fn, int v)
{
  int64_t sum = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    if (strcmp(location_name(p, sample_leaf(p, p->sample[i])), fn) == 0) sum += p->sample[i]->value[v];
  return sum;
}

static bool ends_with(const char *s, const char *tail)
{
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

static const mapping_t *mapping_named(const profile_t *p, const char *tail)
{
  for (size_t i = 0; i < p->n_mapping; i++)
    if (ends_with(pstr(p, p->mapping[i]->filename), tail)) return p->mapping[i];
  return NULL;
}

/* ---------------------------------------------------------------------------------------------------
   Subprocesses: the probe and go
--------------------------------------------------------------------------------------------------- */

/* Starts tests/pprof_probe with `args` after its name and `vars` in its environment; `with_stdin`: a pipe
 * to its stdin (the load mode runs until stdin's end). */
static probe_child_t start_probe(const char *const *vars, const char *const *args, bool with_stdin)
{
  probe_opts_t opts = {.env = vars, .with_stdin = with_stdin};
  return probe_start(probe_getenv("MPROF_TEST_PPROF_PROBE"), args, &opts);
}

static probe_run_t run_probe(const char *const *vars, const char *const *args)
{
  probe_child_t c = start_probe(vars, args, false);
  return probe_finish(&c);
}

/* The value of the "key value" line of stdout, as a string into buf. */
static void out_string(const probe_run_t *r, const char *key, char *buf, size_t len)
{
  size_t vlen;
  const char *value = probe_text(r, key, &vlen);
  ck_assert_uint_lt(vlen, len);
  memcpy(buf, value, vlen);
  buf[vlen] = '\0';
}

/* The path of an executable `go` on PATH; false when there is none. */
static bool go_find(char *out, size_t len)
{
  const char *path = getenv("PATH");
  while (path != NULL && *path != '\0') {
    const char *colon = strchr(path, ':');
    size_t n = colon != NULL ? (size_t)(colon - path) : strlen(path);
    if (n > 0 && (size_t)snprintf(out, len, "%.*s/go", (int)n, path) < len && access(out, X_OK) == 0) return true;
    path = colon != NULL ? colon + 1 : NULL;
  }
  return false;
}

/* `go tool pprof ARGS...` (go found by go_find). */
static probe_run_t go_pprof(const char *go, const char *const *args)
{
  const char *argv[16] = {"tool", "pprof"};
  for (size_t i = 0; args[i] != NULL; i++) {
    ck_assert_uint_lt(i + 3, sizeof argv / sizeof argv[0]);
    argv[i + 2] = args[i];
  }
  return probe_run(go, argv, NULL);
}

/* flat% of `fn` in `go tool pprof -top` output (rows: flat flat% sum% cum cum% name); -1 if absent. */
static double top_flat_percent(const char *top, const char *fn)
{
  for (const char *line = top; line != NULL && *line != '\0';) {
    const char *end = strchr(line, '\n');
    char row[512], flat[64], flat_pct[64], sum_pct[64], cum[64], cum_pct[64], name[256];
    size_t n = end != NULL ? (size_t)(end - line) : strlen(line);
    if (n < sizeof row) {
      memcpy(row, line, n);
      row[n] = '\0';
      if (sscanf(row, "%63s %63s %63s %63s %63s %255s", flat, flat_pct, sum_pct, cum, cum_pct, name) == 6 &&
          strcmp(name, fn) == 0 && ends_with(flat_pct, "%"))
        return strtod(flat_pct, NULL);
    }
    line = end != NULL ? end + 1 : NULL;
  }
  return -1;
}

/* ---------------------------------------------------------------------------------------------------
   Automatic dump files: <dir>/prof.<pid>.<seq>.<kind>.pb.gz
--------------------------------------------------------------------------------------------------- */

#define MAX_DUMPS 64

typedef struct dump_file_s {
  unsigned seq;
  char kind;
  char path[PATH_MAX];
} dump_file_t;

static int cmp_seq(const void *a, const void *b)
{
  const dump_file_t *x = a, *y = b;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every file in dir, sorted by sequence number.  Each must be named prof.<pid>.<seq>.<kind>.pb.gz with
 * this pid and a documented kind, and the sequence numbers must run 0, 1, ... n-1. */
static size_t dumps_list(const char *dir, pid_t pid, dump_file_t *out)
{
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    int file_pid = -1, used = -1;
    unsigned seq;
    char kind;
    int got = sscanf(e->d_name, "prof.%d.%u.%c.pb.gz%n", &file_pid, &seq, &kind, &used);
    ck_assert_msg(got == 3 && used > 0 && e->d_name[used] == '\0' && file_pid == (int)pid &&
                  strchr("mfius", kind) != NULL, "unexpected file %s (pid %d)", e->d_name, (int)pid);
    ck_assert_uint_lt(n, MAX_DUMPS);
    out[n].seq = seq;
    out[n].kind = kind;
    snprintf(out[n].path, sizeof out[n].path, "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  qsort(out, n, sizeof *out, cmp_seq);
  for (size_t i = 0; i < n; i++) ck_assert_uint_eq(out[i].seq, i);
  return n;
}

/* The kinds of the files in sequence order, as a string ("iiis"). */
static void dumps_kinds(const dump_file_t *f, size_t n, char *kinds)
{
  for (size_t i = 0; i < n; i++) kinds[i] = f[i].kind;
  kinds[n] = '\0';
}

static void set_var(char *buf, size_t len, const char *name, const char *value)
{
  ck_assert_uint_lt((size_t)snprintf(buf, len, "%s=%s", name, value), len);
}

/* ---------------------------------------------------------------------------------------------------
   In-process allocation sites
--------------------------------------------------------------------------------------------------- */

/* One allocation site: every block it allocates has the same stack up to its caller. */
static __attribute__((noinline)) void alloc_into(void **out, size_t n, size_t size)
{
  for (size_t i = 0; i < n; i++) {
    out[i] = malloc(size);
    if (out[i] != NULL) memset(out[i], 0x3c, size);
  }
}

static void free_all(void **blocks, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
}

/* ---------------------------------------------------------------------------------------------------
   D29 proto_roundtrip
--------------------------------------------------------------------------------------------------- */

#define SEEN_STACKS 64
#define SEEN_FRAMES 256

typedef struct seen_stack_s {
  size_t depth;
  uintptr_t frames[SEEN_FRAMES];
  mi_prof_stack_counts_t counts;
} seen_stack_t;

static seen_stack_t seen[SEEN_STACKS];      /* static: the visitor allocates nothing */
static size_t n_seen;
static bool seen_overflow;

static bool collect_stack(void *const *frames, size_t depth, const mi_prof_stack_counts_t *counts, void *arg)
{
  (void)arg;
  if (n_seen == SEEN_STACKS || depth > SEEN_FRAMES) {
    seen_overflow = true;
    return false;
  }
  seen[n_seen].depth = depth;
  for (size_t i = 0; i < depth; i++) seen[n_seen].frames[i] = (uintptr_t)frames[i];
  seen[n_seen].counts = *counts;
  n_seen++;
  return true;
}

/* The visited stack whose return addresses are the sample's location addresses + 1; NULL if none. */
static const seen_stack_t *seen_for(const profile_t *p, const sample_t *s)
{
  for (size_t k = 0; k < n_seen; k++) {
    if (seen[k].depth != s->n_location_id) continue;
    size_t i = 0;
    for (; i < s->n_location_id; i++) {
      const location_t *l = location_by_id(p, s->location_id[i]);
      if (l == NULL || l->address != seen[k].frames[i] - 1) break;
    }
    if (i == s->n_location_id) return &seen[k];
  }
  return NULL;
}

static void *rt_small[2000], *rt_mid[1000], *rt_large[50];

/* Three sites at rate 4096 (seed fixed): 2000 x 100 B (p = 1 - e^(-100/4096) = 0.024, E[samples] = 48.2),
 * 1000 x 3000 B with every other one freed (p = 0.52, E = 519, so P(all of a stack's samples freed) is
 * about 2^-519: every stack keeps something in use, and the sums below hold whatever
 * MIMALLOC_PROF_ACCUM says), 50 x 100 KiB (p = 1).  The stats and a visit are taken right before and
 * after the dump with nothing allocated in between, so the profile must equal them exactly: sums of
 * inuse_space and alloc_space equal to the byte; objects up to the rounding of each stack's count to
 * whole objects (<= 1/2 per stack, plus 1/2 for the rounded total). */
START_TEST(pprof_proto_roundtrip)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/roundtrip.pb.gz", tmp_dir_make());
  char exe[PATH_MAX];
  ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ck_assert_int_gt(exe_len, 0);
  exe[exe_len] = '\0';

  uint64_t t0 = realtime_ns();
  bool started = mi_prof_start_seeded(4096, SEED);
  alloc_into(rt_small, 2000, 100);
  alloc_into(rt_mid, 1000, 3000);
  for (size_t i = 0; i < 1000; i += 2) free(rt_mid[i]), rt_mid[i] = NULL;
  alloc_into(rt_large, 50, 100 << 10);
  mi_prof_stats_t before, after;
  bool stats_ok = mi_prof_stats(&before, sizeof before);
  errno = 0;
  bool dumped = mi_prof_dump(path);
  int dump_errno = errno;
  stats_ok &= mi_prof_stats(&after, sizeof after);
  bool visited = mi_prof_visit(collect_stack, NULL);
  uint64_t t1 = realtime_ns();

  ck_assert(started);
  ck_assert(stats_ok);
  ck_assert_msg(dumped, "mi_prof_dump: errno %d", dump_errno);
  ck_assert(visited);
  ck_assert(!seen_overflow);
  /* The dump itself allocated nothing that was sampled. */
  ck_assert_uint_eq(after.samples, before.samples);
  ck_assert_uint_eq(after.inuse_bytes, before.inuse_bytes);
  ck_assert_uint_eq(after.alloc_bytes, before.alloc_bytes);

  profile_t *p = profile_load(path);
  ck_assert_int_eq(p->period, 4096);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  ck_assert_uint_eq((uint64_t)sum[V_INUSE_SPACE], before.inuse_bytes);
  ck_assert_uint_eq((uint64_t)sum[V_ALLOC_SPACE], before.alloc_bytes);
  double slack = (double)(p->n_sample + 1) / 2;
  ck_assert_double_le(fabs((double)sum[V_INUSE_OBJECTS] - (double)before.inuse_objects), slack);
  ck_assert_double_le(fabs((double)sum[V_ALLOC_OBJECTS] - (double)before.alloc_objects), slack);
  ck_assert_uint_ge(p->n_sample, 3);                   /* three call sites: three stacks at least */

  /* Each sample is one visited stack, with its counts; location address = return address - 1. */
  ck_assert_uint_eq(p->n_sample, n_seen);
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    const seen_stack_t *v = seen_for(p, s);
    ck_assert_msg(v != NULL, "sample %zu matches no visited stack", i);
    ck_assert_int_eq(s->value[V_ALLOC_OBJECTS], v->counts.alloc_objects);
    ck_assert_int_eq(s->value[V_ALLOC_SPACE], v->counts.alloc_bytes);
    ck_assert_int_eq(s->value[V_INUSE_OBJECTS], v->counts.inuse_objects);
    ck_assert_int_eq(s->value[V_INUSE_SPACE], v->counts.inuse_bytes);
  }

  /* The program (mapping[0] where the loader put it lowest; pprof_main_mapping_first checks the rule
   * everywhere) and libc carry their GNU build IDs (Debian links with --build-id). */
  const mapping_t *main_map = mapping_named(p, exe);
  ck_assert_ptr_nonnull(main_map);
  ck_assert_uint_ge(strlen(pstr(p, main_map->build_id)), 16);
  const mapping_t *libc = mapping_named(p, "/libc.so.6");
  ck_assert_ptr_nonnull(libc);
  ck_assert_uint_ge(strlen(pstr(p, libc->build_id)), 16);

  /* Session start and dump time, both CLOCK_REALTIME. */
  ck_assert_uint_ge((uint64_t)p->time_nanos, t0);
  ck_assert_uint_le((uint64_t)(p->time_nanos + p->duration_nanos), t1);

  /* Comments: dropped samples (none here) and the sample count. */
  uint64_t dropped = 0;
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) dropped += before.dropped[i];
  ck_assert_uint_eq(dropped, 0);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "total"), dropped);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "memory"), 0);
  ck_assert_uint_eq(comment_number(p, "samples=", "live"), before.live_samples);
  profile_free(p);

  free_all(rt_small, 2000);
  free_all(rt_mid, 1000);
  free_all(rt_large, 50);
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   D30 empty_profile
--------------------------------------------------------------------------------------------------- */

static void assert_empty(const profile_t *p)
{
  ck_assert_uint_eq(p->n_sample, 0);
  ck_assert_uint_eq(p->n_location, 0);
  ck_assert_uint_eq(p->n_function, 0);
}

/* A profile's time: time_nanos is when its data begins (the session's start) and time_nanos +
 * duration_nanos when it was written, which must lie within [t0, t1]. */
static void assert_times(const profile_t *p, uint64_t t0, uint64_t t1, const char *what)
{
  uint64_t end = (uint64_t)(p->time_nanos + p->duration_nanos);
  ck_assert_msg(p->time_nanos > 0 && (uint64_t)p->time_nanos <= t1 && end >= t0 && end <= t1,
                "%s: time_nanos %" PRId64 " duration_nanos %" PRId64 ", written between %" PRIu64 " and %" PRIu64,
                what, p->time_nanos, p->duration_nanos, t0, t1);
}

/* A profile with no samples: while stopped in a process that never started a session (documented: a
 * valid profile with no samples), and just after a start with nothing allocated yet.  Both decode, with a
 * real time, and `go tool pprof -raw` accepts both when go is on PATH (without go that part is skipped:
 * the test still checks the decoding). */
START_TEST(pprof_empty_profile)
{
  const char *dir = tmp_dir_make();
  char stopped_path[PATH_MAX], started_path[PATH_MAX];
  snprintf(stopped_path, sizeof stopped_path, "%s/stopped.pb.gz", dir);
  snprintf(started_path, sizeof started_path, "%s/started.pb.gz", dir);

  bool was_enabled = mi_prof_is_enabled();
  uint64_t t0 = realtime_ns();
  bool stopped_ok = mi_prof_dump(stopped_path);
  int stopped_errno = errno;
  uint64_t t1 = realtime_ns();
  bool started = mi_prof_start_seeded(65536, SEED);
  bool started_ok = mi_prof_dump(started_path);
  int started_errno = errno;
  bool stop = mi_prof_stop();

  ck_assert(!was_enabled);
  ck_assert_msg(stopped_ok, "dump while stopped: errno %d", stopped_errno);
  ck_assert(started);
  ck_assert_msg(started_ok, "dump after start: errno %d", started_errno);
  ck_assert(stop);
  profile_t *stopped = profile_load(stopped_path);
  assert_empty(stopped);
  profile_t *p = profile_load(started_path);
  assert_empty(p);
  ck_assert_int_eq(p->period, 65536);
  profile_free(p);

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {                        /* without go: skipped, see above */
    const char *paths[] = {stopped_path, started_path};
    for (size_t i = 0; i < 2; i++) {
      probe_run_t r = go_pprof(go, (const char *const[]){"-raw", paths[i], NULL});
      probe_assert_exit0(&r, "go tool pprof -raw");
      ck_assert_msg(strstr(r.out, "PeriodType: space bytes") != NULL, "go tool pprof -raw:\n%s\n%s", r.out,
                    r.err);
      probe_run_free(&r);
    }
  }
  assert_times(stopped, t0, t1, "dumped before any session");
  profile_free(stopped);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   D31 symbolized_top
--------------------------------------------------------------------------------------------------- */

/* tests/pprof_probe keeps 12288 x 4 KiB from alpha_site (in the program) and 4096 x 4 KiB from
 * pprof_site_beta (in tests/libpprof_site.so) live until exit, sampled at rate 16 KiB (seed fixed) with
 * a final dump.  All samples have the same weight s/p (p = 1 - e^(-4096/16384) = 0.2212), so alpha's
 * share of the two is K_a / (K_a + K_b): given K = K_a + K_b samples (E[K] = 16384 p = 3624), K_a is
 * binomial(K, 0.75), sigma of the share = sqrt(0.75 * 0.25 / 3624) = 0.0072 = 0.72 points; 5 sigma =
 * 3.6 points.  The probe's other live blocks (stdio's buffer, start-up allocations: a few KiB, each
 * sampled one weighing under its size + 16 KiB) move the shares of the whole profile by under 0.2
 * points.  So each flat% must lie within 3.8 points of 75 and 25.  The total: K is binomial(16384, p),
 * sigma = sqrt(16384 p (1 - p)) = 53.1 = 1.47% of E[K], so the estimate lies within 4 sigma = 5.9%
 * (+ 0.2% for the other blocks) of the 64 MiB allocated. */
START_TEST(pprof_symbolized_top)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/prof");
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=16384", "MIMALLOC_PROF_SEED=31",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"shares", "12288", "4096", "4096", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  ck_assert_uint_eq(probe_value(&r, "allocated"), 16384);
  char exe[PATH_MAX];
  out_string(&r, "exe", exe, sizeof exe);

  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
  ck_assert_int_eq(files[0].kind, 'f');
  profile_t *p = profile_load(files[0].path);
  ck_assert_int_eq(p->period, 16384);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  double total = 64.0 * (1 << 20);
  ck_assert_double_le(fabs((double)sum[V_INUSE_SPACE] - total) / total, 0.061);

  /* The program and the shared library have their mappings with build IDs; each site's samples start
   * inside the right one, named by the profile (dladdr: both functions are exported). */
  const mapping_t *main_map = mapping_named(p, exe);
  ck_assert_ptr_nonnull(main_map);
  ck_assert_str_ne(pstr(p, main_map->build_id), "");
  const mapping_t *site = mapping_named(p, "/libpprof_site.so");
  ck_assert_ptr_nonnull(site);
  ck_assert_str_ne(pstr(p, site->build_id), "");
  for (size_t i = 0; i < p->n_sample; i++) {
    const location_t *leaf = sample_leaf(p, p->sample[i]);
    const char *name = location_name(p, leaf);
    if (strcmp(name, "alpha_site") == 0) ck_assert_uint_eq(leaf->mapping_id, main_map->id);
    if (strcmp(name, "pprof_site_beta") == 0) ck_assert_uint_eq(leaf->mapping_id, site->id);
  }
  ck_assert_int_gt(leaf_total(p, "alpha_site", V_INUSE_SPACE), 0);
  ck_assert_int_gt(leaf_total(p, "pprof_site_beta", V_INUSE_SPACE), 0);
  profile_free(p);

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {                        /* without go: skipped */
    probe_run_t top =
      go_pprof(go, (const char *const[]){"-top", "-sample_index=inuse_space", exe, files[0].path, NULL});
    probe_assert_exit0(&top, "go tool pprof -top");
    double alpha = top_flat_percent(top.out, "alpha_site"), beta = top_flat_percent(top.out, "pprof_site_beta");
    ck_assert_msg(alpha >= 0 && beta >= 0, "go tool pprof -top:\n%s\n%s", top.out, top.err);
    ck_assert_double_eq_tol(alpha, 75.0, 3.8);
    ck_assert_double_eq_tol(beta, 25.0, 3.8);
    probe_run_free(&top);
  }
  probe_run_free(&r);
}
END_TEST

/* The main program must be mapping[0] wherever the loader put it: with an unlimited stack, Linux lays
 * out memory the legacy way (shared libraries from a third of the address space up, a PIE at two
 * thirds), so the program is no longer the lowest mapping.  `go tool pprof PROGRAM FILE` gives PROGRAM
 * to mapping[0]. */
START_TEST(pprof_main_mapping_first)
{
  struct rlimit rl;
  ck_assert_int_eq(getrlimit(RLIMIT_STACK, &rl), 0);
  if (rl.rlim_max != RLIM_INFINITY) return;            /* cannot raise the limit: nothing to check */
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/prof");
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  const char *const args[] = {"shares", "16", "16", "4096", NULL};
  probe_opts_t opts = {.env = vars, .stack_limit = RLIM_INFINITY};
  probe_run_t r = probe_run(probe_getenv("MPROF_TEST_PPROF_PROBE"), args, &opts);
  probe_assert_exit0(&r, NULL);
  char exe[PATH_MAX];
  out_string(&r, "exe", exe, sizeof exe);
  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
  profile_t *p = profile_load(files[0].path);
  const mapping_t *main_map = mapping_named(p, exe);
  ck_assert_ptr_nonnull(main_map);
  ck_assert_msg(main_map == p->mapping[0], "mapping[0] is %s, the program (%#" PRIx64 ") is mapping id %" PRIu64,
                pstr(p, p->mapping[0]->filename), main_map->memory_start, main_map->id);
  profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   D32 triggers
--------------------------------------------------------------------------------------------------- */

/* MIMALLOC_PROF_FINAL=1: one file at exit, prof.<pid>.0.f.pb.gz, holding what was live.  256 x 4 KiB
 * from alpha_site at rate 4096: p = 1 - e^-1 = 0.632, K binomial(256, p), E = 161.8, sigma = 7.7 = 4.8%;
 * alpha_site's estimate lies within 4 sigma = 19.1% of 1 MiB. */
START_TEST(pprof_triggers_final)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/prof");
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_SEED=32",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"shares", "256", "0", "4096", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
  ck_assert_int_eq(files[0].kind, 'f');
  profile_t *p = profile_load(files[0].path);
  ck_assert_int_eq(p->period, 4096);
  double alpha = (double)leaf_total(p, "alpha_site", V_INUSE_SPACE), want = 256.0 * 4096;
  ck_assert_double_le(fabs(alpha - want) / want, 0.191);
  profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* The weight (estimated bytes) of one sampled s-byte block at rate R, rounded up: s / (1 - e^(-s/R)). */
static int64_t weight_bytes(double s, double rate) { return (int64_t)ceil(s / -expm1(-s / rate)) + 1; }

/* MIMALLOC_PROF_INTERVAL=8 MiB while 64 MiB of 4 KiB blocks are allocated and freed at rate 64 KiB, then
 * the probe's barrier (a signal dump, served after every request before it).  The files must be
 * i, i, ..., i, s with sequence numbers 0..n.
 * Count: a request goes out when the estimated allocated bytes A reach the threshold, which then moves
 * to A + N: the c-th request needs A >= c N, and each request overshoots its threshold by less than one
 * sample's weight w = 4096 / (1 - e^(-1/16)) = 67.6 KB, so c lies in [floor(A / (N + w)), floor(A / N)].
 * A is K w with K binomial(16384, 0.0606): E = 992.7, sigma = 30.5, 4 sigma: K in [870, 1115], A in
 * [58.8 MB, 75.4 MB], so c in [6, 8]; the probe's own start-up samples (a few, each under 70 KB) can add
 * one more: 6 <= c <= 9.  Each request is written when A >= c N, and its file is written after, so the
 * c-th file's alloc_space is at least c N (MIMALLOC_PROF_ACCUM=1: freed stacks are kept). */
START_TEST(pprof_triggers_interval)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/prof");
  const int64_t interval = 8 << 20;
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_SEED=33",
                        "MIMALLOC_PROF_INTERVAL=8m", "MIMALLOC_PROF_SIGNAL=USR2", "MIMALLOC_PROF_ACCUM=1",
                        prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"phases", "churn:67108864", "barrier", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  ck_assert_ptr_nonnull(strstr(r.out, "allocations ok\n"));

  dump_file_t files[MAX_DUMPS];
  size_t n = dumps_list(dir, r.pid, files);
  char kinds[MAX_DUMPS + 1];
  dumps_kinds(files, n, kinds);
  ck_assert_uint_ge(n, 7);
  ck_assert_uint_le(n, 10);
  ck_assert_uint_eq(strspn(kinds, "i"), n - 1);
  ck_assert_int_eq(kinds[n - 1], 's');
  int64_t last = 0;
  for (size_t i = 0; i < n; i++) {
    profile_t *p = profile_load(files[i].path);
    int64_t sum[N_VALUES];
    profile_sums(p, sum);
    if (files[i].kind == 'i') ck_assert_int_ge(sum[V_ALLOC_SPACE], (int64_t)(i + 1) * interval);
    ck_assert_int_ge(sum[V_ALLOC_SPACE], last);
    last = sum[V_ALLOC_SPACE];
    profile_free(p);
  }
  probe_run_free(&r);
}
END_TEST

/* The next threshold after a peak dump at in-use x (lib/dump.c, documented: a new peak must grow by at
 * least a tenth and by ten sample periods). */
static int64_t gdump_step(int64_t x, int64_t rate) { return x / 10 > 10 * rate ? x / 10 : 10 * rate; }

/* MIMALLOC_PROF_GDUMP=1 at rate 64 KiB: grow to 64 MiB of live 4 KiB blocks, barrier, free them all, grow
 * to 32 MiB (below the peak), barrier.  The files must be u, ..., u, s, s: no new peak in the second
 * growth.  Bounds without chance, from F = the in-use estimate at the first barrier (its s file):
 * the j-th peak dump fires at an estimate now_j > L_j, with L_1 = 10 R and L_(j+1) = L_j + step(L_j);
 * it fires as soon as the estimate passes the threshold, which each sample moves by at most w (the
 * weight of one 4 KiB sample), so now_j <= U_j with U_1 = 10 R + w, U_(j+1) = U_j + step(U_j) + w, and
 * dump j must happen once F > U_j - w.  Each u file is written after its request while the heap only
 * grows, so its inuse_space lies in (L_j, F]. */
START_TEST(pprof_triggers_gdump)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/prof");
  const int64_t rate = 65536, w = weight_bytes(4096, (double)rate);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_SEED=34",
                        "MIMALLOC_PROF_GDUMP=1", "MIMALLOC_PROF_SIGNAL=USR2", "MIMALLOC_PROF_ACCUM=1", prefix,
                        NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"phases", "grow:67108864", "barrier", "free",
                                                         "grow:33554432", "barrier", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");

  dump_file_t files[MAX_DUMPS];
  size_t n = dumps_list(dir, r.pid, files);
  char kinds[MAX_DUMPS + 1];
  dumps_kinds(files, n, kinds);
  ck_assert_uint_ge(n, 3);
  size_t peaks = n - 2;
  ck_assert_uint_eq(strspn(kinds, "u"), peaks);
  ck_assert_str_eq(kinds + peaks, "ss");

  profile_t *p = profile_load(files[peaks].path);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  const int64_t final_inuse = sum[V_INUSE_SPACE];
  profile_free(p);
  size_t c_min = 0, c_max = 0;
  for (int64_t lo = 10 * rate, hi = 10 * rate + w; lo < final_inuse; lo += gdump_step(lo, rate)) {
    c_max++;
    if (final_inuse > hi - w) c_min++;
    hi += gdump_step(hi, rate) + w;
  }
  ck_assert_uint_ge(peaks, c_min);
  ck_assert_uint_le(peaks, c_max);
  ck_assert_uint_ge(c_min, 20);                  /* F is near 64 MiB: the bound is not vacuous */

  int64_t lower = 10 * rate;
  for (size_t j = 0; j < peaks; j++) {
    p = profile_load(files[j].path);
    profile_sums(p, sum);
    ck_assert_int_gt(sum[V_INUSE_SPACE], lower);
    ck_assert_int_le(sum[V_INUSE_SPACE], final_inuse);
    lower += gdump_step(lower, rate);
    profile_free(p);
  }
  p = profile_load(files[peaks + 1].path);
  profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* Waits for `name` to appear, complete, in the watched directory (automatic dumps are renamed into
 * place), while the child's stdout stays
 * open (its end means the child died first: fail rather than wait for the test timeout). */
static void wait_closed(int watch, const probe_child_t *c, const char *name)
{
  _Alignas(struct inotify_event) char buf[4096];
  for (;;) {
    struct pollfd pf[2] = {{.fd = watch, .events = POLLIN}, {.fd = c->out, .events = POLLIN}};
    int rc = poll(pf, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    ck_assert_int_gt(rc, 0);
    ck_assert_msg(pf[1].revents == 0, "the probe ended (or wrote) before %s appeared", name);
    ssize_t r = read(watch, buf, sizeof buf);
    ck_assert_int_gt(r, 0);
    for (char *at = buf; at < buf + r;) {
      const struct inotify_event *ev = (const struct inotify_event *)at;
      if (ev->len > 0 && strcmp(ev->name, name) == 0) return;
      at += sizeof *ev + ev->len;
    }
  }
}

/* Reads the child's stdout until a line "ready". */
static void wait_ready(const probe_child_t *c)
{
  char buf[64];
  size_t n = 0;
  while (n < 6 || memcmp(buf + n - 6, "ready\n", 6) != 0) {
    ssize_t r = read(c->out, buf + n, 1);
    if (r < 0 && errno == EINTR) continue;
    ck_assert_msg(r == 1, "the probe ended before it was ready");
    n++;
    ck_assert_uint_lt(n, sizeof buf);
  }
}

/* MIMALLOC_PROF_SIGNAL=USR2 while two threads allocate and free without pause: five signals, each sent
 * once the previous one's file is closed (inotify, watched before the probe starts), since a signal sent
 * while another is still pending would merge with it.  Every signal yields its own file, s with
 * sequence numbers 0..4; then stdin's end stops the threads and the final dump is number 5.  No sleeps:
 * each wait ends on an event the probe causes. */
START_TEST(pprof_triggers_signal)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/prof");
  int watch = inotify_init1(IN_CLOEXEC);
  ck_assert_int_ge(watch, 0);
  ck_assert_int_ge(inotify_add_watch(watch, dir, IN_MOVED_TO), 0);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_SIGNAL=USR2",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_child_t c = start_probe(vars, (const char *const[]){"load", "2", NULL}, true);
  wait_ready(&c);
  enum { SIGNALS = 5 };
  for (int k = 0; k < SIGNALS; k++) {
    char name[128];
    snprintf(name, sizeof name, "prof.%d.%d.s.pb.gz", (int)c.pid, k);
    ck_assert_int_eq(kill(c.pid, SIGUSR2), 0);
    wait_closed(watch, &c, name);
  }
  probe_run_t r = probe_finish(&c);
  close(watch);
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  ck_assert_uint_gt(probe_value(&r, "rounds"), 0);

  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), SIGNALS + 1);
  char kinds[MAX_DUMPS + 1];
  dumps_kinds(files, SIGNALS + 1, kinds);
  ck_assert_str_eq(kinds, "sssssf");
  for (size_t i = 0; i < SIGNALS + 1; i++) {
    profile_t *p = profile_load(files[i].path);
    ck_assert_int_eq(p->period, 65536);
    profile_free(p);
  }
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   D33 leak_report
--------------------------------------------------------------------------------------------------- */

/* MIMALLOC_PROF_LEAK=1: at exit, stderr gets the report header and the top in-use sites, each frame
 * named by dladdr (the probe is linked with -export-dynamic).  The probe leaks 1000 x 1000 B from
 * leaky_function and frees 4000 more at once from churn_site.  At rate 4096 (seed fixed): p = 1 -
 * e^(-1000/4096) = 0.2166, K binomial(1000, p), E = 216.6, sigma = 13.0 = 6.0%: the top site's bytes
 * lie within 4 sigma = 24.1% of 1000000; its object count likewise of 1000. */
START_TEST(pprof_leak_report)
{
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_SEED=35",
                        "MIMALLOC_PROF_LEAK=1", NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"leak", "1000", "1000", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_uint_eq(probe_value(&r, "leaked"), 1000);
  static const char head[] = "mimalloc-prof: leak report: about ";
  ck_assert_msg(strncmp(r.err, head, sizeof head - 1) == 0, "stderr:\n%s", r.err);
  ck_assert_ptr_null(strstr(r.err + 1, head));                       /* one report */
  unsigned long long total = strtoull(r.err + sizeof head - 1, NULL, 10);

  const char *site = strchr(r.err, '\n');
  ck_assert_ptr_nonnull(site);
  unsigned long long bytes = 0, objects = 0;
  int used = 0;
  ck_assert_msg(sscanf(site + 1, "  %llu bytes in %llu objects allocated at:%n", &bytes, &objects, &used) == 2 &&
                used > 0, "stderr:\n%s", r.err);
  const char *frame0 = strchr(site + 1, '\n');
  ck_assert_ptr_nonnull(frame0);
  ck_assert_msg(strncmp(frame0 + 1, "    #0 0x", 9) == 0, "stderr:\n%s", r.err);
  const char *frame0_end = strchr(frame0 + 1, '\n');
  ck_assert_ptr_nonnull(frame0_end);
  ck_assert_msg(memmem(frame0 + 1, (size_t)(frame0_end - frame0 - 1), "(leaky_function+0x", 18) != NULL,
                "the top site's first frame is not leaky_function; stderr:\n%s", r.err);
  ck_assert_ptr_null(strstr(r.err, "churn_site"));
  ck_assert_double_le(fabs((double)bytes - 1e6) / 1e6, 0.241);
  ck_assert_double_le(fabs((double)objects - 1e3) / 1e3, 0.241);
  ck_assert_uint_ge(total, bytes);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Dump errors
--------------------------------------------------------------------------------------------------- */

static void *err_blocks[100];

static bool blocks_intact(void)
{
  for (size_t i = 0; i < 100; i++) {
    const unsigned char *b = err_blocks[i];
    if (b == NULL || b[0] != 0x3c || b[999] != 0x3c) return false;
  }
  return true;
}

/* A dump that cannot be written fails with the errno of open(2)/write(2), leaves no file and changes
 * nothing else: the stats, the program's blocks and further allocations are as before.  EACCES needs a
 * directory we may not write: a 0500 one, entered as nobody when running as root (the test process is
 * Check's own fork, so changing its effective uid touches nothing else). */
START_TEST(pprof_dump_errors)
{
  const char *dir = tmp_dir_make();
  char missing[PATH_MAX], locked_dir[PATH_MAX], locked[PATH_MAX];
  snprintf(missing, sizeof missing, "%s/missing/x.pb.gz", dir);
  snprintf(locked_dir, sizeof locked_dir, "%s/locked", dir);
  snprintf(locked, sizeof locked, "%s/x.pb.gz", locked_dir);
  ck_assert_int_eq(mkdir(locked_dir, 0500), 0);
  int ro = open("/dev/null", O_RDONLY | O_CLOEXEC), full = open("/dev/full", O_WRONLY | O_CLOEXEC);
  int pipe_fds[2];
  ck_assert_int_eq(pipe2(pipe_fds, O_CLOEXEC), 0);
  close(pipe_fds[0]);
  signal(SIGPIPE, SIG_IGN);
  bool root = geteuid() == 0;

  bool started = mi_prof_start_seeded(4096, SEED);
  alloc_into(err_blocks, 100, 1000);
  mi_prof_stats_t before, after;
  mi_prof_stats(&before, sizeof before);
  struct { bool ok; int err; } res[6];
  errno = 0, res[0].ok = mi_prof_dump(missing), res[0].err = errno;
  bool locked_out = !root || seteuid(65534) == 0;     /* false: root that cannot drop privileges */
  if (locked_out) errno = 0, res[1].ok = mi_prof_dump(locked), res[1].err = errno;
  bool back = !root || !locked_out || seteuid(0) == 0;
  errno = 0, res[2].ok = mi_prof_dump_fd(-1), res[2].err = errno;
  errno = 0, res[3].ok = mi_prof_dump_fd(ro), res[3].err = errno;
  errno = 0, res[4].ok = mi_prof_dump_fd(full), res[4].err = errno;
  errno = 0, res[5].ok = mi_prof_dump_fd(pipe_fds[1]), res[5].err = errno;
  mi_prof_stats(&after, sizeof after);
  bool intact = blocks_intact();

  ck_assert(started);
  ck_assert(back);
  static const int want[6] = {ENOENT, EACCES, EBADF, EBADF, ENOSPC, EPIPE};
  for (size_t i = 0; i < 6; i++) {
    if ((i == 1 && !locked_out) || (i == 4 && full < 0)) continue;   /* no way to be refused; no /dev/full */
    ck_assert_msg(!res[i].ok && res[i].err == want[i], "case %zu: ok %d errno %d, want %d", i, res[i].ok,
                  res[i].err, want[i]);
  }
  ck_assert_int_eq(access(missing, F_OK), -1);
  ck_assert_int_eq(access(locked, F_OK), -1);
  ck_assert_uint_eq(after.samples, before.samples);
  ck_assert_uint_eq(after.live_samples, before.live_samples);
  ck_assert_uint_eq(after.inuse_bytes, before.inuse_bytes);
  ck_assert(intact);
  void *more[100];
  alloc_into(more, 100, 1000);
  for (size_t i = 0; i < 100; i++) ck_assert_ptr_nonnull(more[i]);
  free_all(more, 100);
  free_all(err_blocks, 100);
  ck_assert(mi_prof_stop());
  close(ro);
  close(full);
  close(pipe_fds[1]);
}
END_TEST

/* A failed dump removes only a file it made: here the path is a symbolic link to /dev/full, which
 * existed before, so after the write fails (ENOSPC) the link must still be there.  (Removing the path
 * after a failure would, for root, delete /dev/full itself, or /dev/stdout, when named directly.) */
START_TEST(pprof_dump_error_keeps_existing_path)
{
  if (access("/dev/full", W_OK) != 0) return;          /* no /dev/full: nothing to check */
  char link[PATH_MAX];
  snprintf(link, sizeof link, "%s/full", tmp_dir_make());
  ck_assert_int_eq(symlink("/dev/full", link), 0);
  errno = 0;
  bool ok = mi_prof_dump(link);
  int err = errno;
  struct stat st;
  bool kept = lstat(link, &st) == 0 && S_ISLNK(st.st_mode);
  ck_assert(!ok);
  ck_assert_int_eq(err, ENOSPC);
  ck_assert_msg(kept, "mi_prof_dump removed %s, a symbolic link to /dev/full it did not create", link);
}
END_TEST

/* Automatic dumps to a prefix in a missing directory: every interval dump (16 MiB allocated, interval
 * 1 MiB) and the final one fail; the library says so in exactly one warning line and the program runs
 * to its end and exits 0. */
START_TEST(pprof_dump_errors_automatic)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX], want[PATH_MAX + 64];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/missing/prof");
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_INTERVAL=1m",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"phases", "churn:16777216", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_ptr_nonnull(strstr(r.out, "allocations ok\n"));
  snprintf(want, sizeof want, "mimalloc-prof: warning: cannot write heap profile %s/missing/prof.%d.", dir,
           (int)r.pid);
  ck_assert_msg(probe_count_lines(r.err) == 1 && strncmp(r.err, want, strlen(want)) == 0 &&
                strstr(r.err, "ENOENT"), "stderr:\n%s", r.err);
  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 0);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C22 and C24, the dump parts
--------------------------------------------------------------------------------------------------- */

static void *r1_blocks[500];

/* Rate 1: P(an interval exceeds 64 bytes) = e^-64, so every 64-byte allocation is sampled, and
 * p = 1 - e^-64 rounds to 1.0 in double, so each stands for exactly one object of 64 bytes.  With
 * nothing else allocated between start and dump, the profile is exactly one stack holding 500 objects
 * and 32000 bytes.  After freeing them: nothing in use; the stack stays with its allocated counts when the
 * profile says accum=1 (MIMALLOC_PROF_ACCUM), and is gone otherwise. */
START_TEST(pprof_rate_one_decodes)
{
  const char *dir = tmp_dir_make();
  char live_path[PATH_MAX], freed_path[PATH_MAX];
  snprintf(live_path, sizeof live_path, "%s/live.pb.gz", dir);
  snprintf(freed_path, sizeof freed_path, "%s/freed.pb.gz", dir);

  bool started = mi_prof_start_seeded(1, SEED);
  alloc_into(r1_blocks, 500, 64);
  mi_prof_stats_t live, freed;
  mi_prof_stats(&live, sizeof live);
  bool live_ok = mi_prof_dump(live_path);
  free_all(r1_blocks, 500);
  mi_prof_stats(&freed, sizeof freed);
  bool freed_ok = mi_prof_dump(freed_path);
  bool stopped = mi_prof_stop();

  ck_assert(started);
  ck_assert(live_ok);
  ck_assert(freed_ok);
  ck_assert(stopped);
  ck_assert_uint_eq(live.live_samples, 500);
  ck_assert_uint_eq(live.inuse_objects, 500);
  ck_assert_uint_eq(live.inuse_bytes, 32000);
  ck_assert_uint_eq(freed.live_samples, 0);
  ck_assert_uint_eq(freed.inuse_bytes, 0);

  profile_t *p = profile_load(live_path);
  ck_assert_int_eq(p->period, 1);
  ck_assert_uint_eq(p->n_sample, 1);
  const int64_t *v = p->sample[0]->value;
  ck_assert_int_eq(v[V_ALLOC_OBJECTS], 500);
  ck_assert_int_eq(v[V_ALLOC_SPACE], 32000);
  ck_assert_int_eq(v[V_INUSE_OBJECTS], 500);
  ck_assert_int_eq(v[V_INUSE_SPACE], 32000);
  profile_free(p);

  p = profile_load(freed_path);
  bool accum = comment_number(p, "samples=", "accum") != 0;
  ck_assert_uint_eq(p->n_sample, accum ? 1 : 0);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  ck_assert_int_eq(sum[V_INUSE_OBJECTS], 0);
  ck_assert_int_eq(sum[V_INUSE_SPACE], 0);
  ck_assert_int_eq(sum[V_ALLOC_OBJECTS], accum ? 500 : 0);
  ck_assert_int_eq(sum[V_ALLOC_SPACE], accum ? 32000 : 0);
  profile_free(p);
}
END_TEST

/* MIMALLOC_PROF_MAX_BYTES=8m, rate 1, 100000 live 64-byte blocks: their records want about 16 MiB, so
 * samples are dropped.  A dump while running needs scratch memory from the same budget, which may be
 * gone: it either succeeds and its comment reports the drops, or fails cleanly with ENOMEM and leaves no
 * file (which one depends on how the record table's shards happened to grow).  After mi_prof_stop the
 * records are released, the dump must succeed, and its comment still reports the session's drops. */
START_TEST(pprof_budget_dropped_in_dump)
{
  const char *dir = tmp_dir_make();
  char running[PATH_MAX], stopped[PATH_MAX];
  snprintf(running, sizeof running, "%s/running.pb.gz", dir);
  snprintf(stopped, sizeof stopped, "%s/stopped.pb.gz", dir);
  probe_run_t r = run_probe((const char *const[]){"MIMALLOC_PROF_MAX_BYTES=8m", NULL},
                            (const char *const[]){"budget", "100000", "64", running, stopped, NULL});
  probe_assert_exit0(&r, NULL);
  uint64_t dropped = probe_value(&r, "dropped_memory"), samples = probe_value(&r, "samples");
  ck_assert_uint_eq(probe_value(&r, "bad_blocks"), 0);
  ck_assert_uint_gt(dropped, 0);
  ck_assert_uint_eq(samples, 100000);                        /* dropped ones included, weight kept */
  ck_assert_uint_le(dropped, samples);
  ck_assert_uint_le(probe_value(&r, "profiler_bytes"), 8u << 20);
  ck_assert_msg(probe_count_lines(r.err) == 1 && strstr(r.err, "dropping samples") != NULL, "stderr:\n%s", r.err);

  if (probe_value(&r, "dump_running") == 1) {
    profile_t *p = profile_load(running);
    ck_assert_uint_eq(comment_number(p, "dropped samples:", "memory"), dropped);
    ck_assert_uint_ge(comment_number(p, "dropped samples:", "total"), dropped);
    int64_t sum[N_VALUES];
    profile_sums(p, sum);
    /* At rate 1 a 64-byte block stands for exactly one object: every sample is in alloc_objects (those
     * without a record under "[mimalloc-prof: dropped (memory)]"), the recorded ones in inuse_objects. */
    ck_assert_int_eq(sum[V_ALLOC_OBJECTS], (int64_t)samples);
    ck_assert_int_le(sum[V_INUSE_OBJECTS], (int64_t)samples);
    profile_free(p);
  } else {
    ck_assert_uint_eq(probe_value(&r, "dump_running_errno"), ENOMEM);
    ck_assert_int_eq(access(running, F_OK), -1);
  }
  ck_assert_uint_eq(probe_value(&r, "dump_stopped"), 1);
  profile_t *p = profile_load(stopped);
  ck_assert_uint_eq(p->n_sample, 0);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "memory"), dropped);
  profile_free(p);
  probe_run_free(&r);
}
END_TEST

Suite *pprof_suite(void)
{
  Suite *s = suite_create("pprof");
  TCase *tc = tcase_create("pprof");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_add_test(tc, pprof_proto_roundtrip);
  tcase_add_test(tc, pprof_empty_profile);
  tcase_add_test(tc, pprof_symbolized_top);
  tcase_add_test(tc, pprof_main_mapping_first);
  tcase_add_test(tc, pprof_triggers_final);
  tcase_add_test(tc, pprof_triggers_interval);
  tcase_add_test(tc, pprof_triggers_gdump);
  tcase_add_test(tc, pprof_triggers_signal);
  tcase_add_test(tc, pprof_leak_report);
  tcase_add_test(tc, pprof_dump_errors);
  tcase_add_test(tc, pprof_dump_error_keeps_existing_path);
  tcase_add_test(tc, pprof_dump_errors_automatic);
  tcase_add_test(tc, pprof_rate_one_decodes);
  tcase_add_test(tc, pprof_budget_dropped_in_dump);
  suite_add_tcase(s, tc);
  return s;
}

#endif
