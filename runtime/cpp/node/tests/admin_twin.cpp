// seqbus-cpp-admin-twin CONFIG ACCOUNT INSTANCE [live|rewind]: the C++ admin twin (admin_twin.hpp)
// on a bus until SIGTERM, for tests/languages/test_admin_nodes.py.
#include "admin_twin.hpp"

#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  std::string start = argc == 5 ? argv[4] : "live";
  if ((argc != 4 && argc != 5) || (start != "live" && start != "rewind")) {
    std::cerr << "usage: seqbus-cpp-admin-twin CONFIG ACCOUNT INSTANCE [live|rewind]\n";
    return 2;
  }
  seqbus::log_to_stderr("admin-twin-cpp");
  AdminTwin twin;
  seqbus::stop_on_signals(twin);
  seqbus::Options o{argv[1], argv[2], static_cast<std::uint16_t>(std::atoi(argv[3])),
                    start == "rewind" ? seqbus::Start::rewind() : seqbus::Start::live()};
  twin.run(o);
  return 0;
}
