// qualify/json_schema.cc: the JSON Schema subset (type, properties, required, items, enum).
#include "qualify/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "core/json_dump.h"
#include "core/json_text.h"

namespace bakeoff::qualify {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 7> kTypeNames = {"object", "array",   "string", "integer",
                                                        "number", "boolean", "null"};

bool KnownType(std::string_view name) {
  return std::find(kTypeNames.begin(), kTypeNames.end(), name) != kTypeNames.end();
}

// JSON Schema's `integer` is any number with a zero fractional part (1.0 is an integer).
bool HasType(const json& value, std::string_view type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    const double d = value.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

std::string TypeOf(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

std::string Short(const json& value) {
  std::string text = DumpJson(value, -1);
  if (text.size() > 60) text = std::string(Utf8Prefix(text, 57)) + "...";
  return text;
}

std::optional<std::string> Violation(const json& value, const json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return std::nullopt;
    return path + ": the schema accepts nothing here";
  }
  if (!schema.is_object()) return std::nullopt;
  if (auto type = schema.find("type"); type != schema.end()) {
    std::vector<std::string> names;
    if (type->is_string()) names.push_back(type->get<std::string>());
    if (type->is_array()) {
      for (const json& name : *type)
        if (name.is_string()) names.push_back(name.get<std::string>());
    }
    const bool any = std::any_of(names.begin(), names.end(),
                                 [&](const std::string& name) { return HasType(value, name); });
    if (!names.empty() && !any) {
      std::string wanted;
      for (const std::string& name : names) wanted += (wanted.empty() ? "" : " or ") + name;
      return fmt::format("{}: expected {}, got {}", path, wanted, TypeOf(value));
    }
  }
  if (auto options = schema.find("enum"); options != schema.end() && options->is_array()) {
    if (std::find(options->begin(), options->end(), value) == options->end()) {
      return fmt::format("{}: {} is not one of {}", path, Short(value), Short(*options));
    }
  }
  if (value.is_object()) {
    if (auto required = schema.find("required"); required != schema.end() && required->is_array()) {
      for (const json& name : *required) {
        if (name.is_string() && !value.contains(name.get<std::string>())) {
          return fmt::format("{}: required property \"{}\" is missing", path,
                             name.get<std::string>());
        }
      }
    }
    if (auto properties = schema.find("properties");
        properties != schema.end() && properties->is_object()) {
      for (const auto& [name, subschema] : properties->items()) {
        if (auto member = value.find(name); member != value.end()) {
          if (auto why = Violation(*member, subschema, path + "." + name)) return why;
        }
      }
    }
  }
  if (value.is_array()) {
    if (auto items = schema.find("items"); items != schema.end()) {
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (auto why = Violation(value[i], *items, fmt::format("{}[{}]", path, i))) return why;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> Problem(const json& schema, const std::string& path) {
  if (schema.is_boolean()) return std::nullopt;
  if (!schema.is_object()) return path + ": a schema is an object or a boolean";
  if (auto type = schema.find("type"); type != schema.end()) {
    auto bad = [&](const json& name) {
      return !name.is_string() || !KnownType(name.get<std::string>());
    };
    if (type->is_array() ? (type->empty() || std::any_of(type->begin(), type->end(), bad))
                         : bad(*type)) {
      return path +
             ".type: a type name (object, array, string, integer, number, boolean, null) "
             "or a non-empty list of them";
    }
  }
  if (auto options = schema.find("enum"); options != schema.end() && !options->is_array())
    return path + ".enum: a list of values";
  if (auto required = schema.find("required"); required != schema.end()) {
    if (!required->is_array() || std::any_of(required->begin(), required->end(),
                                             [](const json& n) { return !n.is_string(); }))
      return path + ".required: a list of property names";
  }
  if (auto properties = schema.find("properties"); properties != schema.end()) {
    if (!properties->is_object()) return path + ".properties: an object of schemas";
    for (const auto& [name, subschema] : properties->items()) {
      if (auto why = Problem(subschema, path + ".properties." + name)) return why;
    }
  }
  if (auto items = schema.find("items"); items != schema.end()) {
    if (auto why = Problem(*items, path + ".items")) return why;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> SchemaViolation(const json& value, const json& schema) {
  return Violation(value, schema, "$");
}

std::optional<std::string> SchemaProblem(const json& schema) { return Problem(schema, "schema"); }

}  // namespace bakeoff::qualify
