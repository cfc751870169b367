// Per-step rows of a session (session_steps.h).
#include "daemon/memory/session_steps.h"

#include <algorithm>
#include <vector>

#include "daemon/memory/codec.h"

namespace htam::memory {
namespace {

constexpr size_t kRowBytes = 10;  // direction (8, big-endian), status (1), flags (1)
constexpr uint8_t kRaisedBest = 1;

std::string EncodeRow(const SessionStep& s) {
  std::string v;
  lmdb::AppendBE(&v, s.direction_id, 8);
  v.push_back(static_cast<char>(static_cast<uint8_t>(s.status)));
  v.push_back(static_cast<char>(s.raised_best ? kRaisedBest : 0));
  return v;
}

}  // namespace

std::string SessionStepKey(uint64_t session_id, uint32_t step) {
  std::string k;
  lmdb::AppendBE(&k, session_id, 8);
  lmdb::AppendBE(&k, step, 4);
  return k;
}

Status PutSessionStep(Txn& t, uint64_t session_id, uint32_t step, const SessionStep& s) {
  return t.Put(Db::kSessionSteps, SessionStepKey(session_id, step), EncodeRow(s));
}

Status ForEachSessionStep(const Txn& t, const fb::Session& s, uint32_t from,
                          const std::function<bool(uint32_t, const SessionStep&)>& fn) {
  // The lists of a record from before the rows.
  const uint32_t listed = s.history() ? s.history()->size() : 0;
  for (uint32_t i = from; i < listed; ++i) {
    SessionStep st;
    st.direction_id = s.history()->Get(i);
    if (s.last_status() && i < s.last_status()->size())
      st.status = static_cast<fb::OutcomeStatus>(s.last_status()->Get(i));
    if (s.path_steps())
      st.raised_best =
          std::find(s.path_steps()->begin(), s.path_steps()->end(), i) != s.path_steps()->end();
    if (!fn(i, st)) return Status::OK();
  }
  Status bad;
  HTAM_RETURN_IF_ERROR(t.Scan(
      Db::kSessionSteps, KeyU64(s.id()),
      [&](std::string_view k, std::string_view v) {
        if (k.size() != 12 || v.size() != kRowBytes) {
          bad = Status::Corruption("malformed step row of session " + std::to_string(s.id()));
          return false;
        }
        SessionStep st;
        st.direction_id = DecodeU64(v);
        st.status = static_cast<fb::OutcomeStatus>(static_cast<uint8_t>(v[8]));
        st.raised_best = (static_cast<uint8_t>(v[9]) & kRaisedBest) != 0;
        return fn(DecodeU32(k, 8), st);
      },
      SessionStepKey(s.id(), std::max(from, listed))));
  return bad;
}

Status LoadSessionSteps(const Txn& t, fb::SessionT* s) {
  std::string_view v;
  Status st = t.Get(Db::kSessions, KeyU64(s->id), &v);
  if (st.IsNotFound()) return Status::OK();  // not stored (yet): nothing to add
  HTAM_RETURN_IF_ERROR(st);
  FbView<fb::Session> view(v);
  if (!view) return Status::Corruption("malformed session record in the store");
  s->history.clear();
  s->last_status.clear();
  s->path_steps.clear();
  return ForEachSessionStep(t, *view, 0, [&](uint32_t step, const SessionStep& row) {
    s->history.push_back(row.direction_id);
    s->last_status.push_back(row.status);
    if (row.raised_best) s->path_steps.push_back(step);
    return true;
  });
}

Status PutSessionMovingSteps(Txn& t, fb::SessionT s) {
  for (uint32_t i = 0; i < s.history.size(); ++i) {
    SessionStep row;
    row.direction_id = s.history[i];
    if (i < s.last_status.size()) row.status = s.last_status[i];
    row.raised_best = std::find(s.path_steps.begin(), s.path_steps.end(), i) != s.path_steps.end();
    HTAM_RETURN_IF_ERROR(PutSessionStep(t, s.id, i, row));
  }
  // Rows past the lists (a shorter record replacing a longer one) would be read as its steps.
  std::vector<std::string> stale;
  HTAM_RETURN_IF_ERROR(t.Scan(
      Db::kSessionSteps, KeyU64(s.id),
      [&](std::string_view k, std::string_view) {
        stale.emplace_back(k);
        return true;
      },
      SessionStepKey(s.id, static_cast<uint32_t>(s.history.size()))));
  for (const auto& k : stale) HTAM_RETURN_IF_ERROR(t.Del(Db::kSessionSteps, k));
  s.history.clear();
  s.last_status.clear();
  s.path_steps.clear();
  return t.Put(Db::kSessions, KeyU64(s.id), Encode(s));
}

}  // namespace htam::memory
