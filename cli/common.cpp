#include "cli/common.hpp"

#include <filesystem>
#include <set>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "oracles/error.hpp"

namespace ttr::cli {

LoadedInputs load_inputs(const std::string& layer_name, const std::string& path, const std::vector<std::string>& sets) {
  const LayerEntry& layer = find_layer(layer_name);
  io::TensorFile file = io::read_safetensors(path);
  std::vector<std::pair<std::string, std::string>> pairs;
  const auto lay = file.metadata.find("layer");
  const auto cfg = file.metadata.find("config");
  if (lay != file.metadata.end() && lay->second == layer_name && cfg != file.metadata.end()) {
    nlohmann::json j = nlohmann::json::parse(cfg->second, nullptr, false);
    if (!j.is_object())
      throw InputError(fmt::format("{}: metadata 'config' is not a JSON object of strings", path));
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_string())
        throw InputError(fmt::format("{}: metadata 'config' key '{}' is not a string", path, it.key()));
      pairs.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  std::set<std::string> given;
  for (const auto& s : sets) {
    auto kv = parse_assignment(s);
    if (!given.insert(kv.first).second) throw InputError(fmt::format("--set: config key '{}' given twice", kv.first));
    std::erase_if(pairs, [&](const auto& p) { return p.first == kv.first; });  // --set overrides the file
    pairs.push_back(std::move(kv));
  }
  Config config = Config::make(layer.spec, pairs);
  LayerInputs inputs = validate_inputs(layer.spec, file, path);
  return {&layer, std::move(file), std::move(inputs), std::move(config)};
}

void add_set_option(CLI::App& cmd, std::vector<std::string>& sets) {
  cmd.add_option("--set", sets, "config key=value (see `ttrcheck layers --layer L`); repeatable");
}

void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(fmt::format("{}: cannot write: directory '{}' does not exist", path, dir.string()));
  if (fs::is_directory(p, ec)) throw InputError(fmt::format("{}: cannot write: it is a directory", path));
}

}  // namespace ttr::cli
