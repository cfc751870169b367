// The in-memory table of per-transition policy facts (see transition_table.h).
#include "daemon/memory/transition_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "daemon/memory/policy.h"
#include "daemon/memory/stats.h"

namespace htam::memory {
namespace {

constexpr uint32_t kTableMagic = 0x48545442;  // "HTTB"
constexpr uint32_t kTableFormat = 3;          // 3: rows carry trust and no-change flags

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <typename T>
bool Take(std::string_view* in, T* v) {
  if (in->size() < sizeof *v) return false;
  std::memcpy(v, in->data(), sizeof *v);
  in->remove_prefix(sizeof *v);
  return true;
}

bool FitsU32(uint64_t x) {
  return x <= std::numeric_limits<uint32_t>::max();
}

}  // namespace

void TransitionTable::Add(const fb::TransitionRecord& r, size_t key_dim) {
  const uint64_t id = r.id();
  if (id == 0) return;
  if (rows_.size() < id) rows_.resize(id);
  Row& row = rows_[id - 1];
  if (!(row.flags & kPresent)) ++present_;
  Fill(r, key_dim, &row);
  NoteParent(row);
  NoteSession(row);
}

void TransitionTable::NoteSession(const Row& row) {
  if (!sessions_ || !row.session_id || (row.flags & kFallback)) return;
  std::vector<float>& after = session_after_[row.session_id];
  if (after.size() <= row.step) after.resize(size_t(row.step) + 1, 0.f);
  auto status = static_cast<fb::OutcomeStatus>(row.status);
  after[row.step] = IsSuccess(status, Gain(row))
                        ? row.speedup_after
                        : 0.f;
}

double TransitionTable::Gain(const Row& row) {
  if (row.flags & kNoChange) return 0.0;
  return StepGain(static_cast<fb::OutcomeStatus>(row.status), row.speedup_before,
                  row.speedup_after);
}

double TransitionTable::FutureGain(const Row& row, int horizon) const {
  if (horizon <= 0 || (row.flags & kFallback)) return 0;
  auto it = session_after_.find(row.session_id);
  if (it == session_after_.end() || row.step >= it->second.size()) return 0;
  const std::vector<float>& after = it->second;
  const float own = after[row.step];
  if (own <= 0) return 0;  // the step did not succeed: it enabled nothing
  float best = own;
  const size_t end = std::min(after.size(), size_t(row.step) + 1 + size_t(horizon));
  for (size_t s = size_t(row.step) + 1; s < end; ++s) best = std::max(best, after[s]);
  return std::log(double(best) / double(own));
}

void TransitionTable::NoteParent(const Row& row) {
  if (!row.learned_strategy_id || !row.strategies || (row.flags & kFallback)) return;
  uint64_t parent = pool_[row.strategies_at];
  if (parent != row.learned_strategy_id) parent_.emplace(row.learned_strategy_id, parent);
}

void TransitionTable::Fill(const fb::TransitionRecord& r, size_t key_dim, Row* out) {
  Row& row = *out;
  row = Row();
  row.flags = kPresent;
  if (r.verified()) row.flags |= kVerified;
  if (r.vouched()) row.flags |= kVouched;
  if (r.no_change()) row.flags |= kNoChange;
  if (r.state() && r.state()->vector() && r.state()->vector()->size() == key_dim)
    row.flags |= kKeyOk;
  row.session_id = r.session_id();
  row.learned_strategy_id = r.learned_strategy_id();
  row.status = static_cast<uint8_t>(r.status());
  row.speedup_before = r.speedup_before();
  row.speedup_after = r.speedup_after();
  row.step = r.step();
  bool fits = FitsU32(r.direction_id());
  row.direction_id = static_cast<uint32_t>(r.direction_id());
  if (r.history()) {
    size_t n = r.history()->size(), from = n > kHistory ? n - kHistory : 0;
    for (size_t i = from; i < n; ++i) {
      fits = fits && FitsU32(r.history()->Get(i));
      row.history[row.history_size++] = static_cast<uint32_t>(r.history()->Get(i));
    }
  }
  std::string_view backend = r.backend() ? r.backend()->string_view() : std::string_view();
  auto b = std::find(backends_.begin(), backends_.end(), backend);
  if (b == backends_.end()) {
    if (backends_.size() > std::numeric_limits<uint8_t>::max()) {
      fits = false;
    } else {
      backends_.emplace_back(backend);
      b = backends_.end() - 1;
    }
  }
  if (b != backends_.end()) row.backend = static_cast<uint8_t>(b - backends_.begin());
  size_t ns = r.strategy_ids() ? r.strategy_ids()->size() : 0;
  size_t np = r.passed_over_ids() ? r.passed_over_ids()->size() : 0;
  if (ns > std::numeric_limits<uint16_t>::max() || np > std::numeric_limits<uint16_t>::max() ||
      !FitsU32(pool_.size() + ns + np))
    fits = false;
  if (fits && ns + np) {
    row.strategies_at = static_cast<uint32_t>(pool_.size());
    row.strategies = static_cast<uint16_t>(ns);
    row.passed = static_cast<uint16_t>(np);
    if (ns) pool_.insert(pool_.end(), r.strategy_ids()->begin(), r.strategy_ids()->end());
    if (np) pool_.insert(pool_.end(), r.passed_over_ids()->begin(), r.passed_over_ids()->end());
  }
  if (!fits) {
    Row fallback;
    fallback.flags = kPresent | kFallback | (row.flags & (kKeyOk | kVerified | kVouched | kNoChange));
    row = fallback;
  }
}

const TransitionTable::Row* TransitionTable::Find(uint64_t id) const {
  if (id == 0 || id > rows_.size()) return nullptr;
  const Row& row = rows_[id - 1];
  return (row.flags & kPresent) ? &row : nullptr;
}

std::string TransitionTable::Compare(const fb::TransitionRecord& r, size_t key_dim) const {
  const Row* row = Find(r.id());
  if (!row) return "no row";
  TransitionTable one;
  Row want;
  one.Fill(r, key_dim, &want);
  if ((row->flags & ~kFallback) != (want.flags & ~kFallback)) return "flags differ";
  if (row->flags & kFallback || want.flags & kFallback)
    return (row->flags & kFallback) == (want.flags & kFallback) ? "" : "fallback differs";
  if (row->session_id != want.session_id) return "session differs";
  if (row->learned_strategy_id != want.learned_strategy_id) return "learned strategy differs";
  if (row->direction_id != want.direction_id) return "direction differs";
  if (row->step != want.step) return "step differs";
  if (row->status != want.status) return "status differs";
  if (std::memcmp(&row->speedup_before, &want.speedup_before, sizeof(float)) != 0 ||
      std::memcmp(&row->speedup_after, &want.speedup_after, sizeof(float)) != 0)
    return "speedups differ";
  if (Backend(*row) != one.Backend(want)) return "backend differs";
  if (row->history_size != want.history_size ||
      !std::equal(row->history, row->history + row->history_size, want.history))
    return "history differs";
  if (row->strategies != want.strategies ||
      !std::equal(Strategies(*row), Strategies(*row) + row->strategies, one.Strategies(want)))
    return "strategies differ";
  if (row->passed != want.passed ||
      !std::equal(PassedOver(*row), PassedOver(*row) + row->passed, one.PassedOver(want)))
    return "passed-over strategies differ";
  return "";
}

size_t TransitionTable::bytes() const {
  size_t b = rows_.capacity() * sizeof(Row) + pool_.capacity() * sizeof(uint64_t);
  for (const auto& s : backends_) b += s.capacity() + sizeof s;
  // A node (key, vector, next pointer) per session, its bucket pointer, its speedups.
  for (const auto& [session, after] : session_after_)
    b += sizeof(session) + sizeof(after) + 2 * sizeof(void*) + after.capacity() * sizeof(float);
  return b;
}

void TransitionTable::Clear() {
  rows_.clear();
  rows_.shrink_to_fit();
  pool_.clear();
  pool_.shrink_to_fit();
  backends_.clear();
  parent_.clear();
  session_after_.clear();
  present_ = 0;
}

std::string TransitionTable::Serialize() const {
  std::string out;
  out.reserve(32 + rows_.size() * sizeof(Row) + pool_.size() * 8);
  Put(&out, kTableMagic);
  Put(&out, kTableFormat);
  Put(&out, static_cast<uint32_t>(sizeof(Row)));
  Put(&out, static_cast<uint32_t>(backends_.size()));
  Put(&out, static_cast<uint64_t>(rows_.size()));
  Put(&out, static_cast<uint64_t>(pool_.size()));
  out.append(reinterpret_cast<const char*>(rows_.data()), rows_.size() * sizeof(Row));
  out.append(reinterpret_cast<const char*>(pool_.data()), pool_.size() * sizeof(uint64_t));
  for (const auto& b : backends_) {
    Put(&out, static_cast<uint32_t>(b.size()));
    out.append(b);
  }
  return out;
}

Status TransitionTable::Deserialize(std::string_view in, TransitionTable* out) {
  uint32_t magic = 0, format = 0, row_size = 0, nb = 0;
  uint64_t nrows = 0, npool = 0;
  if (!Take(&in, &magic) || !Take(&in, &format) || !Take(&in, &row_size) || !Take(&in, &nb) ||
      !Take(&in, &nrows) || !Take(&in, &npool))
    return Status::Corruption("transition table: truncated header");
  if (magic != kTableMagic || format != kTableFormat || row_size != sizeof(Row))
    return Status::Corruption("transition table: unknown format");
  if (nrows > in.size() / sizeof(Row) || npool > in.size() / sizeof(uint64_t) ||
      nrows * sizeof(Row) + npool * sizeof(uint64_t) > in.size())
    return Status::Corruption("transition table: truncated");
  TransitionTable t(out->sessions_);
  t.rows_.resize(nrows);
  if (nrows) std::memcpy(t.rows_.data(), in.data(), nrows * sizeof(Row));
  in.remove_prefix(nrows * sizeof(Row));
  t.pool_.resize(npool);
  if (npool) std::memcpy(t.pool_.data(), in.data(), npool * sizeof(uint64_t));
  in.remove_prefix(npool * sizeof(uint64_t));
  for (uint32_t i = 0; i < nb; ++i) {
    uint32_t len = 0;
    if (!Take(&in, &len) || len > in.size())
      return Status::Corruption("transition table: truncated backends");
    t.backends_.emplace_back(in.substr(0, len));
    in.remove_prefix(len);
  }
  if (!in.empty()) return Status::Corruption("transition table: trailing bytes");
  for (const Row& r : t.rows_) {
    if (!(r.flags & kPresent)) continue;
    ++t.present_;
    if (!(r.flags & kFallback) && r.backend >= t.backends_.size())
      return Status::Corruption("transition table: bad backend index");
    if (r.history_size > kHistory || uint64_t{r.strategies_at} + r.strategies + r.passed > npool)
      return Status::Corruption("transition table: bad row");
    t.NoteParent(r);
    t.NoteSession(r);
  }
  *out = std::move(t);
  return Status::OK();
}

}  // namespace htam::memory
