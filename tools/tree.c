#include "tool.h"
int cmd_tree(int argc, char **argv) { (void)argc, (void)argv; return tool_error("not yet"); }
