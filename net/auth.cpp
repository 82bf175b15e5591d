#include "net/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "engine/core/error.h"

namespace shardlab::net {

namespace {

// OpenSSL's oldest queued error for this thread, as text (the queue is cleared).
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no error reported";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

// OpenSSL wants a valid pointer even for zero bytes (a null HMAC key means "no key" to it).
const uint8_t* data_or_empty(std::span<const uint8_t> s) {
  static const uint8_t kEmpty = 0;
  return s.empty() ? &kEmpty : s.data();
}

void random_bytes(std::span<uint8_t> out) {
  if (out.size() > static_cast<size_t>(INT_MAX) ||
      RAND_bytes(out.data(), static_cast<int>(out.size())) != 1)
    SL_THROW(IoError, "cannot get random bytes from OpenSSL: {}", openssl_error());
}

std::string hex(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// Why short tokens are refused, for the messages.
constexpr const char* kShortTokenWhy =
    "a short token can be guessed offline from one captured handshake, an HMAC over nonces sent "
    "in the clear; make one with `openssl rand -hex 32`";

// What a path that is not a regular file is, for the messages.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "of an unknown kind";
}

// Closes the descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, returning close()'s errno (0 when it succeeded).
  int close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Writes all of `content`; returns 0 or the errno of the failed write.
int write_all(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

Digest sha256(std::span<const uint8_t> data) {
  Digest out{};
  unsigned int len = 0;
  if (EVP_Digest(data_or_empty(data), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != out.size())
    SL_THROW(InternalError, "OpenSSL's SHA-256 failed: {}", openssl_error());
  return out;
}

Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> message) {
  SL_ENFORCE(key.size() <= static_cast<size_t>(INT_MAX), "HMAC key of {} bytes is too long",
             key.size());
  Digest out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), data_or_empty(key), static_cast<int>(key.size()), data_or_empty(message),
           message.size(), out.data(), &len) == nullptr ||
      len != out.size())
    SL_THROW(InternalError, "OpenSSL's HMAC-SHA256 failed: {}", openssl_error());
  return out;
}

bool digest_equal(const Digest& a, const Digest& b) {
  // Constant time: how long it takes must not tell an attacker how many leading bytes matched.
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// The key is kept in a template context, which restart() copies: a context whose MAC has been
// finalised cannot take more input.
struct HmacSha256::Ctx {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;  // initialised with the key, never updated
  EVP_MAC_CTX* running = nullptr;
  ~Ctx() {
    EVP_MAC_CTX_free(running);
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(mac);
  }
};

HmacSha256::HmacSha256(std::span<const uint8_t> key) {
  auto ctx = std::make_unique<Ctx>();
  ctx->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (ctx->mac) ctx->keyed = EVP_MAC_CTX_new(ctx->mac);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                               OSSL_PARAM_construct_end()};
  if (!ctx->keyed || EVP_MAC_init(ctx->keyed, data_or_empty(key), key.size(), params) != 1)
    SL_THROW(InternalError, "OpenSSL's HMAC-SHA256 failed: {}", openssl_error());
  ctx_ = ctx.release();
  restart();
}

HmacSha256::~HmacSha256() {
  delete ctx_;
}

HmacSha256::HmacSha256(HmacSha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

HmacSha256& HmacSha256::operator=(HmacSha256&& other) noexcept {
  if (this != &other) {
    delete ctx_;
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

void HmacSha256::restart() {
  EVP_MAC_CTX_free(ctx_->running);
  ctx_->running = EVP_MAC_CTX_dup(ctx_->keyed);
  if (!ctx_->running) SL_THROW(InternalError, "OpenSSL's HMAC-SHA256 failed: {}", openssl_error());
}

void HmacSha256::update(std::span<const uint8_t> data) {
  SL_ENFORCE_T(InternalError, ctx_ != nullptr, "HmacSha256 used after a move");
  if (!data.empty() && EVP_MAC_update(ctx_->running, data.data(), data.size()) != 1)
    SL_THROW(InternalError, "OpenSSL's HMAC-SHA256 failed: {}", openssl_error());
}

Digest HmacSha256::final() {
  SL_ENFORCE_T(InternalError, ctx_ != nullptr, "HmacSha256 used after a move");
  Digest out{};
  size_t len = 0;
  if (EVP_MAC_final(ctx_->running, out.data(), &len, out.size()) != 1 || len != out.size())
    SL_THROW(InternalError, "OpenSSL's HMAC-SHA256 failed: {}", openssl_error());
  restart();
  return out;
}

std::array<uint8_t, 32> random_nonce() {
  std::array<uint8_t, 32> out{};
  random_bytes(out);
  return out;
}

std::string make_token() {
  std::array<uint8_t, 32> bytes{};
  random_bytes(bytes);
  return hex(bytes);
}

void write_token_file(const std::string& path, const std::string& token) {
  const std::string trimmed = trim(token);
  SL_ENFORCE(!trimmed.empty(), "refusing to write an empty telemetry token to {}", path);
  SL_ENFORCE(trimmed.size() >= kMinTokenLength,
             "refusing to write a telemetry token of {} characters to {}: at least {} are required "
             "({})",
             trimmed.size(), path, kMinTokenLength, kShortTokenWhy);

  // A new file beside the target, then rename() over it: whatever is at `path` (a symlink someone
  // planted, a FIFO, a file with other hard links) is replaced, never written through, and a
  // reader sees the old token or the new one, never half of one. O_EXCL|O_NOFOLLOW: the temporary
  // name is ours alone, even if someone guessed it; mode 0600 from the first moment.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    std::array<uint8_t, 8> suffix{};
    random_bytes(suffix);
    tmp = path + ".tmp-" + hex(suffix);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) SL_THROW(IoError, "cannot create token file {}: {}", path, std::strerror(errno));
  Fd file(fd);
  auto fail = [&](const char* what, int err) {
    file.close();
    ::unlink(tmp.c_str());
    SL_THROW(IoError, "cannot {} token file {}: {}", what, path, std::strerror(err));
  };
  // The umask may have taken bits away (0400): exactly 0600.
  if (::fchmod(file.get(), 0600) != 0) fail("set permissions 0600 on", errno);
  if (const int err = write_all(file.get(), token + "\n")) fail("write", err);
  if (::fsync(file.get()) != 0) fail("write", errno);
  if (const int err = file.close()) fail("write", err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("replace", errno);

  // The rename itself made durable (best effort: some file systems refuse fsync on a directory).
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  Fd d(::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() >= 0) (void)::fsync(d.get());
}

std::string read_token_file(const std::string& path) {
  // O_NOFOLLOW: the token is the file named, not what a link planted there points to.
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    // A symlink (ELOOP under O_NOFOLLOW) and a socket (ENXIO) fail to open: say what is there.
    struct stat st {};
    if ((err == ELOOP || err == ENXIO) && ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      SL_THROW(IoError, "token file {} is {}, not a regular file{}", path, kind_of(st.st_mode),
               S_ISLNK(st.st_mode) ? " (token files are not read through links)" : "");
    SL_THROW(IoError, "cannot read token file {}: {}", path, std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    SL_THROW(IoError, "cannot read token file {}: {}", path, std::strerror(errno));
  // A FIFO or a device (/dev/zero) could block or never end; a directory has no token.
  if (!S_ISREG(st.st_mode))
    SL_THROW(IoError, "token file {} is {}, not a regular file", path, kind_of(st.st_mode));
  // Another user's file could have been planted to make our workers talk to someone else.
  if (st.st_uid != ::geteuid())
    SL_THROW(IoError, "token file {} is owned by uid {}, not by this user (uid {}); refusing it",
             path, st.st_uid, ::geteuid());
  // The token proves a worker: anyone who can read it can feed the run's collector false
  // telemetry or, posing as the collector, read the run's telemetry; anyone who can write it
  // chooses the token. Only the owner may have access.
  if ((st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) != 0)
    SL_THROW(IoError,
             "token file {} can be read or written by group or others (mode {:04o}); run chmod "
             "600 {}",
             path, static_cast<unsigned>(st.st_mode & 07777), path);
  if (st.st_size > static_cast<off_t>(kMaxTokenFileSize))
    SL_THROW(IoError,
             "token file {} is {} bytes; a token file is at most 4 KiB (a token is 64 hex "
             "characters)",
             path, static_cast<long long>(st.st_size));

  // At most one byte more than allowed, in case the file grew since fstat.
  std::array<char, kMaxTokenFileSize + 1> buf{};
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::read(fd.get(), buf.data() + got, buf.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      SL_THROW(IoError, "cannot read token file {}: {}", path, std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxTokenFileSize)
    SL_THROW(IoError, "token file {} is over 4 KiB; a token file is at most 4 KiB", path);
  const std::string content(buf.data(), got);
  const std::string token = trim(content.substr(0, content.find('\n')));
  SL_ENFORCE(!token.empty(), "token file {} is empty (expected the token on its first line)", path);
  SL_ENFORCE(token.size() >= kMinTokenLength,
             "token file {} holds a token of {} characters; at least {} are required ({})", path,
             token.size(), kMinTokenLength, kShortTokenWhy);
  return token;
}

std::string find_token(const std::string& path) {
  // An explicit file wins: a stale exported variable must not override what the user named.
  if (!path.empty()) return read_token_file(path);
  if (const char* env = std::getenv(kTokenEnv)) {
    std::string token = trim(env);
    if (!token.empty()) {
      SL_ENFORCE(token.size() >= kMinTokenLength,
                 "{} holds a token of {} characters; at least {} are required ({})", kTokenEnv,
                 token.size(), kMinTokenLength, kShortTokenWhy);
      return token;
    }
  }
  SL_THROW(InvalidArgument, "no telemetry token: pass --token-file PATH or set {}", kTokenEnv);
}

}  // namespace shardlab::net
