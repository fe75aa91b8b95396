// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one way a reader writes a file it is given with -o (report, export).
// The file is written under a fresh name beside the target (O_CREAT|O_EXCL|
// O_NOFOLLOW, so nothing planted there is followed), fsynced and renamed over
// the target only where the target is a regular file or nothing: a device
// (/dev/null as root), a FIFO, a directory, a symbolic link or one of the
// trace files being read is refused before any work. "-" is stdout. A failure
// anywhere removes the temporary file (docs/reliability.md, 8a-8d).
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace causeway::present {

// Throws UsageError (one line, exit 2) when `path` may not be written as an
// output of reading `inputs` (each input with its -wal and -shm). Writes nothing.
void check_output_target(const std::string& path, const std::vector<std::string>& inputs);

class OutputFile {
 public:
  // Checks the target (check_output_target) and that its folder is writable;
  // the temporary file is created by the first stream().
  OutputFile(std::string path, const std::vector<std::string>& inputs);
  ~OutputFile();  // removes the temporary file unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream();
  // Flushes, fsyncs and renames the file into place (stdout: flushes). Throws
  // Error naming the file and the system's reason on a failed write.
  void commit();
  bool is_stdout() const { return path_ == "-"; }
  // The temporary file's name (empty for stdout and before stream()), for tests.
  const std::string& temporary_path() const { return tmp_path_; }

 private:
  struct Sink;
  void create_temporary();
  std::string path_, tmp_path_;
  bool target_existed_ = false;
  int dir_fd_ = -1;
  std::unique_ptr<Sink> sink_;
};

}  // namespace causeway::present
