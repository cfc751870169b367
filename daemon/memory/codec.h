// FlatBuffers values of the store: pack an object-API table into bytes, verify and unpack bytes.
// A value that fails the FlatBuffers verifier is Corruption, never misread.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string>
#include <string_view>

#include "daemon/util/status.h"

namespace htam::memory {

template <typename NativeT>
std::string Encode(const NativeT& obj) {
  using Table = typename NativeT::TableType;
  flatbuffers::FlatBufferBuilder fbb(256);
  fbb.Finish(Table::Pack(fbb, &obj));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

// Zero-copy view of a verified value; nullptr when the bytes are not a valid table.
template <typename Table>
const Table* View(std::string_view bytes) {
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.VerifyBuffer<Table>(nullptr)) return nullptr;
  return flatbuffers::GetRoot<Table>(bytes.data());
}

template <typename NativeT>
Status Decode(std::string_view bytes, NativeT* out, const char* what) {
  using Table = typename NativeT::TableType;
  const Table* t = View<Table>(bytes);
  if (!t) return Status::Corruption(std::string("malformed ") + what + " record in the store");
  t->UnPackTo(out);
  return Status::OK();
}

}  // namespace htam::memory
