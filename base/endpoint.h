// What a ZeroMQ endpoint string says about who can reach it. Used by the client front and the
// worker endpoint to refuse an unauthenticated bind that other hosts could reach.
// Thread-safety: pure function, safe for concurrent use.
#pragma once

#include <string>

namespace htam {

// True when the endpoint can only be reached from this host: ipc://, inproc://, or tcp:// on
// localhost, [::1] or 127.x.y.z. An interface name is not local.
bool IsLocalEndpoint(const std::string& endpoint);

// The form of `endpoint` ZeroMQ can bind: tcp://localhost:P becomes tcp://127.0.0.1:P (a bind
// reads a name as a network interface); *ipv6 is set for a bracketed IPv6 address
// (tcp://[::1]:P), which needs the socket's ZMQ_IPV6 option.
std::string BindableEndpoint(const std::string& endpoint, bool* ipv6);

}  // namespace htam
