/* shortname.c - C++ function names as the terminal reports and flame labels show them by default:
 * template arguments elided to "<>", parameter lists and trailing qualifiers (const, &) left out, and a
 * return type in front (function templates have one) dropped, as heaptrack and jeprof shorten them:
 *   std::__cxx11::basic_string<char, ...>& std::vector<std::__cxx11::basic_string<...>, ...>
 *       ::emplace_back<unsigned long&, char>(unsigned long&, char&&)
 * becomes std::vector<>::emplace_back<>.  Operator names keep their symbols (operator<<, operator(),
 * operator new), "(anonymous namespace)" and lambda names ("{lambda(int)#1}") are kept whole, and so
 * are the library's own bracketed names.  The profile keeps the full names (symbolize writes them);
 * --full-names shows them; --fold, --fold-alloc, --focus and --ignore match them.
 *
 * One pass over the name, and one over the result: linear in its length, whatever a hostile profile
 * names its functions (unbalanced brackets drop what follows them; an empty result keeps the name).
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

static bool starts(const char *s, const char *prefix)
{
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The length of the operator's symbol at s (after "operator"): "()", "[]", "<<=", "->*", ...; 0 for a
 * named one (new, delete, a conversion). */
static size_t operator_symbol(const char *s)
{
  if (starts(s, "()") || starts(s, "[]")) return 2;
  size_t n = strspn(s, "+-*/%^&|~!=<>,");
  return n;
}

/* Takes trailing qualifiers (" const", " volatile", "&", "&&") and spaces off out[0..*n). */
static void trim_qualifiers(char *out, size_t *n)
{
  for (bool again = true; again && *n > 0;) {
    again = false;
    static const char *const quals[] = {" const", " volatile", "&", " "};
    for (size_t q = 0; q < sizeof quals / sizeof quals[0]; q++) {
      size_t k = strlen(quals[q]);
      if (*n >= k && memcmp(out + *n - k, quals[q], k) == 0) {
        *n -= k;
        again = true;
      }
    }
  }
}

char *tool_short_name(const char *name)
{
  size_t len = strlen(name);
  /* nothing to shorten (C names), or a name of the library's ("[mimalloc-prof: dropped (memory)]") */
  if (strpbrk(name, "<(") == NULL || name[0] == '[') return NULL;
  /* Each input character makes at most one output character, except an unmatched '<' at the end, which
   * makes "<>": len + 2 bytes hold the result and its NUL. */
  char *out = malloc(len + 2);
  bool *cut_ok = malloc(len + 2);                  /* by output position: a space a return type ends at */
  if (out == NULL || cut_ok == NULL) abort();
  size_t n = 0, angle = 0, paren = 0;
  bool seen_operator = false;
  for (size_t i = 0; i < len;) {
    const char *s = name + i;
    if (angle == 0 && paren == 0) {
      if (starts(s, "(anonymous namespace)")) {
        memcpy(out + n, s, 21);
        memset(cut_ok + n, 0, 21);
        n += 21;
        i += 21;
        continue;
      }
      if (starts(s, "operator") && (i == 0 || strchr(": ~", s[-1]) != NULL)) {
        size_t k = 8 + operator_symbol(s + 8);
        memcpy(out + n, s, k);
        memset(cut_ok + n, 0, k);
        n += k;
        i += k;
        seen_operator = true;
        continue;
      }
      if (*s == '{') {                             /* {lambda(int)#1}, {unnamed type#1}: whole */
        const char *end = strchr(s, '}');
        size_t k = end != NULL ? (size_t)(end - s) + 1 : len - i;
        memcpy(out + n, s, k);
        memset(cut_ok + n, 0, k);
        n += k;
        i += k;
        continue;
      }
    }
    char c = *s;
    if (c == '<' && paren == 0) {
      if (angle++ == 0) {
        out[n] = '<';
        out[n + 1] = '>';
        cut_ok[n] = cut_ok[n + 1] = false;
        n += 2;
      }
    } else if (c == '>' && paren == 0 && angle > 0) {
      angle--;
    } else if (c == '(' && angle == 0) {
      paren++;
    } else if (c == ')' && angle == 0 && paren > 0) {
      paren--;
    } else if (angle == 0 && paren == 0) {
      out[n] = c;
      cut_ok[n] = c == ' ' && !seen_operator;
      n++;
    }
    i++;
  }
  trim_qualifiers(out, &n);
  size_t from = 0;                                  /* after the last space that ends a return type */
  for (size_t k = 0; k < n; k++) {
    if (cut_ok[k]) from = k + 1;
  }
  free(cut_ok);
  if (from >= n) {                                  /* nothing left: keep the name */
    free(out);
    return NULL;
  }
  memmove(out, out + from, n - from);
  out[n - from] = '\0';
  if (strcmp(out, name) == 0) {
    free(out);
    return NULL;
  }
  return out;
}
