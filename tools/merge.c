#include "tool.h"
int cmd_merge(int argc, char **argv) { (void)argc, (void)argv; return tool_error("not yet"); }
