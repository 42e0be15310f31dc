/* dlopen_probe.c - a C program (no C++ runtime at start-up) that dlopens a C++ library and runs it;
 * prints "plugin N" with the plugin's result.  Tests run it under LD_PRELOAD. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
  if (argc < 2) return 2;
  void *h = dlopen(argv[1], RTLD_NOW);
  if (h == NULL) {
    printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  int (*run)(void) = (int (*)(void))dlsym(h, "cxx_plugin_run");
  printf("plugin %d\n", run != NULL ? run() : -1);
  return 0;
}
