/* escape.c - text that comes from elsewhere (a process's control socket, its command line and
 * environment, the names in its profile), made safe to print on a terminal.
 *
 * A terminal acts on control characters: ESC and CSI sequences move the cursor, rewrite the title, set
 * the clipboard (OSC 52) or the font; so a process that answers a `ctl` run by another user, or by root,
 * could make it show something else than what the process said.  Every byte that a terminal might act on
 * is written as an escape instead:
 *   C0 controls and DEL         \t, \n (unless kept), \xHH
 *   C1 controls U+0080..U+009F  \u0085 (UTF-8 encoded; a lone byte 0x80..0x9F is invalid UTF-8)
 *   bidirectional overrides     \u202e (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069: they
 *                               reorder what follows them on the line)
 *   bytes that are not UTF-8    \xHH (overlong forms and surrogates included: some terminals decode them)
 * Printable ASCII, the backslash included, and valid UTF-8 text stay as they are: the escapes are for
 * the reader's safety, not a reversible encoding, and escaping text twice changes nothing.
 *
 * Text written into the SVG pictures (flame, timeline) goes through tool_xml_byte: markup characters as
 * entities, so a name cannot close an element or an attribute.
 */
#include "tool.h"

#include <string.h>

#define ESCAPE_MAX 6                   /* the longest escape of one unit: \u202e */

/* The length of the valid UTF-8 sequence at p (n bytes left) and its code point; 0 when invalid. */
static size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
  size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
  if (len == 0 || len > n) return 0;
  uint32_t c = p[0] & (0x7f >> len);
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    c = c << 6 | (p[i] & 0x3f);
  }
  static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  *cp = c;
  return len;
}

static bool reorders(uint32_t c)
{
  return c == 0x061c || c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069);
}

/* One unit of the text at p (a byte or a UTF-8 sequence) into out (at most ESCAPE_MAX bytes, no NUL):
 * its length in out; *used says how many bytes of p it took. */
static size_t escape_one(const unsigned char *p, size_t n, bool newlines, char *out, size_t *used)
{
  static const char hex[] = "0123456789abcdef";
  uint32_t c;
  *used = 1;
  if (p[0] >= 0x20 && p[0] < 0x7f) {
    out[0] = (char)p[0];
    return 1;
  }
  if (p[0] == '\n' && newlines) {
    out[0] = '\n';
    return 1;
  }
  if (p[0] == '\n' || p[0] == '\t') {
    out[0] = '\\', out[1] = p[0] == '\n' ? 'n' : 't';
    return 2;
  }
  size_t len = p[0] >= 0x80 ? utf8_decode(p, n, &c) : 0;
  if (len == 0) {                                      /* C0, DEL, or not UTF-8 */
    memcpy(out, (const char[]){'\\', 'x', hex[p[0] >> 4], hex[p[0] & 15]}, 4);
    return 4;
  }
  *used = len;
  if (c <= 0x9f || reorders(c)) {
    memcpy(out, (const char[]){'\\', 'u', hex[c >> 12], hex[(c >> 8) & 15], hex[(c >> 4) & 15], hex[c & 15]},
           6);
    return 6;
  }
  memcpy(out, p, len);
  return len;
}

size_t tool_escape(char *out, size_t cap, const void *text, size_t len, bool newlines)
{
  const unsigned char *p = text;
  size_t o = 0, used;
  char unit[ESCAPE_MAX];
  if (cap == 0) return 0;
  for (size_t i = 0; i < len; i += used) {
    size_t k = escape_one(p + i, len - i, newlines, unit, &used);
    if (o + k >= cap) break;                           /* a whole unit or nothing */
    memcpy(out + o, unit, k);
    o += k;
  }
  out[o] = '\0';
  return o;
}

const char *tool_escaped(const char *s, char *buf, size_t len)
{
  tool_escape(buf, len, s, strlen(s), false);
  return buf;
}

void tool_write_escaped(FILE *f, const void *text, size_t len, bool newlines)
{
  const unsigned char *p = text;
  char unit[ESCAPE_MAX];
  for (size_t i = 0, used; i < len; i += used)
    fwrite(unit, 1, escape_one(p + i, len - i, newlines, unit, &used), f);
}

void tool_xml_byte(FILE *f, unsigned char c)
{
  switch (c) {
  case '&': fputs("&amp;", f); break;
  case '<': fputs("&lt;", f); break;
  case '>': fputs("&gt;", f); break;
  case '"': fputs("&quot;", f); break;
  case '\'': fputs("&apos;", f); break;
  default:
    if (c >= 0x20 || c == '\t') fputc(c, f);
  }
}
