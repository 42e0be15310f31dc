#include "tool.h"
int cmd_flame(int argc, char **argv) { (void)argc, (void)argv; return tool_error("not yet"); }
