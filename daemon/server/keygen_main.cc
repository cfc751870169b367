// htam-keygen: writes CurveZMQ key pairs for htamd and its clients (docs/operations.md).
//   htam-keygen DIR [NAME...]   writes DIR/NAME.key (secret, 0600) and DIR/NAME.pub per name;
//                               default names: server client
#include <iostream>
#include <string>
#include <vector>

#include "daemon/common/auth.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout
        << "usage: htam-keygen DIR [NAME...]\n"
           "Writes DIR/NAME.key (public + secret, mode 0600) and DIR/NAME.pub for each NAME\n"
           "(default: server client). Put client public keys into the file named by\n"
           "server.curve_authorized_keys; point server.curve_secret_key_file at server.key.\n";
    return argc < 2 ? 2 : 0;
  }
  std::string dir = argv[1];
  std::vector<std::string> names(argv + 2, argv + argc);
  if (names.empty()) names = {"server", "client"};
  for (const auto& name : names) {
    auto keys = htam::auth::GenerateKeyPair();
    if (!keys.ok()) {
      std::cerr << "htam-keygen: " << keys.status().message() << "\n";
      return 1;
    }
    auto st = htam::auth::WriteKeyPair(dir, name, *keys);
    if (!st.ok()) {
      std::cerr << "htam-keygen: " << st.message() << "\n";
      return 1;
    }
    std::cout << name << ": " << keys->public_key << "  (" << dir << "/" << name << ".key, .pub)\n";
  }
  return 0;
}
