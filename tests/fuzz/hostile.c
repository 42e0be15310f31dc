/* hostile.c - writes the hostile profiles that the mimalloc-prof command must survive (the tool_hostile
 * tests run every command on them; the small ones are also in the fuzz corpus, tests/fuzz/corpus, with
 * two typical profiles to start mutations from: tests/fuzz/make-corpus.sh).
 *
 *   hostile KIND FILE
 *
 * The profiles are encoded here by hand, field by field in protobuf's wire format, so that they can be
 * what no encoder would write: every part a reader must not trust (counts, repetitions, lengths, ids,
 * values, times) pushed to where it hurts.  KINDs:
 *   typical          what the library writes, symbolized: 4 sample types, 2 mappings with build IDs,
 *                    inlined frames, C++ names (mangled and not), a dropped-sample location, labels,
 *                    comments, times
 *   typical-b        the same program later, some values changed (diff and merge it with typical)
 *   repeated-frames  2 KB: one location of 450 lines, named 1,000 times by one sample: a stack of
 *                    450,000 frames, all alike
 *   deep-stacks      5 KB: 16 stacks of 64,001 frames (a location of 250 lines, named 256 times, under
 *                    16 different callers): just under the limits, 1,024,016 frames
 *   deep-stack       1.3 KB: the first of them
 *   gzip-bomb        390 KB of gzip that inflates to 256 MiB of valid samples
 *   small-bomb       its first 20 MiB (30 KB of gzip)
 *   empty-parts      2 MiB of empty messages (samples, lines, labels, strings, functions: 2 bytes each,
 *                    40 to 100 bytes each once decoded)
 *   long-names       a 64 KiB function name on 100 lines of a location that a sample names 600 times
 *                    (as folded text: 3.9 GB)
 *   long-path        a function in a file whose name is 1 MiB of slashes and then src/f.c, on the 60,000
 *                    lines of a location (with --lines, a frame name per line)
 *   mangled          a function's 700-byte mangled C++ name that stands for 2^40 copies of a name
 *   colliding        20,000 locations without lines whose addresses differ only above bit 31, in 10,000
 *                    samples (what a weak hash puts into one bucket)
 *   mappings         60,000 mappings of different files, and one location
 *   comments         a 64 KiB string as each of 1,000,000 comments
 *   wide             100,000 samples of 2 frames, each under its own function
 *   time-max         a profile that starts at INT64_MAX ns and lasts INT64_MAX ns (merge with time-min)
 *   time-min         one that starts at INT64_MIN ns
 *   order-a          started at 100 s, lasting 50 s (merge with order-b: 100 s to 220 s)
 *   order-b          started at 120 s, lasting 100 s
 *   values           values at INT64_MIN and INT64_MAX on stacks that share frames (sums that overflow)
 *   ids              ids that are not 1..n: 0, 2^64-1, duplicates, references to ids that do not exist
 * A FILE ending in .gz is written gzip-compressed.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct buf_s {
  unsigned char *b;
  size_t n, cap;
} buf_t;

static void put(buf_t *w, const void *p, size_t n)
{
  if (w->n + n > w->cap) {
    w->cap = (w->n + n) * 2 + 256;
    w->b = realloc(w->b, w->cap);
    if (w->b == NULL) {
      perror("hostile");
      exit(1);
    }
  }
  memcpy(w->b + w->n, p, n);
  w->n += n;
}

static void varint(buf_t *w, uint64_t v)
{
  unsigned char c[10];
  size_t n = 0;
  do {
    c[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  put(w, c, n);
}

/* field as a varint (wire type 0); an int64 is encoded as its two's complement */
static void field(buf_t *w, unsigned num, uint64_t v)
{
  varint(w, (uint64_t)num << 3);
  varint(w, v);
}

/* field as bytes (wire type 2): a string, a packed array or a message */
static void bytes(buf_t *w, unsigned num, const void *p, size_t n)
{
  varint(w, (uint64_t)num << 3 | 2);
  varint(w, n);
  put(w, p, n);
}

static void message(buf_t *w, unsigned num, buf_t *sub)
{
  bytes(w, num, sub->b, sub->n);
  sub->n = 0;
}

static void string(buf_t *w, const char *s)
{
  bytes(w, 6, s, strlen(s));
}

/* Profile fields */
enum { SAMPLE_TYPE = 1, SAMPLE = 2, MAPPING = 3, LOCATION = 4, FUNCTION = 5, TIME = 9, DURATION = 10,
       PERIOD_TYPE = 11, PERIOD = 12 };

/* The strings every profile here starts with: 1 "inuse_space", 2 "bytes", 3 "f", 4 "space"; and one
 * sample type (inuse_space, bytes), period type space/bytes, period 524288. */
static void header(buf_t *w)
{
  buf_t t = {0};
  string(w, "");
  string(w, "inuse_space");
  string(w, "bytes");
  string(w, "f");
  string(w, "space");
  field(&t, 1, 1);
  field(&t, 2, 2);
  message(w, SAMPLE_TYPE, &t);
  field(&t, 1, 4);
  field(&t, 2, 2);
  message(w, PERIOD_TYPE, &t);
  field(w, PERIOD, 524288);
  free(t.b);
}

static void function(buf_t *w, uint64_t id, uint64_t name)
{
  buf_t f = {0};
  field(&f, 1, id);
  field(&f, 2, name);
  message(w, FUNCTION, &f);
  free(f.b);
}

/* A location of `n_lines` lines, all of function `fn` (0: lines without a function), at lines 1, 2, ...
 * when `numbered`. */
static void location_lines(buf_t *w, uint64_t id, uint64_t address, uint64_t fn, size_t n_lines,
                           bool numbered)
{
  buf_t l = {0}, line = {0};
  field(&l, 1, id);
  if (address != 0) field(&l, 3, address);
  for (size_t i = 0; i < n_lines; i++) {
    if (fn != 0) field(&line, 1, fn);
    if (numbered) field(&line, 2, i + 1);
    message(&l, 4, &line);
  }
  message(w, LOCATION, &l);
  free(l.b);
  free(line.b);
}

static void location(buf_t *w, uint64_t id, uint64_t address, uint64_t fn, size_t n_lines)
{
  location_lines(w, id, address, fn, n_lines, false);
}

/* A sample of the location ids ids[0..n) (each repeated `times`) with one value. */
static void sample(buf_t *w, const uint64_t *ids, size_t n, size_t times, int64_t value)
{
  buf_t s = {0}, packed = {0};
  for (size_t t = 0; t < times; t++) {
    for (size_t i = 0; i < n; i++) varint(&packed, ids[i]);
  }
  bytes(&s, 1, packed.b, packed.n);
  packed.n = 0;
  varint(&packed, (uint64_t)value);
  bytes(&s, 2, packed.b, packed.n);
  message(w, SAMPLE, &s);
  free(s.b);
  free(packed.b);
}

static void repeated_frames(buf_t *w)
{
  header(w);
  function(w, 1, 3);
  location(w, 1, 0, 0, 450);
  sample(w, (const uint64_t[]){1}, 1, 1000, 4096);
}

/* `what` repeated until the profile has `total` bytes. */
static void fill(buf_t *w, const buf_t *what, size_t total)
{
  while (w->n + what->n <= total) put(w, what->b, what->n);
}

/* typical: strings 5.. are names and files; values alloc_objects, alloc_space, inuse_objects, inuse_space. */
static void typical_profile(buf_t *w, int later)
{
  static const char *const strings[] = {
    "", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects", "inuse_space", "space",
    "main", "/src/main.cc", "_ZN3app6Server6handleERKNS_7RequestE", "/src/server.cc",
    "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>",
    "/usr/include/c++/12/bits/vector.tcc",
    "operator new(unsigned long)", "malloc", "[mimalloc-prof: dropped (unwind)]", "/nonexistent/prog",
    "0123456789abcdef0123456789abcdef01234567", "/nonexistent/libc.so.6", "fedcba9876543210", "thread",
    "worker", "bytes_requested", "written by tests/fuzz/hostile", "^malloc$", "_ZSt4sortIPiEvT_S1_"};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) string(w, strings[i]);
  buf_t t = {0}, m = {0}, l = {0}, line = {0}, s = {0}, packed = {0};
  for (int i = 0; i < 4; i++) {
    field(&t, 1, (uint64_t)(i == 0 ? 1 : i == 1 ? 3 : i == 2 ? 5 : 6));
    field(&t, 2, (uint64_t)(i % 2 == 0 ? 2 : 4));
    message(w, SAMPLE_TYPE, &t);
  }
  field(&t, 1, 7);
  field(&t, 2, 4);
  message(w, PERIOD_TYPE, &t);
  field(w, PERIOD, 524288);
  field(w, 14, 6);                                   /* default_sample_type */
  field(w, 7, 25);                                   /* drop_frames */
  field(w, 13, 24);                                  /* comment */
  field(w, TIME, later ? 1700000060000000000 : 1700000000000000000);
  field(w, DURATION, 30000000000);
  static const uint64_t maps[2][5] = {{1, 0x555500001000, 0x555500100000, 0x1000, 17},
                                      {2, 0x7f0000028000, 0x7f00001bd000, 0x28000, 19}};
  for (int i = 0; i < 2; i++) {
    for (unsigned f = 0; f < 5; f++) field(&m, f + 1, maps[i][f]);
    field(&m, 6, i == 0 ? 18 : 20);
    message(w, MAPPING, &m);
  }
  static const uint64_t fns[][3] = {{1, 8, 9}, {2, 10, 11}, {3, 12, 13}, {4, 14, 0}, {5, 15, 0}, {6, 26, 0}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    field(&l, 1, fns[i][0]);
    field(&l, 2, fns[i][1]);
    field(&l, 3, fns[i][1]);
    if (fns[i][2]) field(&l, 4, fns[i][2]);
    field(&l, 5, 10 * i + 1);
    message(w, FUNCTION, &l);
  }
  /* locations: id, mapping, address, then (function, line) pairs innermost first */
  static const uint64_t locs[][7] = {
    {1, 1, 0x555500001234, 1, 42, 0, 0},   {2, 1, 0x555500002345, 2, 77, 3, 120}, /* handle, vector inlined */
    {3, 1, 0x555500003456, 4, 0, 0, 0},    {4, 2, 0x7f000002a000, 5, 0, 0, 0},
    {5, 0, 2, 0, 0, 0, 0},                 {6, 1, 0x555500004567, 6, 9, 0, 0},
    {7, 2, 0x7f0000030000, 0, 0, 0, 0}};
  for (size_t i = 0; i < sizeof locs / sizeof locs[0]; i++) {
    field(&l, 1, locs[i][0]);
    if (locs[i][1]) field(&l, 2, locs[i][1]);
    field(&l, 3, locs[i][2]);
    for (int k = 3; k < 7 && locs[i][k] != 0; k += 2) {
      field(&line, 1, locs[i][k]);
      if (locs[i][k + 1]) field(&line, 2, locs[i][k + 1]);
      message(&l, 4, &line);
    }
    if (i == 4) {                                    /* the dropped-sample location: a name, no mapping */
      buf_t f = {0};
      field(&f, 1, 7);
      field(&f, 2, 16);
      message(&l, 4, &f);
      free(f.b);
    }
    message(w, LOCATION, &l);
  }
  buf_t f = {0};
  field(&f, 1, 7);
  field(&f, 2, 16);
  message(w, FUNCTION, &f);
  free(f.b);
  static const uint64_t stacks[][6] = {{4, 3, 2, 1, 0, 0}, {4, 3, 6, 2, 1, 0}, {5, 0, 0, 0, 0, 0},
                                       {7, 1, 0, 0, 0, 0}, {4, 2, 2, 2, 1, 0}};
  for (size_t i = 0; i < sizeof stacks / sizeof stacks[0]; i++) {
    for (int k = 0; k < 6 && stacks[i][k] != 0; k++) varint(&packed, stacks[i][k]);
    bytes(&s, 1, packed.b, packed.n);
    packed.n = 0;
    uint64_t bytes_ = (uint64_t)(i + 1) * 4096 * (later && i == 1 ? 3 : 1);
    varint(&packed, bytes_ / 512);
    varint(&packed, bytes_);
    varint(&packed, i == 3 ? 0 : bytes_ / 1024);
    varint(&packed, i == 3 ? 0 : bytes_ / 2);
    bytes(&s, 2, packed.b, packed.n);
    packed.n = 0;
    buf_t label = {0};
    field(&label, 1, 21);
    field(&label, 2, 22);
    message(&s, 3, &label);
    field(&label, 1, 23);
    field(&label, 3, 4096);
    field(&label, 4, 4);
    message(&s, 3, &label);
    free(label.b);
    message(w, SAMPLE, &s);
  }
  free(t.b), free(m.b), free(l.b), free(line.b), free(s.b), free(packed.b);
}

static void typical(buf_t *w) { typical_profile(w, 0); }
static void typical_b(buf_t *w) { typical_profile(w, 1); }

static void deep(buf_t *w, unsigned stacks)
{
  header(w);
  function(w, 1, 3);
  location(w, 1, 0, 1, 250);
  uint64_t ids[257];
  for (size_t i = 0; i < 256; i++) ids[i] = 1;
  for (unsigned k = 0; k < stacks; k++) {
    location(w, 2 + k, 0x1000 + k, 1, 1);                /* a different caller (outermost) each */
    ids[256] = 2 + k;
    sample(w, ids, 257, 1, 4096);
  }
}

static void deep_stacks(buf_t *w) { deep(w, 16); }
static void deep_stack(buf_t *w) { deep(w, 1); }

/* `mib` MiB of one valid sample, repeated: gzip compresses it about 650 times. */
static void bomb(buf_t *w, size_t mib)
{
  buf_t one = {0};
  header(w);
  function(w, 1, 3);
  location(w, 1, 0, 1, 1);
  sample(&one, (const uint64_t[]){1}, 1, 1, 1);
  fill(w, &one, mib << 20);
  free(one.b);
}

static void gzip_bomb(buf_t *w) { bomb(w, 256); }
static void small_bomb(buf_t *w) { bomb(w, 20); }

static void empty_parts(buf_t *w)
{
  static const unsigned fields[] = {SAMPLE, 6, FUNCTION};  /* samples, strings, functions */
  enum { PART = 400 << 10 };
  header(w);
  buf_t l = {0}, empty = {0}, s = {0};
  field(&l, 1, 1);                                   /* a location of empty lines */
  bytes(&empty, 4, NULL, 0);
  fill(&l, &empty, PART);
  message(w, LOCATION, &l);
  empty.n = 0;                                       /* a sample of empty labels */
  bytes(&empty, 3, NULL, 0);
  fill(&s, &empty, PART);
  message(w, SAMPLE, &s);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    empty.n = 0;
    bytes(&empty, fields[i], NULL, 0);
    fill(w, &empty, w->n + PART);
  }
  free(l.b), free(empty.b), free(s.b);
}

static void long_names(buf_t *w)
{
  header(w);
  char *name = malloc(65537);
  memset(name, 'n', 65536);
  name[65536] = '\0';
  string(w, name);                                   /* string 5 */
  free(name);
  string(w, "/src/file.c");                          /* string 6 */
  buf_t f = {0};
  field(&f, 1, 1);
  field(&f, 2, 5);
  field(&f, 4, 6);
  message(w, FUNCTION, &f);
  free(f.b);
  location_lines(w, 1, 0, 1, 100, true);
  sample(w, (const uint64_t[]){1}, 1, 600, 4096);
}

static void long_path(buf_t *w)
{
  header(w);
  char *file = malloc((1 << 20) + 16);
  memset(file, '/', 1 << 20);
  strcpy(file + (1 << 20), "src/f.c");
  string(w, file);                                   /* string 5 */
  free(file);
  buf_t f = {0};
  field(&f, 1, 1);
  field(&f, 2, 3);
  field(&f, 4, 5);
  message(w, FUNCTION, &f);
  free(f.b);
  location_lines(w, 1, 0, 1, 60000, true);
  sample(w, (const uint64_t[]){1}, 1, 1, 4096);
}

/* A mangled C++ name of std::pairs of the pair before, 40 deep: each substitution repeats all before it,
 * so it demangles into 2^40 copies of "A" (libstdc++'s __cxa_demangle never ends). */
static void mangled(buf_t *w)
{
  static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  char name[1024] = "_Z1fISt4pairI1AS0_E";
  for (unsigned i = 0; i < 40; i++) {
    unsigned k = 2 + 2 * i;                          /* the pair of level i - 1, as a substitution */
    char sub[8];
    snprintf(sub, sizeof sub, "S%c%c_", k < 36 ? digits[k] : digits[k / 36], k < 36 ? '_' : digits[k % 36]);
    if (k < 36) sub[3] = '\0';
    snprintf(name + strlen(name), sizeof name - strlen(name), "St4pairI%s%sE", sub, sub);
  }
  strcat(name, "EvT_");
  header(w);
  string(w, name);                                   /* string 5 */
  function(w, 1, 5);
  location(w, 1, 0, 1, 1);
  sample(w, (const uint64_t[]){1}, 1, 1, 4096);
}

static void colliding(buf_t *w)
{
  enum { N = 20000 };
  header(w);
  for (unsigned i = 0; i < N; i++) location(w, i + 1, (uint64_t)(i + 1) << 32, 0, 0);
  for (unsigned i = 0; i + 1 < N; i += 2) sample(w, (const uint64_t[]){i + 1, i + 2}, 2, 1, 1024);
}

static void mappings(buf_t *w)
{
  enum { N = 60000 };
  header(w);
  char name[64];
  for (unsigned i = 0; i < N; i++) {
    snprintf(name, sizeof name, "/nonexistent/lib%u.so", i);
    string(w, name);                                 /* string 5 + i */
    buf_t m = {0};
    field(&m, 1, i + 1);
    field(&m, 2, 0x10000 * (uint64_t)(i + 1));
    field(&m, 3, 0x10000 * (uint64_t)(i + 2));
    field(&m, 5, 5 + i);
    message(w, MAPPING, &m);
    free(m.b);
  }
  buf_t l = {0};
  field(&l, 1, 1);
  field(&l, 2, 1);
  field(&l, 3, 0x10010);
  message(w, LOCATION, &l);
  free(l.b);
  sample(w, (const uint64_t[]){1}, 1, 1, 4096);
}

static void comments(buf_t *w)
{
  header(w);
  char *text = malloc(65537);
  memset(text, 'c', 65536);
  text[65536] = '\0';
  string(w, text);                                   /* string 5 */
  free(text);
  buf_t packed = {0};
  for (size_t i = 0; i < 1000000; i++) varint(&packed, 5);
  bytes(w, 13, packed.b, packed.n);
  free(packed.b);
  function(w, 1, 3);
  location(w, 1, 0, 1, 1);
  sample(w, (const uint64_t[]){1}, 1, 1, 4096);
}

static void wide(buf_t *w)
{
  enum { N = 100000 };
  header(w);
  char name[32];
  function(w, 1, 3);
  location(w, 1, 0, 1, 1);
  for (unsigned i = 0; i < N; i++) {
    snprintf(name, sizeof name, "leaf%u", i);
    string(w, name);
    function(w, i + 2, 5 + i);
    location(w, i + 2, 0, i + 2, 1);
    sample(w, (const uint64_t[]){i + 2, 1}, 2, 1, 1 + i);
  }
}

static void timed(buf_t *w, int64_t time, int64_t duration)
{
  header(w);
  function(w, 1, 3);
  location(w, 1, 0, 1, 1);
  sample(w, (const uint64_t[]){1}, 1, 1, 4096);
  field(w, TIME, (uint64_t)time);
  field(w, DURATION, (uint64_t)duration);
}

static void values(buf_t *w)
{
  header(w);
  function(w, 1, 3);
  location(w, 1, 0, 1, 1);
  location(w, 2, 0, 1, 2);
  for (int i = 0; i < 4; i++) {
    sample(w, (const uint64_t[]){1, 2}, 2, 1 + i, INT64_MAX);
    sample(w, (const uint64_t[]){2, 1}, 2, 1 + i, INT64_MIN);
    sample(w, (const uint64_t[]){1}, 1, 1 + i, INT64_MAX);
  }
}

static void ids(buf_t *w)
{
  header(w);
  buf_t m = {0};
  field(&m, 1, UINT64_MAX);                          /* a mapping with the largest id, empty range */
  field(&m, 2, UINT64_MAX);
  field(&m, 3, 0);
  field(&m, 4, UINT64_MAX);
  field(&m, 5, (uint64_t)INT64_MIN);                 /* string indexes out of range */
  field(&m, 6, (uint64_t)-1);
  message(w, MAPPING, &m);
  free(m.b);
  function(w, 0, 3);
  function(w, UINT64_MAX, (uint64_t)INT64_MAX);
  function(w, 7, 3);
  function(w, 7, (uint64_t)-5);
  buf_t l = {0}, line = {0};
  field(&l, 1, 7);
  field(&l, 2, UINT64_MAX);
  field(&l, 3, 1);
  field(&line, 1, 12345);
  field(&line, 2, (uint64_t)INT64_MIN);
  message(&l, 4, &line);
  message(w, LOCATION, &l);
  free(l.b), free(line.b);
  location(w, 0, 5, 7, 2);
  location(w, UINT64_MAX, 6, UINT64_MAX, 1);
  location(w, 7, 8, 0, 1);
  sample(w, (const uint64_t[]){7, 0, UINT64_MAX, 3, 7}, 5, 2, 4096);
}

static const struct {
  const char *name;
  void (*write)(buf_t *w);
} kinds[] = {
  {"typical", typical},                 {"typical-b", typical_b},     {"small-bomb", small_bomb},
  {"repeated-frames", repeated_frames}, {"deep-stacks", deep_stacks}, {"deep-stack", deep_stack},
  {"gzip-bomb", gzip_bomb},
  {"empty-parts", empty_parts},         {"long-names", long_names},   {"colliding", colliding},
  {"mappings", mappings},               {"comments", comments},       {"wide", wide},
  {"mangled", mangled},                 {"long-path", long_path},
  {"values", values},                   {"ids", ids},
};

static void write_file(const char *path, const buf_t *w)
{
  size_t n = strlen(path);
  if (n > 3 && strcmp(path + n - 3, ".gz") == 0) {
    gzFile f = gzopen(path, "wb9");
    size_t done = 0;
    while (f != NULL && done < w->n) {
      unsigned chunk = w->n - done > (1u << 30) ? 1u << 30 : (unsigned)(w->n - done);
      if (gzwrite(f, w->b + done, chunk) <= 0) break;
      done += chunk;
    }
    if (f == NULL || done != w->n || gzclose(f) != Z_OK) {
      fprintf(stderr, "hostile: cannot write %s\n", path);
      exit(1);
    }
    return;
  }
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(w->b, 1, w->n, f) != w->n || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: hostile KIND FILE\n");
    return 2;
  }
  buf_t w = {0};
  const char *kind = argv[1];
  if (strcmp(kind, "time-max") == 0) timed(&w, INT64_MAX, INT64_MAX);
  else if (strcmp(kind, "time-min") == 0) timed(&w, INT64_MIN, 1);
  else if (strcmp(kind, "order-a") == 0) timed(&w, 100000000000, 50000000000);
  else if (strcmp(kind, "order-b") == 0) timed(&w, 120000000000, 100000000000);
  else {
    size_t k = 0;
    while (k < sizeof kinds / sizeof kinds[0] && strcmp(kinds[k].name, kind) != 0) k++;
    if (k == sizeof kinds / sizeof kinds[0]) {
      fprintf(stderr, "hostile: unknown kind '%s'\n", kind);
      return 2;
    }
    kinds[k].write(&w);
  }
  write_file(argv[2], &w);
  free(w.b);
  return 0;
}
