// SPDX-License-Identifier: Apache-2.0
#pragma once
// Errors are exceptions, caught once at the CLI edge (src/main.cpp), which
// prints the one-line message and exits with the code carried here.
#include <stdexcept>
#include <string>

namespace causeway {

enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitFailure)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad input from the user: flags, times, paths, SQL. Exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, kExitUsage) {}
};

}  // namespace causeway
