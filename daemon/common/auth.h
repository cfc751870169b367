// CURVE authentication of htamd clients: key pair files, the file of allowed client keys, and the
// ZAP handler thread (RFC 27) that accepts known client public keys and refuses the rest.
// Thread-safety: KeyPair/LoadAuthorizedKeys are pure; ZapHandler owns one thread and one socket.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "base/status.h"

namespace htam::auth {

// A CurveZMQ key pair, both keys in Z85 (40 characters).
struct KeyPair {
  std::string public_key;
  std::string secret_key;
};

// A fresh key pair from libzmq (needs libzmq built with CURVE).
Result<KeyPair> GenerateKeyPair();

// Writes NAME.key (public + secret, mode 0600) and NAME.pub (public only) in `dir`.
Status WriteKeyPair(const std::string& dir, const std::string& name, const KeyPair& keys);

// Reads a key file: lines "public = Z85" and (for .key files) "secret = Z85"; '#' comments.
// A .pub file gives only the public key. InvalidArgument on malformed keys.
Result<KeyPair> ReadKeyFile(const std::string& path);

// Reads the allowed client keys: one Z85 public key per line, optionally followed by
// `role=read|agent|admin` (default agent) and a comment; blank lines and '#' lines are skipped.
// A malformed key or an unknown role is an error naming its line.
Result<std::set<std::string>> LoadAuthorizedKeys(const std::string& path);
// The same file as key -> role ("read", "agent" or "admin").
Result<std::map<std::string, std::string>> LoadAuthorizedKeyRoles(const std::string& path);

// True when `key` is 40 characters of the Z85 alphabet that decode to 32 bytes.
bool IsZ85Key(const std::string& key);

// Serves ZAP requests on inproc://zeromq.zap.01 of `context` until Stop(). Every CURVE client
// whose public key is in the allowed set is accepted (its key becomes the ZeroMQ User-Id);
// any other mechanism or key is refused and logged.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t* context, std::set<std::string> allowed_keys);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Binds the ZAP endpoint (before any CURVE socket binds) and starts the thread.
  Status Start();
  void Stop();

  uint64_t accepted() const { return accepted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  void Loop();

  zmq::context_t* context_;
  std::set<std::string> allowed_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace htam::auth
