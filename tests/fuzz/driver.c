/* driver.c - runs one fuzz target (target.c) without libFuzzer, as a test of make check:
 *
 *   fuzz_TARGET [-n RUNS] [-s SEED] [-t SECONDS] [-T SECONDS] [-m MIB] [-o DIR] [-v] [FILE|DIR...]
 *
 * First every input of the seed corpus (the FILEs, and the files in each DIR; by default
 * $MPROF_FUZZ_CORPUS/TARGET, which make check sets to tests/fuzz/corpus), then RUNS inputs (default
 * $MPROF_FUZZ_RUNS, else 2000) made from them by the mutations below, drawn from a generator seeded with
 * SEED (default 1): the same inputs on every run and machine.  It fails, saying which input and saving
 * it as DIR/TARGET-failed (default DIR: the driver's own directory), on
 *   - a crash or a sanitizer's report (built with -fsanitize=address,undefined where configure found
 *     them working: --enable-fuzz-sanitizers);
 *   - an input that takes more than -t SECONDS of CPU (default 2, times 5 under the sanitizers, which
 *     make the code 2 to 4 times slower, and times MPROF_FUZZ_TIME_FACTOR when set, for an emulator);
 *   - an input that makes the command allocate more than -m MIB at once (default 200): counted from the
 *     allocator's hooks under AddressSanitizer, else by malloc and its family defined here, over glibc's
 *     __libc_malloc (RLIMIT_AS, which AddressSanitizer's shadow memory rules out, is set too without it).
 * The mutations stop early, still passing, once they have taken -T SECONDS of CPU in all (default 20).
 * The result is TAP on stdout: the commands' own output goes to /dev/null (their messages too, unless -v).
 *
 * Mutations, 1 to 4 at a time: flip a bit, set a byte to an edge value, insert random bytes, delete a
 * range, repeat a range up to 64 times (repeated fields: the cheap way to a big profile), splice in a
 * range of another input, write a varint of an edge value (0, 2^7, 2^31, 2^63-1, 2^64-1, ...), add to a
 * byte, truncate.  A gzip input is mutated inflated half of the time (then compressed again, so that
 * its CRC holds and the inflated profile is what changes).  Inputs stay under 64 KiB.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#ifndef MPROF_FUZZ_TARGET
#error "MPROF_FUZZ_TARGET names the target"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LEN  ((size_t)64 << 10)
#define MAX_SEED   ((size_t)1 << 20)

/* ---------------------------------------------------------------------------------------------------
   Memory: bytes allocated now, and the most since the input began
--------------------------------------------------------------------------------------------------- */

static size_t mem_now, mem_peak;

static void mem_add(size_t n)
{
  mem_now += n;
  if (mem_now > mem_peak) mem_peak = mem_now;
}

#if SANITIZED
int    __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                                 void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);
void   __sanitizer_set_report_fd(void *fd);
void   __sanitizer_set_death_callback(void (*callback)(void));

const char *__lsan_default_options(void);

/* A leak is reported (and fails the run) at exit, after every input: ten are enough to find it. */
const char *__lsan_default_options(void)
{
  return "max_leaks=10";
}

static void malloc_hook(const volatile void *p, size_t size)
{
  (void)p;
  mem_add(size);
}

static void free_hook(const volatile void *p)
{
  size_t n = __sanitizer_get_allocated_size(p);
  mem_now -= n < mem_now ? n : mem_now;
}

static void mem_init(size_t bound)
{
  (void)bound;
  __sanitizer_install_malloc_and_free_hooks(malloc_hook, free_hook);
}
#else
/* glibc's allocator under ours: every malloc of the process (zlib's, protobuf-c's, libdw's) comes here. */
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void  __libc_free(void *p);

static void *counted(void *p)
{
  if (p != NULL) mem_add(malloc_usable_size(p));
  return p;
}

static void uncount(void *p)
{
  size_t n = p != NULL ? malloc_usable_size(p) : 0;
  mem_now -= n < mem_now ? n : mem_now;
}

void *malloc(size_t n) { return counted(__libc_malloc(n)); }
void *calloc(size_t n, size_t size) { return counted(__libc_calloc(n, size)); }
void *memalign(size_t align, size_t n) { return counted(__libc_memalign(align, n)); }
void *aligned_alloc(size_t align, size_t n) { return counted(__libc_memalign(align, n)); }
void  free(void *p)
{
  uncount(p);
  __libc_free(p);
}

void *realloc(void *p, size_t n)
{
  size_t old = p != NULL ? malloc_usable_size(p) : 0;
  void *q = __libc_realloc(p, n);
  if (q == NULL && n == 0) mem_now -= old < mem_now ? old : mem_now;   /* freed */
  if (q == NULL) return NULL;                  /* else p stays, counted */
  mem_now -= old < mem_now ? old : mem_now;
  return counted(q);
}

int posix_memalign(void **out, size_t align, size_t n)
{
  void *p = __libc_memalign(align, n);
  if (p == NULL) return ENOMEM;
  *out = counted(p);
  return 0;
}

/* The address space: what is mapped now, plus twice the bound (a stray allocation fails, at least). */
static void mem_init(size_t bound)
{
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f != NULL && fscanf(f, "%lu", &pages) == 1) {
    rlim_t as = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + 2 * (rlim_t)bound;
    setrlimit(RLIMIT_AS, &(struct rlimit){as, as});
  }
  if (f != NULL) fclose(f);
}
#endif

/* ---------------------------------------------------------------------------------------------------
   The input being run, saved when it fails
--------------------------------------------------------------------------------------------------- */

static const uint8_t *cur_data;
static size_t         cur_size;
static char           cur_what[512];        /* "corpus file X", "mutation N of X" */
static char           save_path[4200];
static int            report_fd = 2;        /* the real stderr */

/* Async-signal-safe: write(2) only. */
static void say(const char *s)
{
  for (size_t n = strlen(s); n > 0;) {
    ssize_t w = write(report_fd, s, n);
    if (w <= 0) return;
    s += w, n -= (size_t)w;
  }
}

static void save_input(void)
{
  if (cur_data == NULL) {                   /* after the inputs: the leak check at exit */
    say("Bail out! fuzz_" MPROF_FUZZ_TARGET ": the inputs left memory allocated (the report above says "
        "where)\n");
    return;
  }
  int fd = open(save_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  for (size_t done = 0; fd >= 0 && done < cur_size;) {
    ssize_t w = write(fd, cur_data + done, cur_size - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  if (fd >= 0) close(fd);
  say("Bail out! fuzz_" MPROF_FUZZ_TARGET ": ");
  say(cur_what);
  say(" failed; the input is saved as ");
  say(save_path);
  say(" (run fuzz_" MPROF_FUZZ_TARGET " -n 0 FILE to replay it)\n");
}

static void on_fatal(int sig)
{
  if (sig == SIGPROF) say("# the input took more CPU time than the bound (-t)\n");
  save_input();
  if (sig == SIGPROF) _exit(1);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* ---------------------------------------------------------------------------------------------------
   Inputs: the corpus, and mutations of it
--------------------------------------------------------------------------------------------------- */

typedef struct input_s {
  uint8_t *data;
  size_t   size;
  char     name[256];
} input_t;

static input_t *inputs;
static size_t   n_inputs, cap_inputs;

static void add_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "fuzz_%s: cannot read %s: %s\n", MPROF_FUZZ_TARGET, path, strerror(errno));
    exit(99);
  }
  uint8_t *data = malloc(MAX_SEED);
  size_t n = fread(data, 1, MAX_SEED, f);
  fclose(f);
  if (n_inputs == cap_inputs) {
    cap_inputs = cap_inputs ? 2 * cap_inputs : 64;
    inputs = realloc(inputs, cap_inputs * sizeof *inputs);
  }
  input_t *in = &inputs[n_inputs++];
  in->data = realloc(data, n ? n : 1);
  in->size = n;
  const char *base = strrchr(path, '/');
  snprintf(in->name, sizeof in->name, "%s", base ? base + 1 : path);
}

static int by_name(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files of a directory (sorted by name: the same order everywhere), or the file itself. */
static void add_path(const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
    add_file(path);
    return;
  }
  DIR *d = opendir(path);
  char **names = NULL;
  size_t n = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    names = realloc(names, (n + 1) * sizeof *names);
    names[n++] = strdup(e->d_name);
  }
  if (d != NULL) closedir(d);
  qsort(names, n, sizeof *names, by_name);
  for (size_t i = 0; i < n; i++) {
    char file[4096];
    snprintf(file, sizeof file, "%s/%s", path, names[i]);
    add_file(file);
    free(names[i]);
  }
  free(names);
}

static uint64_t rng;

static uint64_t rnd(void)                   /* xorshift64* */
{
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static size_t below(size_t n)
{
  return n ? (size_t)(rnd() % n) : 0;
}

static size_t insert(uint8_t *buf, size_t len, size_t at, const uint8_t *what, size_t n)
{
  if (len + n > MAX_LEN) n = MAX_LEN - len;
  memmove(buf + at + n, buf + at, len - at);
  memcpy(buf + at, what, n);
  return len + n;
}

static size_t mutate_once(uint8_t *buf, size_t len)
{
  static const uint64_t edges[] = {0, 1, 127, 128, 255, 16383, 16384, 65535, 0x7fffffff, 0x80000000,
                                   0xffffffff, 0x100000000, 0x7fffffffffffffff, 0x8000000000000000,
                                   0xffffffffffffffff};
  static const uint8_t bytes[] = {0, 1, 0x7f, 0x80, 0xff, 0x0a, 0x12, 0x22, 0x32};   /* tags of fields */
  uint8_t tmp[4096];
  size_t at = below(len + 1), n;
  switch (below(9)) {
  case 0:
    if (len) buf[below(len)] ^= (uint8_t)(1u << below(8));
    return len;
  case 1:
    if (len) buf[below(len)] = bytes[below(sizeof bytes)];
    return len;
  case 2:
    n = 1 + below(8);
    for (size_t i = 0; i < n; i++) tmp[i] = (uint8_t)rnd();
    return insert(buf, len, at, tmp, n);
  case 3:
    if (at == len) return len;
    n = 1 + below((len - at) / 4 + 1);
    memmove(buf + at, buf + at + n, len - at - n);
    return len - n;
  case 4: {                                 /* a range repeated */
    if (at == len) return len;
    n = 1 + below(len - at < 64 ? len - at : 64);
    memcpy(tmp, buf + at, n);
    size_t times = 1 + below(64);
    for (size_t i = 0; i < times && len < MAX_LEN; i++) len = insert(buf, len, at, tmp, n);
    return len;
  }
  case 5: {                                 /* a range of another input */
    const input_t *o = &inputs[below(n_inputs)];
    if (o->size == 0) return len;
    size_t from = below(o->size);
    n = 1 + below(o->size - from < sizeof tmp ? o->size - from : sizeof tmp);
    return insert(buf, len, at, o->data + from, n);
  }
  case 6: {                                 /* a varint of an edge value, over what is there */
    uint64_t v = edges[below(sizeof edges / sizeof edges[0])];
    n = 0;
    do {
      tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
      v >>= 7;
    } while (v != 0);
    if (at + n > len) return insert(buf, len, at, tmp, n);
    memcpy(buf + at, tmp, n);
    return len;
  }
  case 7:
    if (len) buf[below(len)] += (uint8_t)(1 + below(35)) * (rnd() & 1 ? 1 : 255);
    return len;
  default:
    return at;                              /* truncated */
  }
}

static size_t mutate_bytes(uint8_t *buf, size_t len)
{
  for (size_t k = 1 + below(4); k > 0; k--) len = mutate_once(buf, len);
  return len;
}

/* gzip: inflate into out (at most cap bytes); the length, or SIZE_MAX when it is not whole gzip. */
static size_t gunzip(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
  z_stream z = {0};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return SIZE_MAX;
  z.next_in = (uint8_t *)in;
  z.avail_in = (uInt)len;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  int rc = inflate(&z, Z_FINISH);
  size_t n = z.total_out;
  inflateEnd(&z);
  return rc == Z_STREAM_END ? n : SIZE_MAX;
}

static size_t gzip(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
  z_stream z = {0};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return SIZE_MAX;
  z.next_in = (uint8_t *)in;
  z.avail_in = (uInt)len;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  int rc = deflate(&z, Z_FINISH);
  size_t n = z.total_out;
  deflateEnd(&z);
  return rc == Z_STREAM_END ? n : SIZE_MAX;
}

/* A new input from input `from` into buf (MAX_LEN bytes); its length. */
static size_t mutate(const input_t *from, uint8_t *buf)
{
  static uint8_t plain[MAX_LEN];
  size_t len = from->size < MAX_LEN ? from->size : MAX_LEN;
  if (len > 2 && from->data[0] == 0x1f && from->data[1] == 0x8b && (rnd() & 1)) {
    size_t n = gunzip(from->data, from->size, plain, sizeof plain);
    if (n != SIZE_MAX) {
      n = mutate_bytes(plain, n);
      size_t z = gzip(plain, n, buf, MAX_LEN);
      if (z != SIZE_MAX) return z;
    }
  }
  memcpy(buf, from->data, len);
  return mutate_bytes(buf, len);
}

/* ---------------------------------------------------------------------------------------------------
   Running
--------------------------------------------------------------------------------------------------- */

static double cpu_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct stats_s {
  double slowest;
  size_t most;                              /* bytes */
  bool   failed;
} stats_t;

static double time_bound;
static size_t mem_bound;
static FILE  *tap;

static void run_one(const uint8_t *data, size_t size, stats_t *st)
{
  cur_data = data;
  cur_size = size;
  mem_peak = mem_now;
  size_t before = mem_now;
  time_t s = (time_t)time_bound;
  struct itimerval timer = {{0, 0}, {s, (suseconds_t)((time_bound - (double)s) * 1e6)}};
  setitimer(ITIMER_PROF, &timer, NULL);
  double t0 = cpu_now();
  LLVMFuzzerTestOneInput(data, size);
  double t = cpu_now() - t0;
  setitimer(ITIMER_PROF, &(struct itimerval){{0, 0}, {0, 0}}, NULL);
  size_t used = mem_peak - before;
  if (t > st->slowest) st->slowest = t;
  if (used > st->most) st->most = used;
  if (used > mem_bound) {
    fprintf(tap, "# %s: allocated %zu MiB at once, over the bound of %zu MiB\n", cur_what, used >> 20,
            mem_bound >> 20);
    save_input();
    st->failed = true;
  }
}

int main(int argc, char **argv)
{
  long runs = getenv("MPROF_FUZZ_RUNS") ? atol(getenv("MPROF_FUZZ_RUNS")) : 2000;
  unsigned long long seed = 1;
  double budget = 20, t_bound = 2;
  long mib = 200;
  char outdir[4096];
  snprintf(outdir, sizeof outdir, "%s", argv[0]);
  char *slash = strrchr(outdir, '/');
  if (slash != NULL) *slash = '\0';
  else snprintf(outdir, sizeof outdir, ".");
  int c;
  bool verbose = false;
  while ((c = getopt(argc, argv, "n:s:t:T:m:o:v")) != -1) {
    switch (c) {
    case 'n': runs = atol(optarg); break;
    case 's': seed = strtoull(optarg, NULL, 0); break;
    case 't': t_bound = atof(optarg); break;
    case 'T': budget = atof(optarg); break;
    case 'm': mib = atol(optarg); break;
    case 'o': snprintf(outdir, sizeof outdir, "%s", optarg); break;
    case 'v': verbose = true; break;
    default:
      fprintf(stderr, "usage: fuzz_%s [-n RUNS] [-s SEED] [-t SECONDS] [-T SECONDS] [-m MIB] [-o DIR] [-v] "
                      "[FILE|DIR...]\n", MPROF_FUZZ_TARGET);
      return 2;
    }
  }
  time_bound = t_bound * (SANITIZED ? 5 : 1);
  const char *factor = getenv("MPROF_FUZZ_TIME_FACTOR");   /* an emulator's slowness (cross-test.sh) */
  if (factor != NULL && strtod(factor, NULL) >= 1) time_bound *= strtod(factor, NULL);
  mem_bound = (size_t)mib << 20;
  rng = seed ? seed : 1;
  snprintf(save_path, sizeof save_path, "%s/%s-failed", outdir, MPROF_FUZZ_TARGET);
  if (optind < argc) {
    for (int i = optind; i < argc; i++) add_path(argv[i]);
  } else {
    const char *dir = getenv("MPROF_FUZZ_CORPUS");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir != NULL ? dir : "tests/fuzz/corpus", MPROF_FUZZ_TARGET);
    add_path(path);
  }
  if (n_inputs == 0) {
    fprintf(stderr, "fuzz_%s: no corpus\n", MPROF_FUZZ_TARGET);
    return 99;
  }

  /* TAP on the real stdout, reports on the real stderr, the commands' output to /dev/null. */
  tap = fdopen(dup(1), "w");
  report_fd = dup(2);
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (tap == NULL || report_fd < 0 || null < 0 || dup2(null, 1) < 0 || (!verbose && dup2(null, 2) < 0))
    return 99;
  close(null);
  setvbuf(tap, NULL, _IOLBF, 0);
#if SANITIZED
  __sanitizer_set_report_fd((void *)(intptr_t)report_fd);
  __sanitizer_set_death_callback(save_input);
  int fatal[] = {SIGABRT, SIGPROF};
#else
  int fatal[] = {SIGABRT, SIGPROF, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#endif
  for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) signal(fatal[i], on_fatal);
  LLVMFuzzerInitialize(&argc, &argv);
  mem_init(mem_bound);

  fprintf(tap, "1..2\n");
  stats_t st = {0};
  for (size_t i = 0; i < n_inputs; i++) {
    snprintf(cur_what, sizeof cur_what, "corpus file %s", inputs[i].name);
    run_one(inputs[i].data, inputs[i].size, &st);
  }
  fprintf(tap, "%s 1 - %s: %zu corpus inputs (slowest %.3f s of CPU, most memory %.1f MiB)\n",
          st.failed ? "not ok" : "ok", MPROF_FUZZ_TARGET, n_inputs, st.slowest, (double)st.most / 1048576);
  bool failed = st.failed;
  st = (stats_t){0};
  static uint8_t buf[MAX_LEN];
  double start = cpu_now();
  long done = 0;
  for (; done < runs && cpu_now() - start < budget; done++) {
    const input_t *from = &inputs[below(n_inputs)];
    snprintf(cur_what, sizeof cur_what, "mutation %ld (seed %llu) of %s", done, seed, from->name);
    size_t len = mutate(from, buf);
    run_one(buf, len, &st);
  }
  fprintf(tap, "%s 2 - %s: %ld of %ld mutated inputs, seed %llu (slowest %.3f s of CPU, most memory %.1f "
          "MiB)%s\n", st.failed ? "not ok" : "ok", MPROF_FUZZ_TARGET, done, runs, seed, st.slowest,
          (double)st.most / 1048576, done < runs ? " (the -T budget ran out first)" : "");
  failed |= st.failed;
  cur_data = NULL;
  for (size_t i = 0; i < n_inputs; i++) free(inputs[i].data);
  free(inputs);
  fclose(tap);
  return failed ? 1 : 0;
}
