// SPDX-License-Identifier: Apache-2.0
#include "traced_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "causeway/common/error.h"

namespace causeway::agent {

namespace {

// execvp's search: a name with a slash is a path, else the first executable
// file of that name on PATH.
std::string find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return {};
}

}  // namespace

TracedCommand::TracedCommand(const std::vector<std::string>& argv) {
  if (!argv.empty()) executable_ = find_executable(argv[0]);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error("pipe: " + std::string(strerror(errno)));
  pid_ = fork();
  if (pid_ < 0) throw Error("fork: " + std::string(strerror(errno)));
  if (pid_ == 0) {
    close(fds[1]);
    char go;
    if (read(fds[0], &go, 1) != 1) _exit(127);  // the tracer gave up
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    signal(SIGINT, SIG_DFL);
    execvp(args[0], args.data());
    std::fprintf(stderr, "causeway: cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(fds[0]);
  go_fd_ = fds[1];
}

TracedCommand::~TracedCommand() {
  if (go_fd_ >= 0) close(go_fd_);
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

void TracedCommand::start() {
  if (write(go_fd_, "g", 1) != 1) throw Error("cannot start the traced command");
  close(go_fd_);
  go_fd_ = -1;
}

bool TracedCommand::poll_exit() {
  if (exited_) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exited_;
}

}  // namespace causeway::agent
