// htam-keygen: writes CurveZMQ key pairs for htamd and its clients (docs/operations.md).
//   htam-keygen DIR [NAME...]   writes DIR/NAME.key (secret, 0600) and DIR/NAME.pub per name;
//                               default names: server client
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "base/args.h"
#include "daemon/common/auth.h"

namespace {

const char kUsage[] =
    "usage: htam-keygen DIR [NAME...]\n"
    "Writes DIR/NAME.key (public + secret, mode 0600) and DIR/NAME.pub for each NAME\n"
    "(default: server client). Put client public keys into the file named by\n"
    "server.curve_authorized_keys; point server.curve_secret_key_file at server.key.\n";

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string dir;
  std::vector<std::string> names;
  po::options_description none, words;
  words.add_options()("dir", po::value(&dir))("name", po::value(&names)->composing());
  po::positional_options_description positional;
  positional.add("dir", 1).add("name", -1);
  po::variables_map vm;
  const int rc =
      htam::ParseArgs("htam-keygen", kUsage, std::vector<std::string>(argv + 1, argv + argc), none,
                      words, &vm, std::cout, std::cerr, &positional);
  if (rc >= 0) return rc;
  if (dir.empty()) {
    std::cerr << kUsage;
    return 2;
  }
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
