/* empty_object.c - a shared object with one function and nothing run at load: preloaded after plain
 * mimalloc, it measures what any one more preloaded object costs a trivial program in peak RSS (the
 * loader's work, the object's headers and one page of each segment), the floor under the stopped
 * library's own cost in bench/run.sh's "program that does nothing". */
int empty_object_function(void);

int empty_object_function(void) { return 0; }
