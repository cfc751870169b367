// A client of the installed SDK: includes only <htam/client.h>, connects to the endpoint given
// and asks for Hello. Prints "hello: <version>, backends: ..." or "error: <status>"; exits 0 when
// the answer is what the caller expects (argv[2]: "answer", or "unavailable" where no daemon is).
#include <htam/client.h>

#include <cstdio>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: sdk_client ENDPOINT answer|unavailable\n");
    return 2;
  }
  htam::ClientOptions o;
  o.endpoint = argv[1];
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.retries = 0;
  const std::string expect = argv[2];
  // Connect() performs Hello: where no daemon answers, the Status says Unavailable.
  htam::Result<std::unique_ptr<htam::Client>> client = htam::Client::Connect(o);
  if (!client.ok()) {
    std::printf("error: %s\n", client.status().ToString().c_str());
    return expect == "unavailable" && client.status().code() == htam::Status::Code::kUnavailable
               ? 0
               : 1;
  }
  htam::Result<htam::fb::HelloReplyT> hello = (*client)->Hello();
  if (!hello.ok()) {
    std::printf("error: %s\n", hello.status().ToString().c_str());
    return 1;
  }
  std::printf("hello: %s, backends:", hello->server_version.c_str());
  for (const auto& b : hello->backends) std::printf(" %s", b.c_str());
  std::printf("\n");
  return expect == "answer" ? 0 : 1;
}
