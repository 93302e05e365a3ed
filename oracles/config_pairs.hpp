// Where a layer's config comes from before Config::make validates it: the
// metadata 'config' that `ttrcheck vectors` records in an inputs file (a JSON
// object of strings), overridden key by key by the command line's `--set
// key=value`. Kept apart from config.hpp, which the runner TUs include.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ttr {

// The (key, value-text) pairs for Config::make: the file's recorded config when
// its metadata 'layer' is `layer_name`, then each of `sets` replacing the file's
// value of its key. InputError naming `source` for a metadata 'config' that is not
// a JSON object of strings, naming the argument for a malformed or repeated --set.
std::vector<std::pair<std::string, std::string>> config_pairs(const std::map<std::string, std::string>& metadata,
                                                              const std::string& layer_name,
                                                              const std::vector<std::string>& sets,
                                                              const std::string& source);

}  // namespace ttr
