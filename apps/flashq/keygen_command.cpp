#include "apps/flashq/keygen_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "shared/curve/curve_keys.h"
#include "shared/error.h"

namespace flashq {
namespace {

// O_EXCL: a key file is never overwritten (that would lock out every peer holding the old key).
// fchmod: the mode is exactly `mode`, whatever the umask.
void write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) throw Error(ErrorCode::kInvalidArgument, path + ": exists; not overwriting a key file");
    throw Error(ErrorCode::kIo, path + ": cannot create: " + std::strerror(errno));
  }
  const bool ok = ::fchmod(fd, mode) == 0 &&
                  ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) throw Error(ErrorCode::kIo, path + ": write failed: " + std::strerror(error));
}

void run_keygen(const std::string& out_prefix) {
  const CurveKeyPair pair = generate_curve_key_pair();
  if (out_prefix.empty()) {
    std::printf("public: %s\nsecret: %s\n", pair.public_key.c_str(), pair.secret_key.c_str());
    return;
  }
  const std::string secret_path = out_prefix + ".key", public_path = out_prefix + ".pub";
  if (::access(public_path.c_str(), F_OK) == 0) {
    throw Error(ErrorCode::kInvalidArgument, public_path + ": exists; not overwriting a key file");
  }
  write_new_file(secret_path, pair.secret_key + "\n", 0600);
  write_new_file(public_path, pair.public_key + "\n", 0644);
  std::printf("public: %s\nsecret_file: %s\npublic_file: %s\n", pair.public_key.c_str(), secret_path.c_str(),
              public_path.c_str());
}

}  // namespace

std::function<void()> add_keygen_command(CLI::App& app) {
  auto out_prefix = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("keygen", "print a new CurveZMQ key pair (for --curve-secret-key and allow-lists)");
  cmd->add_option("--out", *out_prefix,
                  "write PREFIX.key (secret, mode 0600) and PREFIX.pub instead of printing the secret");
  return [cmd, out_prefix] {
    if (*cmd) run_keygen(*out_prefix);
  };
}

}  // namespace flashq
