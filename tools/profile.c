/* profile.c - reading and writing pprof profiles (profile.proto: protobuf-c; gzip: zlib, as the library
 * writes them), and looking their parts up by id.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Reads the whole file; gzread passes data that is not gzip-compressed through unchanged. */
static unsigned char *slurp(const char *path, size_t *len, char *err, size_t err_len)
{
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
  size_t cap = 1 << 20, n = 0;
  unsigned char *buf = malloc(cap);
  int r = 0;
  while (buf != NULL && (r = gzread(f, buf + n, (unsigned)(cap - n))) > 0) {
    n += (size_t)r;
    if (n == cap) {
      unsigned char *bigger = realloc(buf, cap *= 2);
      if (bigger == NULL) free(buf);
      buf = bigger;
    }
  }
  int zerr = 0;
  const char *zmsg = r < 0 ? gzerror(f, &zerr) : NULL;
  if (buf == NULL) snprintf(err, err_len, "cannot read %s: %s", path, strerror(ENOMEM));
  else if (r < 0) snprintf(err, err_len, "%s is not a readable gzip file (%s)", path, zmsg);
  if (r < 0) {
    free(buf);
    buf = NULL;
  }
  gzclose(f);
  *len = n;
  return buf;
}

profile_t *profile_read(const char *path, char *err, size_t err_len)
{
  size_t len;
  unsigned char *buf = slurp(path, &len, err, err_len);
  if (buf == NULL) return NULL;
  profile_t *p = perftools__profiles__profile__unpack(NULL, len, buf);
  free(buf);
  if (p == NULL) {
    snprintf(err, err_len, "%s is not a pprof profile (profile.proto, gzip-compressed or not)", path);
    return NULL;
  }
  if (p->n_string_table == 0 || p->string_table[0][0] != '\0') {
    snprintf(err, err_len, "%s is not a pprof profile (its string table does not start with \"\")", path);
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

const char *profile_mapping_base(const profile_t *p, const mapping_t *m)
{
  const char *file = pstr(p, m->filename), *slash = strrchr(file, '/');
  return slash ? slash + 1 : file;
}
