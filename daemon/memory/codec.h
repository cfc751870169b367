// FlatBuffers values of the store: pack an object-API table into bytes, verify and unpack bytes.
// A value that fails the FlatBuffers verifier is Corruption, never misread.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace htam::memory {

template <typename NativeT>
std::string Encode(const NativeT& obj) {
  using Table = typename NativeT::TableType;
  flatbuffers::FlatBufferBuilder fbb(256);
  fbb.Finish(Table::Pack(fbb, &obj));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

// A verified view of a stored value. LMDB aligns values to 2 bytes only, while FlatBuffers
// structs and vectors of doubles/floats want their natural alignment: a misaligned value is
// copied into an 8-byte aligned buffer first (zero-copy otherwise). Empty when the bytes are not
// a valid table. Valid while the transaction (or the source bytes) and this object live.
template <typename Table>
class FbView {
 public:
  explicit FbView(std::string_view bytes) {
    const char* p = bytes.data();
    if (reinterpret_cast<uintptr_t>(p) % 8 != 0) {
      copy_.reset(new uint64_t[bytes.size() / 8 + 1]);
      std::memcpy(copy_.get(), p, bytes.size());
      p = reinterpret_cast<const char*>(copy_.get());
    }
    flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(p), bytes.size());
    if (v.VerifyBuffer<Table>(nullptr)) t_ = flatbuffers::GetRoot<Table>(p);
  }
  FbView(FbView&&) noexcept = default;
  FbView& operator=(FbView&&) noexcept = default;
  explicit operator bool() const { return t_ != nullptr; }
  const Table* get() const { return t_; }
  const Table* operator->() const { return t_; }
  const Table& operator*() const { return *t_; }

 private:
  std::unique_ptr<uint64_t[]> copy_;
  const Table* t_ = nullptr;
};

template <typename NativeT>
Status Decode(std::string_view bytes, NativeT* out, const char* what) {
  using Table = typename NativeT::TableType;
  FbView<Table> t(bytes);
  if (!t) return Status::Corruption(std::string("malformed ") + what + " record in the store");
  t->UnPackTo(out);
  return Status::OK();
}

}  // namespace htam::memory
