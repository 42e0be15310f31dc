/* alloc_demo.c - a small allocation-heavy program (a word-count hash table and a binary tree) used by the
 * README's main command.  It reports which library serves its malloc and, when libmimalloc-prof is
 * sampling, compares the profiler's estimate of the bytes allocated with what the program requested.
 * It is not linked with the library: it looks the API up with dlsym, so it also runs without it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mimalloc-prof.h"

static unsigned long long requested;   /* bytes this program asked for */

static void *xmalloc(size_t size)
{
  requested += size;
  return malloc(size);
}

struct entry { struct entry *next; char *word; unsigned long count; };
struct node { struct node *left, *right; long key; char payload[48]; };

static struct node *tree_insert(struct node *t, long key)
{
  if (t == NULL) {
    requested += sizeof *t;
    t = calloc(1, sizeof *t);
    t->key = key;
    return t;
  }
  if (key < t->key) t->left = tree_insert(t->left, key);
  else t->right = tree_insert(t->right, key);
  return t;
}

static void tree_free(struct node *t)
{
  if (t == NULL) return;
  tree_free(t->left);
  tree_free(t->right);
  free(t);
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 200000;
  size_t buckets = 4096;
  requested += buckets * sizeof(struct entry *);
  struct entry **table = calloc(buckets, sizeof *table);
  uint64_t x = 88172645463325252u;        /* xorshift64: the same words on every platform */
  unsigned long distinct = 0;
  struct node *tree = NULL;
  for (long i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    char word[24];
    unsigned long w = (unsigned long)(x % 50000);
    int len = snprintf(word, sizeof word, "w%lu", w);
    size_t h = w % buckets;
    struct entry *e = table[h];
    while (e != NULL && strcmp(e->word, word) != 0) e = e->next;
    if (e == NULL) {
      e = xmalloc(sizeof *e);
      e->word = xmalloc((size_t)len + 1);
      memcpy(e->word, word, (size_t)len + 1);
      e->count = 0;
      e->next = table[h];
      table[h] = e;
      distinct++;
    }
    e->count++;
    if (i % 4 == 0) tree = tree_insert(tree, (long)(x >> 20));
  }
  tree_free(tree);
  for (size_t h = 0; h < buckets; h++) {
    while (table[h] != NULL) {
      struct entry *e = table[h];
      table[h] = e->next;
      free(e->word);
      free(e);
    }
  }
  free(table);

  Dl_info info;
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  const char *from = (m != NULL && dladdr(m, &info) && info.dli_fname) ? info.dli_fname : "?";
  printf("alloc_demo: %ld operations, %lu distinct words; malloc served by %s\n", n, distinct, from);

  bool (*stats)(mi_prof_stats_t *, size_t) = (bool (*)(mi_prof_stats_t *, size_t))dlsym(RTLD_DEFAULT, "mi_prof_stats");
  mi_prof_stats_t st;
  if (stats != NULL && stats(&st, sizeof st) && st.sample_rate != 0) {
    printf("alloc_demo: %llu samples at one per %llu bytes; estimated %llu bytes allocated, "
           "requested %llu (%+.1f%%); estimated in use now %llu bytes\n",
           (unsigned long long)st.samples, (unsigned long long)st.sample_rate,
           (unsigned long long)st.alloc_bytes, requested,
           100.0 * ((double)st.alloc_bytes - (double)requested) / (double)requested,
           (unsigned long long)st.inuse_bytes);
  }
  return 0;
}
