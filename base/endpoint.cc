// Loopback test of ZeroMQ endpoint strings (see endpoint.h).
#include "base/endpoint.h"

namespace htam {

bool IsLocalEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string host = endpoint.substr(6);
  // tcp://[::1]:7878, tcp://127.0.0.1:7878, tcp://localhost:7878; an interface name is not local.
  if (host.rfind("[::1]:", 0) == 0) return true;
  host = host.substr(0, host.rfind(':'));
  if (host == "localhost") return true;
  return host.rfind("127.", 0) == 0 && host.find_first_not_of("0123456789.") == std::string::npos;
}

}  // namespace htam
