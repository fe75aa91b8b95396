// SPDX-License-Identifier: Apache-2.0
#pragma once
// `trace -- cmd`: the command is forked stopped on a pipe, so that it is in
// the traced set (and its exec is seen) before its first instruction runs.
#include <sys/types.h>

#include <string>
#include <vector>

namespace causeway::agent {

class TracedCommand {
 public:
  explicit TracedCommand(const std::vector<std::string>& argv);
  ~TracedCommand();  // a command still running gets SIGTERM and is reaped
  TracedCommand(const TracedCommand&) = delete;
  TracedCommand& operator=(const TracedCommand&) = delete;
  void start();
  bool poll_exit();
  pid_t pid() const { return pid_; }
  // The file execvp will run (argv[0], or its first hit on PATH); "" if none.
  const std::string& executable() const { return executable_; }
  int exit_code() const { return exit_code_; }  // 128 + signal when killed

 private:
  pid_t pid_ = -1;
  std::string executable_;
  int go_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace causeway::agent
