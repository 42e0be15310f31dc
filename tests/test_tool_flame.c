/* test_tool_flame.c - `mimalloc-prof flame` and `folded` rendered and used in headless Chromium:
 * the SVG loads without script errors; the widest frame of each level is the frame of the
 * heaviest in-use stack; hovering shows name, amount and share; a click zooms and "Reset zoom" returns;
 * Search (answered through the page's prompt) highlights and measures the matches.  A PNG screenshot of
 * a real program's flame graph is left in tests/flame-screenshot.png for people to look at. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chromium.h"
#include "cxx_names.h"
#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

#define MiB (1024 * 1024)

/* The heaviest in-use stack is main;alpha;grow (3 MiB of 6.5). */
static const tool_stack_t stacks[] = {
  {"main;alpha;grow", 4 * MiB, 3 * MiB},
  {"main;beta;gamma", 2 * MiB, 1 * MiB},
  {"main;alpha;operator new(unsigned long)", 2 * MiB, 2 * MiB},
  {"[dropped]", 1 * MiB, MiB / 2},
};

static char *eval_str(chromium_t *c, const char *js)
{
  json_t *v = chromium_eval(c, js);
  ck_assert_msg(json_is_string(v), "%s: not a string", js);
  char *s = strdup(json_string_value(v));
  json_decref(v);
  return s;
}

static double eval_num(chromium_t *c, const char *js)
{
  json_t *v = chromium_eval(c, js);
  ck_assert_msg(json_is_number(v), "%s: not a number", js);
  double d = json_number_value(v);
  json_decref(v);
  return d;
}

/* The centre of the (first visible) frame named `name`, in page coordinates. */
static void centre(chromium_t *c, const char *name, double *x, double *y)
{
  char js[512];
  snprintf(js, sizeof js, "(function(){const g=[...document.querySelectorAll('g.f')].find(g=>g.getAttribute('data-n')"
                          "==='%s'&&g.style.display!=='none');const r=g.querySelector('rect').getBoundingClientRect();"
                          "return [r.x+r.width/2,r.y+r.height/2];})()", name);
  json_t *v = chromium_eval(c, js);
  *x = json_number_value(json_array_get(v, 0));
  *y = json_number_value(json_array_get(v, 1));
  json_decref(v);
}

/* The flame graph of a synthetic profile of `n` stacks, written to dir/heap.svg (dir: a new temporary
 * directory); its path in svg. */
static void flame_of(const tool_stack_t *st, size_t n, char *dir, size_t dir_len, char *svg, size_t svg_len)
{
  char prof[PATH_MAX + 16];
  tool_tmpdir(dir, dir_len);
  snprintf(prof, sizeof prof, "%s/p.pb.gz", dir);
  snprintf(svg, svg_len, "%s/heap.svg", dir);
  tool_synthetic(prof, st, n, 0x555500000000ull, NULL);
  probe_run_t r = tool_run((const char *const[]){"flame", "-o", svg, prof, NULL}, NULL);
  probe_assert_exit0(&r, "mimalloc-prof flame");
  probe_run_free(&r);
}

START_TEST(tool_flame_in_chromium)
{
  char dir[PATH_MAX], svg[PATH_MAX + 16];
  flame_of(stacks, 4, dir, sizeof dir, svg, sizeof svg);
  chromium_t c;
  chromium_open_file(&c, dir, svg, 1200, 700);

  /* The widest frame of each level, by rendered width. */
  static const char *const heaviest[] = {"all", "main", "alpha", "grow"};
  for (int d = 0; d < 4; d++) {
    char js[512];
    snprintf(js, sizeof js, "[...document.querySelectorAll('g.f[data-d=\"%d\"]')].map(g=>[g.querySelector('rect')"
                            ".getBoundingClientRect().width,g.getAttribute('data-n')]).sort((a,b)=>b[0]-a[0])[0][1]", d);
    char *name = eval_str(&c, js);
    ck_assert_msg(strcmp(name, heaviest[d]) == 0, "level %d: widest is %s, not %s", d, name, heaviest[d]);
    free(name);
  }
  /* Labels are drawn in frames wide enough for them. */
  char *label = eval_str(&c, "[...document.querySelectorAll('g.f')].find(g=>g.getAttribute('data-n')==='alpha')"
                             ".querySelector('text').textContent");
  ck_assert_str_eq(label, "alpha");
  free(label);

  /* Hover. */
  double x, y;
  centre(&c, "grow", &x, &y);
  chromium_move(&c, x, y);
  char *details = eval_str(&c, "document.getElementById('details').textContent");
  ck_assert_str_eq(details, "grow: 3.00 MiB (46.15% of all)");
  free(details);

  /* Zoom to alpha: it fills the width, beta is hidden; Reset zoom brings it back. */
  centre(&c, "alpha", &x, &y);
  chromium_click(&c, x, y);
  double w = eval_num(&c, "[...document.querySelectorAll('g.f')].find(g=>g.getAttribute('data-n')==='alpha')"
                          ".querySelector('rect').getBoundingClientRect().width");
  ck_assert_double_eq_tol(w, 1180, 0.5);
  char *beta = eval_str(&c, "[...document.querySelectorAll('g.f')].find(g=>g.getAttribute('data-n')==='beta')"
                            ".style.display");
  ck_assert_str_eq(beta, "none");
  free(beta);
  json_t *reset = chromium_eval(&c, "(function(){const r=document.getElementById('reset').getBoundingClientRect();"
                                    "return [r.x+r.width/2,r.y+r.height/2];})()");
  chromium_click(&c, json_number_value(json_array_get(reset, 0)), json_number_value(json_array_get(reset, 1)));
  json_decref(reset);
  beta = eval_str(&c, "[...document.querySelectorAll('g.f')].find(g=>g.getAttribute('data-n')==='beta').style.display");
  ck_assert_str_eq(beta, "");
  free(beta);

  /* Search "^g": grow and gamma, 4 of 6.5 MiB. */
  c.prompt_answer = "^g";
  json_t *s = chromium_eval(&c, "(function(){const r=document.getElementById('search').getBoundingClientRect();"
                                "return [r.x+r.width/2,r.y+r.height/2];})()");
  chromium_click(&c, json_number_value(json_array_get(s, 0)), json_number_value(json_array_get(s, 1)));
  json_decref(s);
  ck_assert_int_eq(c.dialogs, 1);
  char *matched = eval_str(&c, "document.getElementById('matched').textContent");
  ck_assert_str_eq(matched, "Matched: 61.5% (4.00 MiB), 2 frames");
  free(matched);
  ck_assert_msg(c.errors[0] == '\0', "errors:\n%s", c.errors);
  chromium_stop(&c);
}
END_TEST

/* The label of the frame named `name` as the file has it (what a viewer without script shows); NULL
 * when there is no such frame.  malloc'd. */
static char *file_label(const char *svg, const char *name)
{
  char key[128];
  snprintf(key, sizeof key, "<g class=\"f\" data-n=\"%s\"", name);
  const char *g = strstr(svg, key), *t = g != NULL ? strstr(g, "<text ") : NULL;
  if (t == NULL || (t = strchr(t, '>')) == NULL) return NULL;
  const char *end = strstr(++t, "</text>");
  return end != NULL ? strndup(t, (size_t)(end - t)) : NULL;
}

/* Frame labels are in the file, so an <img> of it (no script runs there) shows them: each frame wide
 * enough for three 7.2-pixel characters and its margins has its name, or the name's first characters and
 * "..", exactly as the script fits them; Chromium loads the file as an image of the drawing's size. */
START_TEST(tool_flame_labels_without_script)
{
  static const tool_stack_t narrow[] = {
    {"main;alpha;grow", 1000 * MiB, 1000 * MiB},
    {"main;beta_with_a_name_long_enough_to_be_cut_in_its_frame", 40 * MiB, 40 * MiB},
    {"main;tiny", 1 * MiB, 1 * MiB},
  };
  char dir[PATH_MAX], svg[PATH_MAX + 16], html[PATH_MAX + 16];
  flame_of(narrow, 3, dir, sizeof dir, svg, sizeof svg);
  char *text = tool_file_text(svg);
  /* widths (1180 px of drawing): all and main 1180, alpha and grow 1133, beta 45.3 (5 characters: 3 and
   * ".."), tiny 1.13 (no room for three characters) */
  static const char *const want[][2] = {{"all", "all"}, {"main", "main"}, {"alpha", "alpha"}, {"grow", "grow"},
                                        {"beta_with_a_name_long_enough_to_be_cut_in_its_frame", "bet.."},
                                        {"tiny", ""}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char *l = file_label(text, want[i][0]);
    ck_assert_msg(l != NULL && strcmp(l, want[i][1]) == 0, "%s: label '%s', want '%s'", want[i][0],
                  l ? l : "(no frame)", want[i][1]);
    free(l);
  }
  free(text);

  snprintf(html, sizeof html, "%s/img.html", dir);
  FILE *f = fopen(html, "w");
  ck_assert_ptr_nonnull(f);
  fputs("<!doctype html><img id=\"flame\" src=\"heap.svg\">\n", f);
  ck_assert_int_eq(fclose(f), 0);
  chromium_t c;
  chromium_open_file(&c, dir, html, 1300, 400);
  ck_assert_double_eq_tol(eval_num(&c, "document.getElementById('flame').naturalWidth"), 1200, 0.5);
  /* The image drawn into a canvas (the page and the file share an origin: Chromium runs with
   * --allow-file-access-from-files): black pixels, the labels' colour, in the row of "all" (y 56..72),
   * none in a frame's row without labels' room; the frames' own colours are warm, never near black. */
  static const char dark[] =
    "(function(y){const i=document.getElementById('flame'),c=document.createElement('canvas');"
    "c.width=i.naturalWidth;c.height=i.naturalHeight;const x=c.getContext('2d');x.drawImage(i,0,0);"
    "const d=x.getImageData(0,y,c.width,16).data;let n=0;"
    "for(let k=0;k<d.length;k+=4)n+=d[k]<60&&d[k+1]<60&&d[k+2]<60&&d[k+3]>200;return n;})";
  char js[sizeof dark + 16];
  snprintf(js, sizeof js, "%s(57)", dark);
  ck_assert_double_gt(eval_num(&c, js), 20);
  ck_assert_msg(c.errors[0] == '\0', "errors:\n%s", c.errors);
  chromium_stop(&c);
}
END_TEST

/* A real program's flame graph, loaded without errors, its screenshot kept for review. */
START_TEST(tool_flame_screenshot)
{
  char dir[PATH_MAX], prof[PATH_MAX + 16], svg[PATH_MAX + 16], png[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  snprintf(prof, sizeof prof, "%s/p.pb.gz", dir);
  snprintf(svg, sizeof svg, "%s/heap.svg", dir);
  probe_run_t r = tool_run((const char *const[]){"run", "-r", "1", "-o", prof, probe_getenv("MPROF_TEST_SYM_PROG"), NULL},
                           NULL);
  probe_assert_exit0(&r, "mimalloc-prof run");
  probe_run_free(&r);
  r = tool_run((const char *const[]){"flame", "--title", "sym_prog: bytes in use at exit", "-o", svg, prof, NULL}, NULL);
  probe_assert_exit0(&r, "mimalloc-prof flame");
  probe_run_free(&r);
  chromium_t c;
  chromium_open_file(&c, dir, svg, 1200, 560);
  snprintf(png, sizeof png, "%s/flame-screenshot.png", probe_getenv("MPROF_TEST_OUTDIR"));
  chromium_screenshot(&c, png);
  ck_assert_msg(c.errors[0] == '\0', "errors:\n%s", c.errors);
  /* The heaviest in-use stack of sym_prog is the pool's (64 x 16 KiB of 1.25 MiB): its innermost frame,
   * Pool::make, is the widest frame of its level. */
  char *name = eval_str(&c, "(function(){const f=[...document.querySelectorAll('g.f')];"
                            "const m=f.find(g=>g.getAttribute('data-n').startsWith('shapes::Pool<>::make'));"
                            "const d=m.getAttribute('data-d');return f.filter(g=>g.getAttribute('data-d')===d)"
                            ".sort((a,b)=>b.querySelector('rect').getBoundingClientRect().width-"
                            "a.querySelector('rect').getBoundingClientRect().width)[0].getAttribute('data-n');})()");
  ck_assert_str_eq(name, "shapes::Pool<>::make");         /* short by default (shortname.c) */
  free(name);
  chromium_stop(&c);
}
END_TEST

Suite *tool_flame_suite(void)
{
  Suite *s = suite_create("tool_flame");
  TCase *tc = tcase_create("tool_flame");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, tool_flame_in_chromium);
  tcase_add_test(tc, tool_flame_screenshot);
  tcase_add_test(tc, tool_flame_labels_without_script);
  suite_add_tcase(s, tc);
  return s;
}

#endif
