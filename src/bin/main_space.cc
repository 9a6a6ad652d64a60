// `space`: the server (`space dev`) and the CLI client.
#include "cli/commands.h"

int main(int argc, char** argv) { return space::cli::Main(argc, argv); }
