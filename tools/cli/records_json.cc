// HTG records <-> JSON through one generic mapper driven by the reflection schema of
// schema/htg.fbs (embedded, schema/bfbs.h): a record is packed and its table walked field by
// field, and JSON is read back into a table built field by field, then unpacked. Field names and
// order are the schema's, enums are written by name. The few places where the JSON differs from
// that plain dump are explicit steps in the per-record functions at the bottom ("Compat:").
#include "tools/cli/records_json.h"

#include <flatbuffers/reflection.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <vector>

#include "htam/schema/bfbs.h"

namespace htam::cli {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;
using flatbuffers::ReadScalar;
using flatbuffers::uoffset_t;
using reflection::BaseType;

const reflection::Schema& Schema() {
  static const reflection::Schema* schema = [] {
    auto b = fb::HtgBinarySchema();
    flatbuffers::Verifier v(b.data(), b.size());
    if (!reflection::VerifySchemaBuffer(v)) throw std::logic_error("embedded htg.bfbs is corrupt");
    return reflection::GetSchema(b.data());
  }();
  return *schema;
}

const reflection::Object& Object(int index) {
  return *Schema().objects()->Get(index);
}
const reflection::Object& Object(const char* name) {
  const auto* o = Schema().objects()->LookupByKey((std::string("htam.fb.") + name).c_str());
  if (!o) throw std::logic_error(std::string("no table ") + name + " in htg.bfbs");
  return *o;
}

// Fields in declaration order (the schema keeps them sorted by name).
std::vector<const reflection::Field*> Fields(const reflection::Object& o) {
  std::vector<const reflection::Field*> f(o.fields()->begin(), o.fields()->end());
  std::sort(f.begin(), f.end(), [](auto* a, auto* b) { return a->id() < b->id(); });
  return f;
}

const reflection::Enum* EnumOf(const reflection::Type& t, BaseType scalar) {
  return flatbuffers::IsInteger(scalar) && t.index() >= 0 ? Schema().enums()->Get(t.index())
                                                          : nullptr;
}
std::string ShortName(const reflection::Enum& e) {
  std::string n = e.name()->str();
  return n.substr(n.rfind('.') + 1);
}

// Compat: the names written for enum values the schema does not know ("Status9", "Bottleneck7";
// a session state other than Closed is "Open").
std::string UnknownEnumName(const reflection::Enum& e, int64_t v) {
  std::string n = ShortName(e);
  if (n == "SessionState") return "Open";
  if (n == "OutcomeStatus") n = "Status";
  return n + std::to_string(v);
}

// ---------------------------------------------------------------- table -> JSON

Json ScalarJson(BaseType t, const uint8_t* p, const reflection::Enum* e) {
  int64_t i = 0;
  switch (t) {
    case BaseType::Bool: return ReadScalar<uint8_t>(p) != 0;
    case BaseType::Byte: i = ReadScalar<int8_t>(p); break;
    case BaseType::UByte: i = ReadScalar<uint8_t>(p); break;
    case BaseType::Short: i = ReadScalar<int16_t>(p); break;
    case BaseType::UShort: i = ReadScalar<uint16_t>(p); break;
    case BaseType::Int: i = ReadScalar<int32_t>(p); break;
    case BaseType::UInt: return ReadScalar<uint32_t>(p);
    case BaseType::Long: i = ReadScalar<int64_t>(p); break;
    case BaseType::ULong: return ReadScalar<uint64_t>(p);
    case BaseType::Float: return ReadScalar<float>(p);
    case BaseType::Double: return ReadScalar<double>(p);
    default: throw std::logic_error("not a scalar type");
  }
  if (!e) return i;
  for (const auto* v : *e->values())
    if (v->value() == i) return v->name()->str();
  return UnknownEnumName(*e, i);
}

Json StructJson(const reflection::Object& o, const uint8_t* p) {
  Json j = Json::object();
  for (const auto* f : Fields(o)) {
    const auto* t = f->type();
    const uint8_t* fp = p + f->offset();
    j[f->name()->str()] = t->base_type() == BaseType::Obj
                              ? StructJson(Object(t->index()), fp)
                              : ScalarJson(t->base_type(), fp, EnumOf(*t, t->base_type()));
  }
  return j;
}

Json TableJson(const reflection::Object& o, const flatbuffers::Table& t);

// One element of a vector, or a field's value, at p (offsets already followed for Obj/String).
Json ElementJson(BaseType bt, const reflection::Type& type, const uint8_t* p) {
  if (bt == BaseType::String) return reinterpret_cast<const flatbuffers::String*>(p)->str();
  if (bt == BaseType::Obj) {
    const auto& o = Object(type.index());
    return o.is_struct() ? StructJson(o, p)
                         : TableJson(o, *reinterpret_cast<const flatbuffers::Table*>(p));
  }
  return ScalarJson(bt, p, EnumOf(type, bt));
}

Json TableJson(const reflection::Object& o, const flatbuffers::Table& t) {
  Json j = Json::object();
  for (const auto* f : Fields(o)) {
    const auto& type = *f->type();
    const BaseType bt = type.base_type();
    const std::string name = f->name()->str();
    const uint8_t* p = t.GetAddressOf(f->offset());
    if (bt == BaseType::Vector) {
      Json a = Json::array();  // absent: []
      if (p) {
        p += ReadScalar<uoffset_t>(p);
        const BaseType et = type.element();
        const bool obj = et == BaseType::Obj;
        if (obj && Object(type.index()).is_struct())
          throw std::logic_error("vectors of structs are not mapped");
        const size_t size =
            obj || et == BaseType::String ? sizeof(uoffset_t) : flatbuffers::GetTypeSize(et);
        const uint32_t n = ReadScalar<uoffset_t>(p);
        const uint8_t* d = p + sizeof(uoffset_t);
        for (uint32_t i = 0; i < n; ++i) {
          const uint8_t* e = d + i * size;
          if (obj || et == BaseType::String) e += ReadScalar<uoffset_t>(e);
          a.push_back(ElementJson(et, type, e));
        }
      }
      j[name] = std::move(a);
    } else if (bt == BaseType::String) {
      j[name] = p ? ElementJson(bt, type, p + ReadScalar<uoffset_t>(p)) : Json("");
    } else if (bt == BaseType::Obj) {
      const auto& sub = Object(type.index());
      if (sub.is_struct()) {
        // An absent struct is written as all zeros.
        std::vector<uint8_t> zero(sub.bytesize(), 0);
        j[name] = StructJson(sub, p ? p : zero.data());
      } else {
        j[name] = p ? ElementJson(bt, type, p + ReadScalar<uoffset_t>(p)) : Json(nullptr);
      }
    } else if (flatbuffers::IsScalar(bt)) {
      // An absent scalar is the schema default.
      uint8_t def[8] = {};
      if (!p) {
        if (flatbuffers::IsFloat(bt)) {
          if (bt == BaseType::Float)
            flatbuffers::WriteScalar<float>(def, static_cast<float>(f->default_real()));
          else
            flatbuffers::WriteScalar<double>(def, f->default_real());
        } else {
          flatbuffers::WriteScalar<int64_t>(def, f->default_integer());  // little-endian: low bytes
        }
        p = def;
      }
      j[name] = ScalarJson(bt, p, EnumOf(type, bt));
    } else {
      throw std::logic_error("field " + name + ": unions are not mapped");
    }
  }
  return j;
}

template <typename T>
Json RecordJson(const char* table, const T& record) {
  FlatBufferBuilder fbb;
  fbb.Finish(T::TableType::Pack(fbb, &record));
  return TableJson(Object(table),
                   *flatbuffers::GetRoot<flatbuffers::Table>(fbb.GetBufferPointer()));
}

// ---------------------------------------------------------------- JSON -> table

// "OutcomeStatus" -> "outcome status", for messages.
std::string Words(const std::string& camel) {
  std::string w;
  for (char c : camel) {
    if (std::isupper(static_cast<unsigned char>(c)) && !w.empty()) w += ' ';
    w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return w;
}

int64_t EnumValue(const reflection::Enum& e, const Json& j) {
  const std::string n = j.get<std::string>();  // names only, as written
  // Compat: a session state other than "Closed" reads as Open.
  if (ShortName(e) == "SessionState") return n == "Closed" ? 1 : 0;
  for (const auto* v : *e.values())
    if (v->name()->str() == n) return v->value();
  throw std::invalid_argument("unknown " + Words(ShortName(e)) + " \"" + n + "\"");
}

// Writes the scalar j (the field's C++ type, nlohmann's checks) at p.
void PutScalar(BaseType t, const reflection::Enum* e, const Json& j, uint8_t* p) {
  if (e) return PutScalar(t, nullptr, Json(EnumValue(*e, j)), p);
  switch (t) {
    case BaseType::Bool: return flatbuffers::WriteScalar<uint8_t>(p, j.get<bool>() ? 1 : 0);
    case BaseType::Byte: return flatbuffers::WriteScalar(p, j.get<int8_t>());
    case BaseType::UByte: return flatbuffers::WriteScalar(p, j.get<uint8_t>());
    case BaseType::Short: return flatbuffers::WriteScalar(p, j.get<int16_t>());
    case BaseType::UShort: return flatbuffers::WriteScalar(p, j.get<uint16_t>());
    case BaseType::Int: return flatbuffers::WriteScalar(p, j.get<int32_t>());
    case BaseType::UInt: return flatbuffers::WriteScalar(p, j.get<uint32_t>());
    case BaseType::Long: return flatbuffers::WriteScalar(p, j.get<int64_t>());
    case BaseType::ULong: return flatbuffers::WriteScalar(p, j.get<uint64_t>());
    case BaseType::Float: return flatbuffers::WriteScalar(p, j.get<float>());
    case BaseType::Double: return flatbuffers::WriteScalar(p, j.get<double>());
    default: throw std::logic_error("not a scalar type");
  }
}

// The bytes of a struct from j: missing fields are 0; j must be an object.
void PutStruct(const reflection::Object& o, const Json& j, uint8_t* p) {
  if (!j.is_object()) (void)j.value("", 0);  // throws nlohmann's type_error (as before)
  for (const auto* f : Fields(o)) {
    auto it = j.find(f->name()->str());
    if (it == j.end() || it->is_null()) continue;
    const auto* t = f->type();
    if (t->base_type() == BaseType::Obj)
      PutStruct(Object(t->index()), *it, p + f->offset());
    else
      PutScalar(t->base_type(), EnumOf(*t, t->base_type()), *it, p + f->offset());
  }
}

uoffset_t BuildTable(FlatBufferBuilder& fbb, const reflection::Object& o, const Json& j);

// A vector field from the array j; returns its offset.
uoffset_t BuildVector(FlatBufferBuilder& fbb, const reflection::Type& type, const Json& j) {
  if (!j.is_array()) (void)j.get<std::vector<int>>();  // throws nlohmann's type_error (as before)
  const BaseType et = type.element();
  const size_t n = j.size();
  if (et == BaseType::String || et == BaseType::Obj) {
    std::vector<uoffset_t> offs(n);
    for (size_t i = 0; i < n; ++i) {
      if (et == BaseType::String) {
        offs[i] = fbb.CreateString(j[i].get<std::string>()).o;
      } else {
        const auto& sub = Object(type.index());
        if (sub.is_struct()) throw std::logic_error("vectors of structs are not mapped");
        // Compat (as before): an element that is not an object is a default record.
        offs[i] = BuildTable(fbb, sub, j[i].is_object() ? j[i] : Json::object());
      }
    }
    fbb.StartVector(n, sizeof(uoffset_t));
    for (size_t i = n; i-- > 0;) fbb.PushElement(Offset<void>(offs[i]));
    return fbb.EndVector(n);
  }
  const size_t size = flatbuffers::GetTypeSize(et);
  std::vector<uint8_t> bytes(n * size);
  const reflection::Enum* e = EnumOf(type, et);
  for (size_t i = 0; i < n; ++i) PutScalar(et, e, j[i], bytes.data() + i * size);
  fbb.StartVector(n, size);
  fbb.PushBytes(bytes.data(), bytes.size());
  return fbb.EndVector(n);
}

// A table from the object j: missing or null fields are absent (the schema default); unknown keys
// are ignored; a wrong type throws.
uoffset_t BuildTable(FlatBufferBuilder& fbb, const reflection::Object& o, const Json& j) {
  const auto fields = Fields(o);
  std::vector<uoffset_t> offs(fields.size(), 0);
  std::vector<const Json*> vals(fields.size(), nullptr);
  for (size_t i = 0; i < fields.size(); ++i) {
    auto it = j.find(fields[i]->name()->str());
    if (it != j.end() && !it->is_null()) vals[i] = &*it;
  }
  // Strings, vectors and sub-tables first: they cannot be built inside the table.
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& type = *fields[i]->type();
    const Json* v = vals[i];
    if (type.base_type() == BaseType::String && v) {
      offs[i] = fbb.CreateString(v->get<std::string>()).o;
    } else if (type.base_type() == BaseType::Vector && v) {
      offs[i] = BuildVector(fbb, type, *v);
    } else if (type.base_type() == BaseType::Obj && !Object(type.index()).is_struct()) {
      // Compat (as before): a sub-record that is not an object is left out.
      if (v && v->is_object()) offs[i] = BuildTable(fbb, Object(type.index()), *v);
    } else if (type.base_type() == BaseType::Union || type.base_type() == BaseType::UType) {
      throw std::logic_error("unions are not mapped");
    }
  }
  const uoffset_t start = fbb.StartTable();
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& f = *fields[i];
    const auto& type = *f.type();
    const BaseType bt = type.base_type();
    if (offs[i]) {
      fbb.AddOffset(f.offset(), Offset<void>(offs[i]));
    } else if (bt == BaseType::Obj && Object(type.index()).is_struct()) {
      // Structs are always written: missing fields (or the whole struct) are zeros.
      const auto& sub = Object(type.index());
      std::vector<uint8_t> bytes(sub.bytesize(), 0);
      if (vals[i]) PutStruct(sub, *vals[i], bytes.data());
      fbb.Align(sub.minalign());
      fbb.PushBytes(bytes.data(), bytes.size());
      fbb.TrackField(f.offset(), fbb.GetSize());
    } else if (flatbuffers::IsScalar(bt) && vals[i]) {
      const size_t size = flatbuffers::GetTypeSize(bt);
      uint8_t bytes[8] = {};
      PutScalar(bt, EnumOf(type, bt), *vals[i], bytes);
      fbb.Align(size);
      fbb.PushBytes(bytes, size);
      fbb.TrackField(f.offset(), fbb.GetSize());
    }
  }
  return fbb.EndTable(start);
}

// Fills *out from the object j through the table `table`; errors become InvalidArgument.
template <typename T, typename Check>
Status RecordFromJson(const char* what, const char* table, const Json& j, T* out, Check&& check) {
  if (!j.is_object()) return Status::InvalidArgument(std::string(what) + " must be a JSON object");
  try {
    FlatBufferBuilder fbb;
    fbb.Finish(Offset<void>(BuildTable(fbb, Object(table), j)));
    *out = T();
    flatbuffers::GetRoot<typename T::TableType>(fbb.GetBufferPointer())->UnPackTo(out);
    check(j, out);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("bad ") + what + " record: " + e.what());
  }
  return Status::OK();
}

void Require(bool ok, const char* message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

std::string StatusName(fb::OutcomeStatus s) {
  const char* n = fb::EnumNameOutcomeStatus(s);
  return n && *n ? n : "Status" + std::to_string(static_cast<int>(s));
}
std::string BottleneckName(fb::Bottleneck b) {
  const char* n = fb::EnumNameBottleneck(b);
  return n && *n ? n : "Bottleneck" + std::to_string(static_cast<int>(b));
}

double SuccessRate(const fb::GainStats& s) {
  return s.uses() ? double(s.successes()) / s.uses() : 0.0;
}
double MeanGain(const fb::GainStats& s) {
  return s.uses() ? s.sum_gain() / s.uses() : 0.0;
}

// ---------------------------------------------------------------- the records

Json ToJson(const fb::GainStats& s) {
  return StructJson(Object("GainStats"), reinterpret_cast<const uint8_t*>(&s));
}

Json ToJson(const fb::DirectionT& d) {
  return RecordJson("Direction", d);
}

Json ToJson(const fb::StrategyT& s, bool with_embedding) {
  Json j = RecordJson("Strategy", s);
  // Compat: the embedding is written only on request, and then last.
  Json embedding = std::move(j["embedding"]);
  j.erase("embedding");
  if (with_embedding) j["embedding"] = std::move(embedding);
  return j;
}

Json ToJson(const fb::TransitionRecordT& r, bool with_vector) {
  Json j = RecordJson("TransitionRecord", r);
  // Compat: the state vector is written only on request.
  if (!with_vector && j["state"].is_object()) j["state"].erase("vector");
  return j;
}

Json ToJson(const fb::TransitionEdgeT& e) {
  return RecordJson("TransitionEdge", e);
}

Json ToJson(const fb::TaskT& t) {
  // Compat: null baselines (possible only in a hand-made TaskT) are skipped, not packed.
  if (std::any_of(t.baselines.begin(), t.baselines.end(), [](const auto& b) { return !b; })) {
    fb::TaskT copy(t);
    std::erase_if(copy.baselines, [](const auto& b) { return !b; });
    return RecordJson("Task", copy);
  }
  return RecordJson("Task", t);
}

Json ToJson(const fb::CandidateT& c) {
  return RecordJson("Candidate", c);
}
Json ToJson(const fb::SessionT& s) {
  Json j = RecordJson("Session", s);
  // Compat: the measured class (appended to the schema) is written only when there is one, so
  // that a session without it exports as before.
  if (s.measured_bottleneck == fb::Bottleneck::Unknown) j.erase("measured_bottleneck");
  // Likewise the owner (appended): sessions opened without CURVE have none.
  if (s.owner.empty()) j.erase("owner");
  return j;
}
Json ToJson(const fb::StoreMetaT& m) {
  return RecordJson("StoreMeta", m);
}

Status FromJson(const Json& j, fb::DirectionT* d) {
  return RecordFromJson("direction", "Direction", j, d, [](const Json&, fb::DirectionT* d) {
    Require(!d->name.empty(), "a direction needs a name");  // Compat: required field
  });
}

Status FromJson(const Json& j, fb::StrategyT* s) {
  return RecordFromJson("strategy", "Strategy", j, s, [](const Json&, fb::StrategyT* s) {
    Require(!s->name.empty(), "a strategy needs a name");  // Compat: required field
  });
}

Status FromJson(const Json& j, fb::TransitionRecordT* r) {
  return RecordFromJson("transition", "TransitionRecord", j, r,
                        [](const Json& j, fb::TransitionRecordT* r) {
                          // Compat: a missing status is Unverified (the schema default is Ok).
                          auto it = j.find("status");
                          if (it == j.end() || it->is_null())
                            r->status = fb::OutcomeStatus::Unverified;
                        });
}

Status FromJson(const Json& j, fb::TaskT* t) {
  return RecordFromJson("task", "Task", j, t, [](const Json&, fb::TaskT* t) {
    Require(!t->name.empty(), "a task needs a name");  // Compat: required field
  });
}

Status FromJson(const Json& j, fb::CandidateT* c) {
  return RecordFromJson("candidate", "Candidate", j, c, [](const Json&, fb::CandidateT* c) {
    Require(!c->hash.empty(), "a candidate needs a hash");  // Compat: required field
  });
}

Status FromJson(const Json& j, fb::SessionT* s) {
  return RecordFromJson("session", "Session", j, s, [](const Json&, fb::SessionT*) {});
}

}  // namespace htam::cli
