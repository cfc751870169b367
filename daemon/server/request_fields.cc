// Reflection walk of a request's fields (request_fields.h).
#include "daemon/server/request_fields.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "base/text.h"
#include "flatbuffers/reflection.h"
#include "htam/schema/bfbs.h"

namespace htam::server {

namespace {

using reflection::BaseType;

const reflection::Schema& Schema() {
  static const reflection::Schema* schema = [] {
    auto b = fb::ProtocolBinarySchema();
    flatbuffers::Verifier v(b.data(), b.size());
    if (!reflection::VerifySchemaBuffer(v))
      throw std::logic_error("embedded protocol.bfbs is corrupt");
    return reflection::GetSchema(b.data());
  }();
  return *schema;
}

std::string ShortName(const reflection::Object& o) {
  std::string n = o.name()->str();
  return n.substr(n.rfind('.') + 1);
}

Status BadString(const std::string& path, std::string_view text) {
  size_t at = 0;
  if (IsValidUtf8(text, &at)) return Status::OK();
  return Status::InvalidArgument("field " + path + " is not valid UTF-8 (byte " +
                                 std::to_string(at) + ")");
}

Status BadNumber(const std::string& path, double v) {
  if (std::isfinite(v)) return Status::OK();
  return Status::InvalidArgument("field " + path + " is not a finite number");
}

Status CheckTable(const reflection::Object& obj, const flatbuffers::Table& table,
                  const std::string& prefix);

Status CheckVector(const reflection::Field& field, const flatbuffers::Table& table,
                   const std::string& path) {
  const auto* vec = flatbuffers::GetFieldAnyV(table, field);
  if (!vec) return Status::OK();
  const BaseType elem = field.type()->element();
  for (flatbuffers::uoffset_t i = 0; i < vec->size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    Status st;
    if (elem == BaseType::String) {
      const auto* s = flatbuffers::GetAnyVectorElemPointer<const flatbuffers::String>(vec, i);
      st = BadString(at, s->string_view());
    } else if (elem == BaseType::Float || elem == BaseType::Double) {
      st = BadNumber(at, flatbuffers::GetAnyVectorElemF(vec, elem, i));
    } else if (elem == BaseType::Obj) {
      const auto& sub = *Schema().objects()->Get(field.type()->index());
      if (sub.is_struct()) continue;  // no floats or strings in this schema's structs
      const auto* t = flatbuffers::GetAnyVectorElemPointer<const flatbuffers::Table>(vec, i);
      st = CheckTable(sub, *t, at);
    }
    if (!st.ok()) return st;
  }
  return Status::OK();
}

Status CheckTable(const reflection::Object& obj, const flatbuffers::Table& table,
                  const std::string& prefix) {
  for (const reflection::Field* field : *obj.fields()) {
    const std::string path = prefix + "." + field->name()->str();
    Status st;
    switch (field->type()->base_type()) {
      case BaseType::String: {
        const auto* s = flatbuffers::GetFieldS(table, *field);
        if (s) st = BadString(path, s->string_view());
        break;
      }
      case BaseType::Float:
      case BaseType::Double: st = BadNumber(path, flatbuffers::GetAnyFieldF(table, *field)); break;
      case BaseType::Obj: {
        const auto& sub = *Schema().objects()->Get(field->type()->index());
        if (sub.is_struct()) break;
        const auto* t = flatbuffers::GetFieldT(table, *field);
        if (t) st = CheckTable(sub, *t, path);
        break;
      }
      case BaseType::Union: {
        const auto* t = flatbuffers::GetFieldT(table, *field);
        if (!t) break;
        const auto& sub = flatbuffers::GetUnionType(Schema(), obj, *field, table);
        // A message body is named by its type alone: "Submit.summary", not "Envelope.body...".
        st = CheckTable(sub, *t, ShortName(sub));
        break;
      }
      case BaseType::Vector: st = CheckVector(*field, table, path); break;
      default: break;
    }
    if (!st.ok()) return st;
  }
  return Status::OK();
}

}  // namespace

Status CheckRequestFields(const fb::Envelope& envelope) {
  const auto* root = Schema().root_table();
  if (!root) return Status::Internal("protocol schema has no root table");
  const auto& table = reinterpret_cast<const flatbuffers::Table&>(envelope);
  return CheckTable(*root, table, ShortName(*root));
}

}  // namespace htam::server
