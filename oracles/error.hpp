// Errors a user can cause. Each carries one line that names the culprit (file,
// tensor, key); the CLI prints it on stderr and exits with code 2 (docs/design.md).
#pragma once

#include <stdexcept>
#include <string>

namespace ttr {

// Bad input: a file, tensor, shape, dtype, value or config key the user supplied.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ttr
