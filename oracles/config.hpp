// A layer's validated configuration: every key known to the spec, each value
// parsed, range-checked, defaulted. Built from `--set key=value` pairs or from a
// file's metadata; unknown keys and bad values are InputErrors naming the key.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>


namespace ttr {

struct LayerSpec;  // oracles/spec.hpp: kept out of this header so that the
                   // per-tier runner TUs do not recompile when a spec type changes

class Config {
 public:
  // Validates `sets` (key, value-text) against the spec and fills in defaults.
  static Config make(const LayerSpec& spec, const std::vector<std::pair<std::string, std::string>>& sets);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  double number(const std::string& key) const;   // number or integer keys
  bool flag(const std::string& key) const;       // boolean keys
  const std::string& text(const std::string& key) const;  // any key, canonical text
  // Canonical "key=value" pairs of every set or defaulted key (for metadata).
  const std::map<std::string, std::string>& values() const { return values_; }
  std::string json() const;  // {"key": "value", ...}
  // This configuration with the boolean key `key` set to false: what a kernel that
  // ignores the flag computes with (mutant l2norm-backward-skipped).
  Config without_flag(const std::string& key) const {
    Config c = *this;
    c.values_[key] = "false";
    return c;
  }

 private:
  std::string layer_;
  std::map<std::string, std::string> values_;
};

// Parses "key=value" (for --set).
std::pair<std::string, std::string> parse_assignment(const std::string& s);

}  // namespace ttr
