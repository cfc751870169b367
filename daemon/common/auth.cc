// CURVE key files and the ZAP handler thread of htamd (docs/operations.md, "Security").
#include "daemon/common/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>
#include <functional>
#include <vector>

#include "base/log.h"

namespace htam::auth {

namespace {
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Calls fn with each line of a key file that is neither blank nor a comment ('#'), trimmed, and
// "path:line" for its messages; stops at the first error fn returns.
Status ForEachEntry(
    const std::string& path, const std::string& what,
    const std::function<Status(const std::string& line, const std::string& at)>& fn) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot read " + what + " " + path);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    HTAM_RETURN_IF_ERROR(fn(line, path + ":" + std::to_string(lineno)));
  }
  return Status::OK();
}

Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd < 0) return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
  ::fchmod(fd, mode);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  return Status::OK();
}
}  // namespace

bool IsZ85Key(const std::string& key) {
  if (key.size() != 40) return false;
  std::array<uint8_t, 32> raw{};
  return zmq_z85_decode(raw.data(), key.c_str()) != nullptr;
}

Result<KeyPair> GenerateKeyPair() {
  char pub[41] = {0}, sec[41] = {0};
  if (zmq_curve_keypair(pub, sec) != 0)
    return Status::Unavailable(std::string("cannot generate a CURVE key pair: ") +
                               zmq_strerror(zmq_errno()));
  return KeyPair{pub, sec};
}

Status WriteKeyPair(const std::string& dir, const std::string& name, const KeyPair& keys) {
  ::mkdir(dir.c_str(), 0700);
  std::string header = "# htam CURVE key pair '" + name + "' (Z85). Keep the .key file secret.\n";
  HTAM_RETURN_IF_ERROR(WriteFile(
      dir + "/" + name + ".key",
      header + "public = " + keys.public_key + "\nsecret = " + keys.secret_key + "\n", 0600));
  return WriteFile(
      dir + "/" + name + ".pub",
      "# htam CURVE public key '" + name + "' (Z85)\npublic = " + keys.public_key + "\n", 0644);
}

Result<KeyPair> ReadKeyFile(const std::string& path) {
  KeyPair keys;
  HTAM_RETURN_IF_ERROR(
      ForEachEntry(path, "key file", [&](const std::string& line, const std::string& at) {
        size_t eq = line.find('=');
        if (eq == std::string::npos) return Status::InvalidArgument(at + ": expected 'name = key'");
        std::string name = Trim(line.substr(0, eq)), value = Trim(line.substr(eq + 1));
        if (!IsZ85Key(value)) return Status::InvalidArgument(at + ": not a Z85 key");
        if (name == "public")
          keys.public_key = value;
        else if (name == "secret")
          keys.secret_key = value;
        else
          return Status::InvalidArgument(at + ": unknown entry " + name);
        return Status::OK();
      }));
  if (keys.public_key.empty() && !keys.secret_key.empty()) {
    char pub[41] = {0};
    if (zmq_curve_public(pub, keys.secret_key.c_str()) != 0)
      return Status::InvalidArgument(path + ": cannot derive the public key");
    keys.public_key = pub;
  }
  if (keys.public_key.empty()) return Status::InvalidArgument(path + ": no key found");
  return keys;
}

Result<std::map<std::string, std::string>> LoadAuthorizedKeyRoles(const std::string& path) {
  std::map<std::string, std::string> keys;
  HTAM_RETURN_IF_ERROR(ForEachEntry(
      path, "authorized keys file", [&](const std::string& line, const std::string& at) {
        std::string key = line.substr(0, line.find_first_of(" \t"));
        std::string rest = line.substr(std::min(line.size(), key.size()));
        if (key.rfind("public", 0) == 0 && line.find('=') != std::string::npos) {
          rest = Trim(line.substr(line.find('=') + 1));  // accepts a pasted .pub line
          key = rest.substr(0, 40);
          rest = rest.substr(key.size());
        }
        if (!IsZ85Key(key)) return Status::InvalidArgument(at + ": not a Z85 public key");
        std::string role = "agent";
        const size_t r = rest.find("role=");
        const size_t hash = rest.find('#');
        if (r != std::string::npos && (hash == std::string::npos || r < hash)) {
          role = rest.substr(r + 5, rest.find_first_of(" \t#", r + 5) - (r + 5));
          if (role != "read" && role != "agent" && role != "admin")
            return Status::InvalidArgument(at + ": unknown role '" + role +
                                           "' (read, agent or admin)");
        }
        keys[key] = role;
        return Status::OK();
      }));
  return keys;
}

Result<std::set<std::string>> LoadAuthorizedKeys(const std::string& path) {
  HTAM_ASSIGN_OR_RETURN(auto roles, LoadAuthorizedKeyRoles(path));
  std::set<std::string> keys;
  for (auto& [key, role] : roles) keys.insert(key);
  return keys;
}

ZapHandler::ZapHandler(zmq::context_t* context, std::set<std::string> allowed_keys)
    : context_(context), allowed_(std::move(allowed_keys)) {}

ZapHandler::~ZapHandler() {
  Stop();
}

Status ZapHandler::Start() {
  try {
    socket_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::rep);
    socket_->set(zmq::sockopt::linger, 0);
    socket_->bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot bind the ZAP handler: ") + e.what());
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

void ZapHandler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  socket_.reset();
}

void ZapHandler::Loop() {
  while (!stop_) {
    try {
      zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      while (true) {
        zmq::message_t part;
        if (!socket_->recv(part, zmq::recv_flags::none)) break;
        bool more = part.more();
        parts.push_back(std::move(part));
        if (!more) break;
      }
      // version, request id, domain, address, identity, mechanism, credentials...
      std::string version = parts.size() > 0 ? parts[0].to_string() : "";
      std::string request_id = parts.size() > 1 ? parts[1].to_string() : "";
      std::string address = parts.size() > 3 ? parts[3].to_string() : "?";
      std::string mechanism = parts.size() > 5 ? parts[5].to_string() : "";
      std::string status = "400", text = "refused", user;
      if (version != "1.0") {
        text = "bad ZAP version";
      } else if (mechanism != "CURVE" || parts.size() < 7 || parts[6].size() != 32) {
        text = "CURVE required";
        HTAM_LOG(kWarn, "auth") << "refused client " << address << ": mechanism " << mechanism;
      } else {
        char z85[41] = {0};
        zmq_z85_encode(z85, static_cast<const uint8_t*>(parts[6].data()), 32);
        if (allowed_.count(z85)) {
          status = "200";
          text = "OK";
          user = z85;
          accepted_++;
          HTAM_LOG(kDebug, "auth") << "accepted client " << address << " key " << z85;
        } else {
          refused_++;
          text = "unknown client key";
          HTAM_LOG(kWarn, "auth") << "refused client " << address << ": unknown key " << z85;
        }
      }
      if (status != "200" && text != "unknown client key") refused_++;
      socket_->send(zmq::buffer(std::string("1.0")), zmq::send_flags::sndmore);
      socket_->send(zmq::buffer(request_id), zmq::send_flags::sndmore);
      socket_->send(zmq::buffer(status), zmq::send_flags::sndmore);
      socket_->send(zmq::buffer(text), zmq::send_flags::sndmore);
      socket_->send(zmq::buffer(user), zmq::send_flags::sndmore);
      socket_->send(zmq::message_t(), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      HTAM_LOG(kError, "auth") << "ZAP handler: " << e.what();
    }
  }
}

}  // namespace htam::auth
