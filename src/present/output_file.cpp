// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/output_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>

#include "causeway/common/error.h"

namespace causeway::present {

namespace {

std::string reason(int err) { return std::strerror(err); }

// What a non-regular file is, in the words of the refusal.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[8] = {};
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    // Only the name's uniqueness rests on this; O_EXCL keeps it safe.
    const auto seed = static_cast<uint64_t>(getpid()) * 0x9E3779B97F4A7C15ULL ^ reinterpret_cast<uintptr_t>(&bytes);
    std::memcpy(bytes, &seed, sizeof bytes);
  }
  std::string s;
  for (unsigned char b : bytes) s += kAlphabet[b % (sizeof kAlphabet - 1)];
  return s;
}

}  // namespace

void check_output_target(const std::string& path, const std::vector<std::string>& inputs) {
  if (path == "-") return;
  if (path.empty()) throw UsageError("-o needs a file name ('-' for stdout)");
  if (path.back() == '/')
    throw UsageError("cannot write " + path + ": it names a directory; give a file name ('-' for stdout)");
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // a new file; its folder is checked when the file is created
    throw UsageError("cannot write " + path + ": " + reason(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    const std::string to = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
    throw UsageError("cannot write " + path + ": it is a symbolic link (to " + to +
                     "); name the file itself, or '-' for stdout");
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError("cannot write " + path + ": it is " + kind_of(st.st_mode) +
                     ", not a regular file (give a file name, or '-' for stdout)");
  }
  for (const auto& input : inputs) {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      struct stat in;
      if (stat((input + suffix).c_str(), &in) != 0) continue;
      if (in.st_dev == st.st_dev && in.st_ino == st.st_ino)
        throw UsageError("cannot write " + path + ": it is the trace being read (" + input + suffix +
                         "); write the output elsewhere");
    }
  }
}

// A stream buffer over the temporary file's descriptor that keeps the first
// write error (errno), so the message can say why (No space left on device).
struct OutputFile::Sink : std::streambuf {
  int fd = -1;
  int error = 0;
  char buf[1 << 16];
  std::ostream out{this};

  Sink() { setp(buf, buf + sizeof buf); }
  bool drain() {
    const char* p = pbase();
    while (p < pptr() && error == 0) {
      const ssize_t n = ::write(fd, p, static_cast<size_t>(pptr() - p));
      if (n < 0) {
        if (errno == EINTR) continue;
        error = errno;
        break;
      }
      p += n;
    }
    setp(buf, buf + sizeof buf);
    return error == 0;
  }
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }
};

OutputFile::OutputFile(std::string path, const std::vector<std::string>& inputs) : path_(std::move(path)) {
  check_output_target(path_, inputs);
  if (is_stdout()) return;
  const std::string dir = dir_of(path_);
  dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) throw UsageError("cannot write " + path_ + ": " + dir + ": " + reason(errno));
  if (::faccessat(dir_fd_, ".", W_OK | X_OK, AT_EACCESS) != 0) {
    const int err = errno;
    ::close(dir_fd_);
    dir_fd_ = -1;
    throw UsageError("cannot write " + path_ + ": " + reason(err));
  }
}

// Created when the output is first written, not before the (long) work that
// makes it: an interrupted explain leaves no temporary file.
void OutputFile::create_temporary() {
  struct stat st;
  target_existed_ = lstat(path_.c_str(), &st) == 0;
  const std::string dir = dir_of(path_);
  sink_ = std::make_unique<Sink>();
  // A fresh unpredictable name, created exclusively: a file or symbolic link
  // someone planted beside the target is never opened, let alone followed.
  for (int attempt = 0; attempt < 100 && sink_->fd < 0; ++attempt) {
    const std::string name = "." + base_of(path_) + "." + random_suffix() + ".partial";
    sink_->fd = ::openat(dir_fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (sink_->fd >= 0) {
      tmp_path_ = (dir == "." && path_.find('/') == std::string::npos) ? name : dir + "/" + name;
    } else if (errno != EEXIST) {
      throw UsageError("cannot write " + path_ + ": " + reason(errno));
    }
  }
  if (sink_->fd < 0) throw Error("cannot write " + path_ + ": no free temporary name beside it");
  // Replacing a file keeps its permissions; a new one is the owner's alone
  // (a report holds the traced command lines, as the trace does).
  if (target_existed_) (void)::fchmod(sink_->fd, st.st_mode & 0777);
}

OutputFile::~OutputFile() {
  if (sink_ && sink_->fd >= 0) ::close(sink_->fd);
  if (!tmp_path_.empty()) ::unlinkat(dir_fd_, base_of(tmp_path_).c_str(), 0);
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

std::ostream& OutputFile::stream() {
  if (is_stdout()) return std::cout;
  if (!sink_) create_temporary();
  return sink_->out;
}

void OutputFile::commit() {
  if (is_stdout()) {
    std::cout.flush();
    if (!std::cout) throw Error("writing to stdout failed");
    return;
  }
  stream();  // nothing written yet: an empty file
  if (tmp_path_.empty()) throw Error("writing " + path_ + " failed: already written");
  sink_->out.flush();
  int err = sink_->error;
  if (err == 0 && !sink_->out) err = EIO;
  if (err == 0 && ::fsync(sink_->fd) != 0) err = errno;
  if (::close(sink_->fd) != 0 && err == 0) err = errno;
  sink_->fd = -1;
  if (err != 0) throw Error("writing " + path_ + " failed: " + reason(err));
  // The target is checked again: what appeared there since is never replaced
  // unless it is a regular file, and a target that was absent stays a new name.
  check_output_target(path_, {});
  const std::string tmp = base_of(tmp_path_), base = base_of(path_);
  int rc = -1;
  if (!target_existed_) {
    rc = ::renameat2(dir_fd_, tmp.c_str(), dir_fd_, base.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && errno == EEXIST) throw UsageError("cannot write " + path_ + ": it appeared while writing");
  }
  if (rc != 0 && (target_existed_ || errno == EINVAL || errno == ENOSYS))
    rc = ::renameat(dir_fd_, tmp.c_str(), dir_fd_, base.c_str());
  if (rc != 0) throw Error("writing " + path_ + " failed: " + reason(errno));
  tmp_path_.clear();
  (void)::fsync(dir_fd_);  // the rename itself survives a crash
}

}  // namespace causeway::present
