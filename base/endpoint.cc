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

std::string BindableEndpoint(const std::string& endpoint, bool* ipv6) {
  *ipv6 = false;
  if (endpoint.rfind("tcp://", 0) != 0) return endpoint;
  const std::string rest = endpoint.substr(6);
  if (!rest.empty() && rest[0] == '[') {
    *ipv6 = true;  // ZeroMQ binds an IPv6 address only with ZMQ_IPV6 set
    return endpoint;
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.substr(0, colon) == "localhost")
    return "tcp://127.0.0.1" + rest.substr(colon);  // a bind takes addresses and interfaces only
  return endpoint;
}

}  // namespace htam
