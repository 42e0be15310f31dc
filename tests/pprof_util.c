/* pprof_util.c - what the heap profile suites share (tests/pprof_util.h): temporary directories, decoding
 * profiles the way pprof reads them and checking them against profile.proto's rules, the probe and `go tool
 * pprof` as subprocesses, automatic dump files, and waiting for them without sleeping.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pprof_util.h"

#if MPROF_PPROF

#include <zlib.h>

uint64_t realtime_ns(void)
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

void run_dir_setup(void)
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

void run_dir_teardown(void)
{
  if (run_dir[0] != '\0') nftw(run_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  run_dir[0] = '\0';
}

const char *tmp_dir_make(void)
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

const char *test_pstr(const profile_t *p, int64_t i)
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

const mapping_t *mapping_by_id(const profile_t *p, uint64_t id)
{
  for (size_t i = 0; i < p->n_mapping; i++)
    if (p->mapping[i]->id == id) return p->mapping[i];
  return NULL;
}

const location_t *location_by_id(const profile_t *p, uint64_t id)
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
    {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"},
    {"inuse_space", "bytes"},   {"peak_objects", "count"}, {"peak_space", "bytes"},
    {"freed_objects", "count"}, {"freed_space", "bytes"}};
  ck_assert_uint_ge(p->n_string_table, 1);
  ck_assert_str_eq(p->string_table[0], "");
  ck_assert_msg(p->n_sample_type == V_FREED_OBJECTS || p->n_sample_type == N_VALUES, "%zu sample types",
                p->n_sample_type);
  for (size_t i = 0; i < p->n_sample_type; i++) {
    ck_assert_str_eq(test_pstr(p, p->sample_type[i]->type), types[i][0]);
    ck_assert_str_eq(test_pstr(p, p->sample_type[i]->unit), types[i][1]);
  }
  ck_assert_ptr_nonnull(p->period_type);
  ck_assert_str_eq(test_pstr(p, p->period_type->type), "space");
  ck_assert_str_eq(test_pstr(p, p->period_type->unit), "bytes");
  ck_assert_int_gt(p->period, 0);
  ck_assert_str_eq(test_pstr(p, p->default_sample_type), "inuse_space");
  ck_assert_ptr_nonnull(strstr(test_pstr(p, p->drop_frames), "malloc"));
  ck_assert_int_ge(p->time_nanos, 0);
  ck_assert_int_ge(p->duration_nanos, 0);
  for (size_t i = 0; i < p->n_comment; i++) test_pstr(p, p->comment[i]);
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
    ck_assert_str_ne(test_pstr(p, m->filename), "");
    ck_assert_uint_eq((m->memory_start - m->file_offset) % 4096, 0);
    const char *build_id = test_pstr(p, m->build_id);
    ck_assert_msg(strlen(build_id) % 2 == 0 && is_hex(build_id), "build id \"%s\"", build_id);
    for (size_t j = 0; j < i; j++) {
      const mapping_t *o = p->mapping[j];
      ck_assert_msg(m->memory_limit <= o->memory_start || o->memory_limit <= m->memory_start,
                    "mappings %" PRIu64 " and %" PRIu64 " overlap", m->id, o->id);
    }
  }
}

/* The mapping whose range holds addr, or NULL. */
static const mapping_t *mapping_holding(const profile_t *p, uint64_t addr)
{
  for (size_t i = 0; i < p->n_mapping; i++)
    if (addr >= p->mapping[i]->memory_start && addr < p->mapping[i]->memory_limit) return p->mapping[i];
  return NULL;
}

/* Functions, locations and samples: every reference resolves; a location lies inside its mapping, or
 * has mapping id 0 when no mapping holds its address, or is a dropped sample's location (no mapping, no
 * address, one line naming the reason); a sample has a value per sample type, none negative (in-use may be
 * above allocated: a block resized in place takes its new size, and mi_prof_reset zeroes what was
 * allocated, not what is in use); a freed sample has values in the freed types only. */
static void assert_references(const profile_t *p)
{
  uint64_t *fn = ids_checked(p->n_function, function_id_at, p, "function");
  for (size_t i = 0; i < p->n_function; i++) ck_assert_str_ne(test_pstr(p, p->function[i]->name), "");
  uint64_t *loc = ids_checked(p->n_location, location_id_at, p, "location");
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    for (size_t k = 0; k < l->n_line; k++) ck_assert(id_known(fn, p->n_function, l->line[k]->function_id));
    if (l->mapping_id == 0 && l->address == 0) {
      ck_assert_msg(l->n_line == 1 && strncmp(location_name(p, l), DROPPED_PREFIX, strlen(DROPPED_PREFIX)) == 0,
                    "location %" PRIu64 " has neither an address nor a dropped sample's name", l->id);
      continue;
    }
    if (l->mapping_id == 0) {
      ck_assert_msg(mapping_holding(p, l->address) == NULL, "location %#" PRIx64 " has no mapping id", l->address);
      continue;
    }
    const mapping_t *m = mapping_by_id(p, l->mapping_id);
    ck_assert_msg(m != NULL, "location %" PRIu64 " has mapping id %" PRIu64, l->id, l->mapping_id);
    ck_assert_msg(l->address >= m->memory_start && l->address < m->memory_limit,
                  "location %#" PRIx64 " outside its mapping", l->address);
  }
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    ck_assert_uint_eq(s->n_value, p->n_sample_type);
    for (size_t v = 0; v < s->n_value; v++) ck_assert_int_ge(s->value[v], 0);
    bool freed = s->n_value == N_VALUES && (s->value[V_FREED_OBJECTS] != 0 || s->value[V_FREED_SPACE] != 0);
    for (size_t v = 0; freed && v < V_FREED_OBJECTS; v++) ck_assert_int_eq(s->value[v], 0);
    ck_assert_uint_ge(s->n_location_id, 1);
    for (size_t k = 0; k < s->n_location_id; k++) ck_assert(id_known(loc, p->n_location, s->location_id[k]));
  }
  free(fn);
  free(loc);
}

void profile_assert_wellformed(const profile_t *p)
{
  assert_header(p);
  assert_mappings(p);
  assert_references(p);
}

profile_t *profile_decode(const unsigned char *gz, size_t len)
{
  size_t raw_len;
  unsigned char *raw = gunzip(gz, len, &raw_len);
  if (raw == NULL) return NULL;
  profile_t *p = perftools__profiles__profile__unpack(NULL, raw_len, raw);
  free(raw);
  return p;
}

/* Reads, decodes and checks the profile at path. */
profile_t *profile_load(const char *path)
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

void test_profile_free(profile_t *p) { perftools__profiles__profile__free_unpacked(p, NULL); }

void profile_sums(const profile_t *p, int64_t sum[N_VALUES])
{
  memset(sum, 0, N_VALUES * sizeof *sum);
  for (size_t i = 0; i < p->n_sample; i++)
    for (size_t v = 0; v < p->sample[i]->n_value && v < N_VALUES; v++) sum[v] += p->sample[i]->value[v];
}

static const Perftools__Profiles__Label *label_of(const profile_t *p, const sample_t *s, const char *key)
{
  for (size_t i = 0; i < s->n_label; i++)
    if (strcmp(test_pstr(p, s->label[i]->key), key) == 0) return s->label[i];
  return NULL;
}

const char *label_str(const profile_t *p, const sample_t *s, const char *key)
{
  const Perftools__Profiles__Label *l = label_of(p, s, key);
  return l != NULL && l->str != 0 ? test_pstr(p, l->str) : NULL;
}

bool label_num(const profile_t *p, const sample_t *s, const char *key, int64_t *out)
{
  const Perftools__Profiles__Label *l = label_of(p, s, key);
  if (l == NULL || l->str != 0) return false;
  *out = l->num;
  return true;
}

/* The number after " key=" in the comment that starts with `head`; false when there is none. */
bool comment_value(const profile_t *p, const char *head, const char *key, uint64_t *out)
{
  char pattern[64];
  snprintf(pattern, sizeof pattern, " %s=", key);
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = test_pstr(p, p->comment[i]);
    if (strncmp(c, head, strlen(head)) != 0) continue;
    const char *at = strstr(c, pattern);
    if (at == NULL) return false;
    *out = strtoull(at + strlen(pattern), NULL, 10);
    return true;
  }
  return false;
}

uint64_t comment_number(const profile_t *p, const char *head, const char *key)
{
  uint64_t v = 0;
  ck_assert_msg(comment_value(p, head, key, &v), "no comment \"%s... %s=N\"", head, key);
  return v;
}

/* The function name of a location's first line ("" when the profile names none). */
const char *location_name(const profile_t *p, const location_t *l)
{
  if (l->n_line == 0) return "";
  for (size_t i = 0; i < p->n_function; i++)
    if (p->function[i]->id == l->line[0]->function_id) return test_pstr(p, p->function[i]->name);
  return "";
}

/* The sample's innermost location (the program's frame that called the allocator). */
const location_t *sample_leaf(const profile_t *p, const sample_t *s)
{
  const location_t *l = location_by_id(p, s->location_id[0]);
  ck_assert_ptr_nonnull(l);
  return l;
}

/* Sum of value v over the samples whose innermost frame the profile names `fn`. */
int64_t leaf_total(const profile_t *p, const char *fn, int v)
{
  int64_t sum = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    if (strcmp(location_name(p, sample_leaf(p, p->sample[i])), fn) == 0) sum += p->sample[i]->value[v];
  return sum;
}

bool ends_with(const char *s, const char *tail)
{
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

const mapping_t *mapping_named(const profile_t *p, const char *tail)
{
  for (size_t i = 0; i < p->n_mapping; i++)
    if (ends_with(test_pstr(p, p->mapping[i]->filename), tail)) return p->mapping[i];
  return NULL;
}

/* ---------------------------------------------------------------------------------------------------
   Subprocesses: the probe and go
--------------------------------------------------------------------------------------------------- */

/* Starts tests/pprof_probe with `args` after its name and `vars` in its environment; `with_stdin`: a pipe
 * to its stdin (the load mode runs until stdin's end). */
probe_child_t start_probe(const char *const *vars, const char *const *args, bool with_stdin)
{
  probe_opts_t opts = {.env = vars, .with_stdin = with_stdin};
  return probe_start(probe_getenv("MPROF_TEST_PPROF_PROBE"), args, &opts);
}

probe_run_t run_probe(const char *const *vars, const char *const *args)
{
  probe_child_t c = start_probe(vars, args, false);
  return probe_finish(&c);
}

probe_run_t run_peak_probe(const char *mode, const char *rate, const char *seed, const char *const *vars,
                           profile_t **p, char *path)
{
  snprintf(path, PATH_MAX, "%s/%s.pb.gz", tmp_dir_make(), mode);
  probe_opts_t opts = {.env = vars, .watchdog_s = 120};
  const char *const args[] = {mode, path, rate, seed, NULL};
  probe_run_t r = probe_run(probe_getenv("MPROF_TEST_PEAK_PROBE"), args, &opts);
  probe_assert_exit0(&r, mode);
  ck_assert_str_eq(r.err, "");
  *p = profile_load(path);
  return r;
}

/* The value of the "key value" line of stdout, as a string into buf. */
void out_string(const probe_run_t *r, const char *key, char *buf, size_t len)
{
  size_t vlen;
  const char *value = probe_text(r, key, &vlen);
  ck_assert_uint_lt(vlen, len);
  memcpy(buf, value, vlen);
  buf[vlen] = '\0';
}

/* The path of an executable `go` on PATH; false when there is none. */
bool go_find(char *out, size_t len)
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
probe_run_t go_pprof(const char *go, const char *const *args)
{
  const char *argv[16] = {"tool", "pprof"};
  for (size_t i = 0; args[i] != NULL; i++) {
    ck_assert_uint_lt(i + 3, sizeof argv / sizeof argv[0]);
    argv[i + 2] = args[i];
  }
  probe_opts_t opts = {.env = (const char *const[]){"TZ=UTC", NULL}};   /* times printed in UTC */
  return probe_run(go, argv, &opts);
}

/* flat% of `fn` in `go tool pprof -top` output (rows: flat flat% sum% cum cum% name); -1 if absent. */
double top_flat_percent(const char *top, const char *fn)
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

static int cmp_seq(const void *a, const void *b)
{
  const dump_file_t *x = a, *y = b;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every file in dir, sorted by sequence number.  Each must be named prof.<pid>.<seq>.<kind>.pb.gz with
 * this pid and a documented kind, the sequence numbers must run 0, 1, ... n-1, and by name (as ls lists
 * them) the files must come in that order too. */
size_t dumps_list(const char *dir, pid_t pid, dump_file_t *out)
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
                  strchr("mfiusp", kind) != NULL, "unexpected file %s (pid %d)", e->d_name, (int)pid);
    ck_assert_uint_lt(n, MAX_DUMPS);
    out[n].seq = seq;
    out[n].kind = kind;
    snprintf(out[n].path, sizeof out[n].path, "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  qsort(out, n, sizeof *out, cmp_seq);
  for (size_t i = 0; i < n; i++) ck_assert_uint_eq(out[i].seq, i);
  for (size_t i = 1; i < n; i++)
    ck_assert_msg(strcmp(out[i - 1].path, out[i].path) < 0, "%s sorts after %s", out[i - 1].path, out[i].path);
  return n;
}

/* The kinds of the files in sequence order, as a string ("iiis"). */
void dumps_kinds(const dump_file_t *f, size_t n, char *kinds)
{
  for (size_t i = 0; i < n; i++) kinds[i] = f[i].kind;
  kinds[n] = '\0';
}

void set_var(char *buf, size_t len, const char *name, const char *value)
{
  ck_assert_uint_lt((size_t)snprintf(buf, len, "%s=%s", name, value), len);
}

void prefix_var(char *buf, size_t len, const char *dir)
{
  ck_assert_uint_lt((size_t)snprintf(buf, len, "MIMALLOC_PROF_PREFIX=%s/prof", dir), len);
}

/* Waits for `name` to appear, complete, in the watched directory (automatic dumps are renamed into
 * place), while the child's stdout stays open (its end means the child died first: fail rather than wait
 * for the test timeout). */
void wait_closed(int watch, const probe_child_t *c, const char *name)
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
void wait_ready(const probe_child_t *c)
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

/* ---------------------------------------------------------------------------------------------------
   In-process allocation sites
--------------------------------------------------------------------------------------------------- */

/* One allocation site: every block it allocates has the same stack up to its caller. */
__attribute__((noinline)) void alloc_into(void **out, size_t n, size_t size)
{
  for (size_t i = 0; i < n; i++) {
    out[i] = malloc(size);
    if (out[i] != NULL) memset(out[i], 0x3c, size);
  }
}

void free_all(void **blocks, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
}

#endif
