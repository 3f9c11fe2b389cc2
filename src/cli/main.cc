// The bakeoff binary: parses nothing itself; see cli/cli.h.
#include "cli/cli.h"

int main(int argc, char** argv) { return bakeoff::cli::Main(argc, argv); }
