// INFO-style status text (StatusRequest, `htam status`): sections of `key: value` lines.
// Thread-safety: loop thread only (reads the loop's counters and the client table).
#include "daemon/server/server_impl.h"

namespace htam::server {

std::string Server::StatusText(const std::string& section, const Peer& viewer) {
  std::ostringstream out;
  const int64_t now = NowMs();
  auto want = [&section](const char* s) { return section.empty() || section == s; };
  if (want("server")) {
    out << "# server\n"
        << "version: " << HTAM_VERSION << "\n"
        << "protocol_version: " << static_cast<int>(fb::ProtocolVersion::Current) << "\n"
        << "pid: " << ::getpid() << "\n"
        << "endpoint: " << endpoint_ << "\n"
        << "curve: " << (options_.curve ? "on" : "off") << "\n"
        << "uptime_s: " << (now - started_ms_) / 1000 << "\n"
        << "requests_total: " << requests_total_ << "\n"
        << "errors_total: " << errors_total_ << "\n"
        << "malformed_total: " << malformed_total_ << "\n"
        << "dropped_total: " << dropped_total_ << "\n"
        << "busy_total: " << busy_total_ << "\n"
        << "unread_dropped_total: " << unread_dropped_total_ << "\n"
        << "store_fault: "
        << (store_fault_ == fb::ErrorCode::None ? "none" : fb::EnumNameErrorCode(store_fault_))
        << "\n"
        << "store_faults_total: " << store_faults_total_ << "\n"
        << "records_total: " << records_total_ << "\n"
        << "write_batches: " << write_batches_ << "\n";
    if (zap_)
      out << "auth_accepted: " << zap_->accepted() << "\nauth_refused: " << zap_->refused() << "\n";
    uint64_t refused = 0;
    for (const auto& [reason, r] : refused_handshakes_) refused += r.total;
    out << "handshakes_refused: " << refused << "\n";
    for (const auto& [reason, r] : refused_handshakes_)
      out << "handshakes_refused_" << reason << ": " << r.total << "\n";
    out << "\n";
  }
  if (want("clients")) {
    int active = 0;
    for (auto& [id, c] : clients_)
      if (now - c.last_seen_ms < 60000) active++;
    out << "# clients\n"
        << "known: " << clients_.size() << "\n"
        << "active_last_minute: " << active << "\n";
    int shown = 0;
    for (auto& [id, c] : clients_) {
      if (shown++ >= 32) break;
      out << "client_" << PeerName(id) << ": name=" << (c.name.empty() ? "-" : c.name)
          << " requests=" << c.requests << " errors=" << c.errors
          << " in_flight=" << c.in_flight << " busy=" << c.busy
          << " unread_bytes=" << c.outbox_bytes << " unread_dropped=" << c.unread_dropped
          << " idle_ms=" << now - c.last_seen_ms;
      // Other clients' keys are shown to admins only.
      if (!c.user.empty() && (!enforce_owners_ || viewer.role == "admin" ||
                              viewer.owner == "key:" + c.user))
        out << " key=" << c.user;
      out << "\n";
    }
    out << "\n";
  }
  if (want("memory")) {
    if (services_.memory)
      out << services_.memory->StatusText();
    else
      out << "# memory\nstate: unavailable\n";
    out << "\n";
  }
  if (want("evaluation")) {
#ifdef HTAM_SERVER_HAVE_EVAL
    if (services_.evaluator)
      out << services_.evaluator->StatusText();
    else
      out << "# evaluation\nstate: unavailable\n";
#else
    out << "# evaluation\nstate: not built\n";
#endif
    out << "jobs_in_flight: " << jobs_.size() << "\n"
        << "jobs_total: " << evaluations_total_ << "\n"
        << "results_kept: " << done_.size() << "\n\n";
  }
#ifdef HTAM_SERVER_HAVE_EVAL
  if (want("workers") && services_.evaluator) {
    std::string w = services_.evaluator->WorkersStatusText();
    if (!w.empty()) out << w << "\n";
  }
#endif
  return out.str();
}

}  // namespace htam::server
