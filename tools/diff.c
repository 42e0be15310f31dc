#include "tool.h"
int cmd_diff(int argc, char **argv) { (void)argc, (void)argv; return tool_error("not yet"); }
