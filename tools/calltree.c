/* calltree.c - a view's stacks merged into one tree: equal paths share nodes, values add up. */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

/* The index slot of (parent, name), keyed (tool_hash): the keys come from the profile, which must not
 * choose its collisions.  A hash that keeps few bits of the parent puts the nodes of one name into a few
 * hundred slots, and a deep stack of one repeated frame takes time quadratic in its depth. */
static size_t key_slot(uint32_t parent, uint32_t name, size_t cap)
{
  return (size_t)tool_hash(tool_hash_key(), (uint64_t)parent << 32 | name) & (cap - 1);
}

static void index_grow(ctree_t *t)
{
  size_t cap = t->index_cap ? t->index_cap * 2 : 1024;
  uint64_t *index = calloc(cap, sizeof *index);
  if (index == NULL) abort();
  for (size_t i = 1; i < t->n; i++) {
    size_t k = key_slot(t->nodes[i].parent, t->nodes[i].name, cap);
    while (index[k] != 0) k = (k + 1) & (cap - 1);
    index[k] = i;
  }
  free(t->index);
  t->index = index;
  t->index_cap = cap;
}

/* The node for `name` below `parent`, made when there is none.  Node numbers fit 32 bits: a view has
 * fewer than 2^31 frames (view.c), and each frame makes at most one node. */
static uint32_t child(ctree_t *t, uint32_t parent, uint32_t name)
{
  if ((t->n + 1) * 2 > t->index_cap) index_grow(t);
  size_t k = key_slot(parent, name, t->index_cap);
  for (; t->index[k] != 0; k = (k + 1) & (t->index_cap - 1)) {
    const ctree_node_t *n = &t->nodes[t->index[k]];
    if (n->parent == parent && n->name == name) return (uint32_t)t->index[k];
  }
  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 1024;
    t->nodes = realloc(t->nodes, t->cap * sizeof *t->nodes);
    if (t->nodes == NULL) abort();
  }
  if (t->n >= UINT32_MAX) abort();
  uint32_t id = (uint32_t)t->n++;
  ctree_node_t *p = &t->nodes[parent];
  t->nodes[id] = (ctree_node_t){.name = name, .parent = parent, .next_sibling = p->first_child,
                                .depth = p->depth + 1};
  t->nodes[parent].first_child = id;
  if (t->nodes[id].depth > t->max_depth) t->max_depth = t->nodes[id].depth;
  t->index[k] = id;
  return id;
}

static ctree_t *sort_tree;

static int by_value(const void *a, const void *b)
{
  const ctree_node_t *x = &sort_tree->nodes[*(const uint32_t *)a];
  const ctree_node_t *y = &sort_tree->nodes[*(const uint32_t *)b];
  int64_t vx = x->value < 0 ? tool_neg(x->value) : x->value;
  int64_t vy = y->value < 0 ? tool_neg(y->value) : y->value;
  if (vx != vy) return vx < vy ? 1 : -1;
  return x->name < y->name ? -1 : x->name > y->name;
}

/* Re-links every node's children in order of value. */
static void sort_children(ctree_t *t)
{
  uint32_t *kids = malloc(t->n * sizeof *kids);
  if (kids == NULL) abort();
  sort_tree = t;
  for (size_t i = 0; i < t->n; i++) {
    size_t n = 0;
    for (uint32_t c = t->nodes[i].first_child; c != 0; c = t->nodes[c].next_sibling) kids[n++] = c;
    if (n < 2) continue;
    qsort(kids, n, sizeof *kids, by_value);
    t->nodes[i].first_child = kids[0];
    for (size_t k = 0; k < n; k++) t->nodes[kids[k]].next_sibling = k + 1 < n ? kids[k + 1] : 0;
  }
  free(kids);
}

void ctree_build(ctree_t *t, const view_t *v, bool callers)
{
  memset(t, 0, sizeof *t);
  t->cap = 1024;
  t->nodes = calloc(t->cap, sizeof *t->nodes);
  if (t->nodes == NULL) abort();
  t->nodes[0].name = UINT32_MAX;
  t->n = 1;
  for (size_t s = 0; s < v->n_stacks; s++) {
    const view_stack_t *st = &v->stacks[s];
    uint32_t node = 0;
    t->nodes[0].value = tool_add(t->nodes[0].value, st->value);
    t->nodes[0].objects = tool_add(t->nodes[0].objects, st->objects);
    t->nodes[0].var += st->var;
    for (uint32_t k = 0; k < st->depth; k++) {
      node = child(t, node, st->frames[callers ? k : st->depth - 1 - k]);
      t->nodes[node].value = tool_add(t->nodes[node].value, st->value);
      t->nodes[node].objects = tool_add(t->nodes[node].objects, st->objects);
      t->nodes[node].var += st->var;
    }
    t->nodes[node].self = tool_add(t->nodes[node].self, st->value);
  }
  sort_children(t);
}

void ctree_free(ctree_t *t)
{
  free(t->nodes);
  free(t->index);
  memset(t, 0, sizeof *t);
}
