/* test_tool_flame.c - `mimalloc-prof flame` and `folded` rendered and used in headless Chromium (issue
 * 11.4): the SVG loads without script errors; the widest frame of each level is the frame of the
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

START_TEST(tool_flame_in_chromium)
{
  char dir[PATH_MAX], prof[PATH_MAX + 16], svg[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(prof, sizeof prof, "%s/p.pb.gz", dir);
  snprintf(svg, sizeof svg, "%s/heap.svg", dir);
  tool_synthetic(prof, stacks, 4, 0x555500000000ull, NULL);
  probe_run_t r = tool_run((const char *const[]){"flame", "-o", svg, prof, NULL}, NULL);
  probe_assert_exit0(&r, "mimalloc-prof flame");
  probe_run_free(&r);
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
                            "const m=f.find(g=>g.getAttribute('data-n').startsWith('shapes::Pool<double>::make'));"
                            "const d=m.getAttribute('data-d');return f.filter(g=>g.getAttribute('data-d')===d)"
                            ".sort((a,b)=>b.querySelector('rect').getBoundingClientRect().width-"
                            "a.querySelector('rect').getBoundingClientRect().width)[0].getAttribute('data-n');})()");
  ck_assert_str_eq(name, "shapes::Pool<double>::make(" MPROF_SIZE_T_NAME ")");
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
  suite_add_tcase(s, tc);
  return s;
}

#endif
