/* true_probe.c - true(1) of the architecture being built: exits 0 and does nothing else (no allocation
 * after the library's start).  hazards_no_allocation_not_said runs it where /bin/true is of another
 * architecture (a cross build), into which the library cannot be preloaded. */
int main(void) { return 0; }
