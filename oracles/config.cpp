#include "oracles/config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "oracles/error.hpp"
#include "oracles/spec.hpp"

namespace ttr {
namespace {

std::string known_keys(const LayerSpec& spec) {
  std::string s;
  for (const auto& k : spec.config) s += (s.empty() ? "" : ", ") + k.name;
  return s.empty() ? "none" : s;
}

// Strict decimal/scientific parse of the whole string; returns false on junk.
bool parse_double(const std::string& s, double& out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE && std::isfinite(out);
}

std::string canonical_number(double x) { return fmt::format("{}", x); }  // shortest round-trip

std::string canonical(const LayerSpec& spec, const ConfigKey& key, const std::string& raw) {
  const auto where = fmt::format("config key '{}' of layer '{}'", key.name, spec.name);
  switch (key.type) {
    case KeyType::number:
    case KeyType::integer: {
      double x;
      if (!parse_double(raw, x)) throw InputError(fmt::format("{}: '{}' is not a finite number", where, raw));
      if (key.type == KeyType::integer && std::floor(x) != x)
        throw InputError(fmt::format("{}: '{}' is not an integer", where, raw));
      if (!key.range.contains(x))
        throw InputError(fmt::format("{}: {} is outside {}", where, raw, key.range.str()));
      return canonical_number(x);
    }
    case KeyType::boolean:
      if (raw == "true" || raw == "1") return "true";
      if (raw == "false" || raw == "0") return "false";
      throw InputError(fmt::format("{}: '{}' is not a boolean (true|false)", where, raw));
    case KeyType::choice:
      for (const auto& c : key.choices)
        if (c == raw) return raw;
      throw InputError(fmt::format("{}: '{}' is not one of {}", where, raw, fmt::join(key.choices, "|")));
  }
  return raw;
}

}  // namespace

std::pair<std::string, std::string> parse_assignment(const std::string& s) {
  const auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(fmt::format("--set '{}': expected key=value", s));
  return {s.substr(0, eq), s.substr(eq + 1)};
}

Config Config::make(const LayerSpec& spec, const std::vector<std::pair<std::string, std::string>>& sets) {
  Config c;
  c.layer_ = spec.name;
  for (const auto& [k, v] : sets) {
    const ConfigKey* key = spec.key(k);
    if (!key)
      throw InputError(fmt::format("unknown config key '{}' for layer '{}' (known: {})", k, spec.name,
                                   known_keys(spec)));
    if (c.values_.count(k)) throw InputError(fmt::format("config key '{}' given twice", k));
    c.values_[k] = canonical(spec, *key, v);
  }
  for (const auto& key : spec.config) {
    if (c.values_.count(key.name)) continue;
    if (key.default_value) c.values_[key.name] = canonical(spec, key, *key.default_value);
    else if (key.required)
      throw InputError(fmt::format("layer '{}' needs config key '{}' ({}): pass --set {}=VALUE", spec.name,
                                   key.name, key.doc, key.name));
  }
  return c;
}

double Config::number(const std::string& key) const {
  return std::strtod(text(key).c_str(), nullptr);
}

bool Config::flag(const std::string& key) const { return text(key) == "true"; }

const std::string& Config::text(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) throw std::logic_error("config key '" + key + "' read but not set (layer " + layer_ + ")");
  return it->second;
}

std::string Config::json() const { return nlohmann::json(values_).dump(); }

}  // namespace ttr
