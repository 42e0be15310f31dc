/* profile.c - reading and writing pprof profiles (profile.proto: protobuf-c; gzip: zlib, as the library
 * writes them), and looking their parts up by id.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------------------------------------------------
   Reading, within limits: a profile may come from anyone (a colleague, a server), so nothing in it is
   trusted to be small.  Each limit is checked where the cost would begin: the decompressed size while
   inflating (a gzip bomb stops there), protobuf-c's memory while it unpacks (it allocates in proportion
   to the number of parts, which can be 40 times the bytes that encode them: an empty message is 2
   bytes), and the counts before any command walks them.
--------------------------------------------------------------------------------------------------- */

#define READ_PIECE     ((size_t)1 << 20)     /* inflated between two checks of the limits */
#define BOMB_FLOOR     ((size_t)16 << 20)    /* beyond this many bytes inflated ... */
#define BOMB_RATIO     64                    /* ... at most this many times the compressed bytes read */
#define DECODE_RATIO   24                    /* protobuf-c may use this many bytes per byte of profile, */
#define DECODE_FLOOR   ((size_t)4 << 20)     /* plus this: measured 5.5 on a python3 profile, 7.4 on the
                                                symbolized one of bench/symbolize.sh, 11.4 on 100,000
                                                samples of 2 frames (tests/fuzz/hostile wide) */
#define MAX_PARTS      ((size_t)1 << 26)     /* samples, locations, functions, strings */
#define MAX_MAPPINGS   ((size_t)1 << 16)
#define MAX_TYPES      ((size_t)1 << 10)     /* sample types, and values per sample */
#define MAX_LABELS     ((size_t)1 << 10)     /* per sample */

/* "1 GiB", "16 MiB", "1000 bytes": a limit, exactly. */
static const char *size_text(size_t n, char *buf, size_t len)
{
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (u + 1 < sizeof units / sizeof units[0] && n != 0 && n % 1024 == 0) n /= 1024, u++;
  snprintf(buf, len, "%zu %s", n, units[u]);
  return buf;
}

size_t profile_read_limit(bool *set, char *err, size_t err_len)
{
  const char *env = getenv("MIMALLOC_PROF_READ_LIMIT");
  *set = env != NULL && env[0] != '\0';
  if (!*set) return PROFILE_READ_LIMIT;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(env, &end, 10);
  int shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  }
  unsigned long long max = (unsigned long long)(SIZE_MAX / 2) >> shift;   /* 64 bits: shift 40 is fine */
  if (env[0] < '0' || env[0] > '9' || *end != '\0' || errno != 0 || v == 0 || v > max) {
    snprintf(err, err_len, "MIMALLOC_PROF_READ_LIMIT='%.64s': expected a size in bytes from 1 up, with k, "
             "m, g or t for KiB, MiB, GiB or TiB", env);
    return 0;
  }
  return (size_t)(v << shift);
}

/* Reads the whole file, inflated (gzread passes data that is not gzip-compressed through unchanged), or
 * NULL with a reason in err. */
static unsigned char *slurp(const char *path, size_t *len, char *err, size_t err_len)
{
  bool limit_set;
  size_t limit = profile_read_limit(&limit_set, err, err_len);
  if (limit == 0) return NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(err, err_len, "cannot open %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  if (S_ISDIR(st.st_mode)) {
    snprintf(err, err_len, "%s is a directory, not a profile", path);
    close(fd);
    return NULL;
  }
  gzFile f = gzdopen(fd, "rb");
  if (f == NULL) {
    snprintf(err, err_len, "cannot read %s: %s", path, strerror(ENOMEM));
    close(fd);
    return NULL;
  }
  size_t cap = 0, n = 0;
  unsigned char *buf = NULL;
  int r = 0;
  char size[32];
  bool failed = false;
  for (;;) {
    if (n == cap) {
      size_t bigger_cap = cap ? cap * 2 : (size_t)64 << 10;
      if (bigger_cap > limit + 1) bigger_cap = limit + 1;      /* one byte more shows the limit passed */
      unsigned char *bigger = realloc(buf, bigger_cap);
      if (bigger == NULL) {
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(ENOMEM));
        failed = true;
        break;
      }
      buf = bigger;
      cap = bigger_cap;
    }
    size_t piece = cap - n < READ_PIECE ? cap - n : READ_PIECE;
    if ((r = gzread(f, buf + n, (unsigned)piece)) <= 0) break;
    n += (size_t)r;
    if (n > limit) {
      snprintf(err, err_len, "%s is larger than %s decompressed, the limit (MIMALLOC_PROF_READ_LIMIT=SIZE "
               "reads larger ones)", path, size_text(limit, size, sizeof size));
      failed = true;
      break;
    }
    if (!limit_set && n > BOMB_FLOOR && !gzdirect(f) && n / BOMB_RATIO > (size_t)gzoffset(f)) {
      snprintf(err, err_len, "%s inflates to more than %d times its size: a gzip bomb? "
               "(MIMALLOC_PROF_READ_LIMIT=SIZE reads it anyway)", path, BOMB_RATIO);
      failed = true;
      break;
    }
  }
  int zerr = 0;
  if (!failed && r < 0) {
    snprintf(err, err_len, "%s is not a readable gzip file (%s)", path, gzerror(f, &zerr));
    failed = true;
  }
  if (failed) {
    free(buf);
    buf = NULL;
  }
  gzclose(f);
  *len = n;
  return buf;
}

/* protobuf-c's memory, counted against a budget: an allocation past it fails, and unpacking with it. */
typedef struct budget_s {
  size_t used, limit;                       /* bytes in use, malloc's own included */
  bool   over;
} budget_t;

#define BLOCK_OVERHEAD 16                   /* malloc's bytes per block, about */

static void *budget_alloc(void *data, size_t size)
{
  budget_t *b = data;
  if (size >= b->limit - b->used) {
    b->over = true;
    return NULL;
  }
  void *p = malloc(size ? size : 1);
  size_t n = p != NULL ? malloc_usable_size(p) + BLOCK_OVERHEAD : 0;
  if (n > b->limit - b->used) {
    b->over = true;
    free(p);
    return NULL;
  }
  b->used += n;
  return p;
}

static void budget_free(void *data, void *p)
{
  budget_t *b = data;
  if (p != NULL) b->used -= malloc_usable_size(p) + BLOCK_OVERHEAD;
  free(p);
}

/* Whether count n is over its limit (then why says so). */
static bool over(size_t n, size_t max, const char *of, const char *what, char *why, size_t len)
{
  if (n <= max) return false;
  snprintf(why, len, "%s%zu %s (at most %zu)", of, n, what, max);
  return true;
}

/* A count beyond its limit: what profile.proto allows but no profiler writes, refused before a command
 * walks it. */
static bool count_over(const profile_t *p, char *why, size_t len)
{
  if (over(p->n_sample, MAX_PARTS, "", "samples", why, len) ||
      over(p->n_location, MAX_PARTS, "", "locations", why, len) ||
      over(p->n_function, MAX_PARTS, "", "functions", why, len) ||
      over(p->n_string_table, MAX_PARTS, "", "strings", why, len) ||
      over(p->n_mapping, MAX_MAPPINGS, "", "mappings", why, len) ||
      over(p->n_sample_type, MAX_TYPES, "", "sample types", why, len))
    return true;
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    if (over(s->n_location_id, PROFILE_MAX_FRAMES, "a sample of ", "locations", why, len) ||
        over(s->n_label, MAX_LABELS, "a sample of ", "labels", why, len) ||
        over(s->n_value, MAX_TYPES, "a sample of ", "values", why, len))
      return true;
  }
  for (size_t i = 0; i < p->n_location; i++) {
    if (over(p->location[i]->n_line, PROFILE_MAX_FRAMES, "a location of ", "lines", why, len)) return true;
  }
  return false;
}

profile_t *profile_read(const char *path, char *err, size_t err_len)
{
  size_t len;
  unsigned char *buf = slurp(path, &len, err, err_len);
  if (buf == NULL) return NULL;
  budget_t budget = {0, DECODE_FLOOR, false};
  if (len > (SIZE_MAX - DECODE_FLOOR) / DECODE_RATIO) budget.limit = SIZE_MAX;
  else budget.limit += len * DECODE_RATIO;
  ProtobufCAllocator alloc = {budget_alloc, budget_free, &budget};
  profile_t *p = perftools__profiles__profile__unpack(&alloc, len, buf);
  free(buf);
  char size[32], why[128];
  if (p == NULL && budget.over) {
    snprintf(err, err_len, "%s has too many parts for its size (decoding it takes more than %s): not a "
             "profile a profiler writes", path, size_text(budget.limit, size, sizeof size));
    return NULL;
  }
  if (p == NULL) {
    snprintf(err, err_len, "%s is not a pprof profile (profile.proto, gzip-compressed or not)", path);
    return NULL;
  }
  if (p->n_string_table == 0 || p->string_table[0][0] != '\0') {
    snprintf(err, err_len, "%s is not a pprof profile (its string table does not start with \"\")", path);
    profile_free(p);
    return NULL;
  }
  if (count_over(p, why, sizeof why)) {
    snprintf(err, err_len, "%s has %s: not a profile a profiler writes", path, why);
    profile_free(p);
    return NULL;
  }
  return p;
}

void profile_free(profile_t *p)
{
  if (p != NULL) perftools__profiles__profile__free_unpacked(p, NULL);
}

int profile_write(const profile_t *p, const char *path, char *err, size_t err_len)
{
  size_t len = perftools__profiles__profile__get_packed_size(p);
  unsigned char *buf = malloc(len ? len : 1);
  if (buf == NULL) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(ENOMEM));
    return -1;
  }
  perftools__profiles__profile__pack(p, buf);
  tool_out_t out;
  int fd = tool_out_open(&out, path);
  if (fd < 0) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    free(buf);
    return -1;
  }
  gzFile f = gzdopen(fd, "wb6");
  size_t done = 0;
  while (f != NULL && done < len) {
    unsigned chunk = len - done > (1u << 30) ? 1u << 30 : (unsigned)(len - done);
    int w = gzwrite(f, buf + done, chunk);
    if (w <= 0) break;
    done += (size_t)w;
  }
  int saved = errno;
  int rc = Z_ERRNO;
  if (f != NULL) {
    rc = gzclose(f);                                /* closes fd too */
    out.fd = -1;
  }
  free(buf);
  bool ok = f != NULL && done == len && rc == Z_OK;
  if (!ok) errno = saved ? saved : EIO;
  if (tool_out_close(&out, path, ok) != 0) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

static uint64_t hash_key;
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void hash_key_draw(void)
{
  if (getrandom(&hash_key, sizeof hash_key, GRND_NONBLOCK) != (ssize_t)sizeof hash_key)
    hash_key = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&hash_key;
}

uint64_t tool_hash_key(void)
{
  pthread_once(&hash_key_once, hash_key_draw);
  return hash_key;
}

uint64_t tool_hash_str(const char *s)
{
  size_t n = strlen(s), len = n;
  uint64_t h = tool_hash_key(), w;
  for (; n >= sizeof w; s += sizeof w, n -= sizeof w) {
    memcpy(&w, s, sizeof w);
    h = tool_hash(h, w);
  }
  w = 0;
  memcpy(&w, s, n);
  return tool_hash(tool_hash(h, w), len);
}

const char *pstr(const profile_t *p, int64_t i)
{
  return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

/* ---------------------------------------------------------------------------------------------------
   Lookups by id: positional when ids are 1..n in order (what the library writes), else a sorted table
--------------------------------------------------------------------------------------------------- */

typedef struct id_pos_s {
  uint64_t id;
  size_t   pos;
} id_pos_t;

static int cmp_id(const void *a, const void *b)
{
  uint64_t x = ((const id_pos_t *)a)->id, y = ((const id_pos_t *)b)->id;
  return x < y ? -1 : x > y;
}

/* NULL when the ids are positional; else (id, position) pairs sorted by id. */
static void *id_table(size_t n, uint64_t (*id_at)(const profile_t *, size_t), const profile_t *p)
{
  size_t i = 0;
  while (i < n && id_at(p, i) == i + 1) i++;
  if (i == n) return NULL;
  id_pos_t *t = malloc(n * sizeof *t);
  if (t == NULL) return NULL;
  for (i = 0; i < n; i++) t[i] = (id_pos_t){id_at(p, i), i};
  qsort(t, n, sizeof *t, cmp_id);
  return t;
}

static size_t id_lookup(const void *table, size_t n, uint64_t id)
{
  const id_pos_t *t = table;
  if (t == NULL) return id >= 1 && id <= n ? (size_t)id - 1 : SIZE_MAX;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && t[lo].id == id ? t[lo].pos : SIZE_MAX;
}

static uint64_t loc_id_at(const profile_t *p, size_t i) { return p->location[i]->id; }
static uint64_t fn_id_at(const profile_t *p, size_t i) { return p->function[i]->id; }
static uint64_t map_id_at(const profile_t *p, size_t i) { return p->mapping[i]->id; }

void pindex_init(pindex_t *ix, const profile_t *p)
{
  ix->p = p;
  ix->loc_ids = id_table(p->n_location, loc_id_at, p);
  ix->fn_ids = id_table(p->n_function, fn_id_at, p);
  ix->map_ids = id_table(p->n_mapping, map_id_at, p);
}

void pindex_free(pindex_t *ix)
{
  free(ix->loc_ids);
  free(ix->fn_ids);
  free(ix->map_ids);
}

size_t pindex_location_pos(const pindex_t *ix, uint64_t id)
{
  return id_lookup(ix->loc_ids, ix->p->n_location, id);
}

const location_t *pindex_location(const pindex_t *ix, uint64_t id)
{
  size_t i = id_lookup(ix->loc_ids, ix->p->n_location, id);
  return i == SIZE_MAX ? NULL : ix->p->location[i];
}

size_t pindex_function_pos(const pindex_t *ix, uint64_t id)
{
  return id_lookup(ix->fn_ids, ix->p->n_function, id);
}

const function_t *pindex_function(const pindex_t *ix, uint64_t id)
{
  size_t i = id_lookup(ix->fn_ids, ix->p->n_function, id);
  return i == SIZE_MAX ? NULL : ix->p->function[i];
}

size_t pindex_mapping_pos(const pindex_t *ix, uint64_t id)
{
  return id_lookup(ix->map_ids, ix->p->n_mapping, id);
}

const mapping_t *pindex_mapping(const pindex_t *ix, uint64_t id)
{
  size_t i = id_lookup(ix->map_ids, ix->p->n_mapping, id);
  return i == SIZE_MAX ? NULL : ix->p->mapping[i];
}

size_t profile_sample_type(const profile_t *p, const char *name)
{
  for (size_t i = 0; i < p->n_sample_type; i++) {
    if (strcmp(pstr(p, p->sample_type[i]->type), name) == 0) return i;
  }
  return SIZE_MAX;
}

const char *profile_sample_types(const profile_t *p, char *buf, size_t len)
{
  size_t o = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < p->n_sample_type && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", pstr(p, p->sample_type[i]->type));
  return buf;
}

const profile_t *profile_header_without(const profile_t *p, const char *prefix, profile_t *h, int64_t **kept)
{
  size_t len = strlen(prefix);
  *h = *p;
  *kept = malloc((p->n_comment + 1) * sizeof **kept);
  if (*kept == NULL) abort();
  h->comment = *kept;
  h->n_comment = 0;
  for (size_t i = 0; i < p->n_comment; i++) {
    if (strncmp(pstr(p, p->comment[i]), prefix, len) != 0) h->comment[h->n_comment++] = p->comment[i];
  }
  return h;
}

const char *profile_mapping_base(const profile_t *p, const mapping_t *m)
{
  const char *file = pstr(p, m->filename), *slash = strrchr(file, '/');
  return slash ? slash + 1 : file;
}
