// Authentication of telemetry connections: SHA-256 (OpenSSL) against the FIPS 180-4 example vectors
// (and lengths around the padding boundaries), HMAC-SHA256 against RFC 4231, the constant-time
// compare, tokens, token files and where find_token looks first.
//
// Token files under hostile input: written atomically (a symlink, FIFO or hard link planted at the
// path is replaced, never written through), read without following links, and refused at once when
// they are not a regular file (FIFO, /dev/zero, directory, socket), too large, owned by someone
// else, open to group or others, or hold too short a token. Reads that could hang or exhaust memory
// run in a forked child with a deadline and a memory cap, so a regression fails instead of hanging.
#include <QtTest>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "net/auth.h"

using namespace shardlab;
using namespace shardlab::net;

namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string hex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

QString qhex(const Digest& d) {
  return QString::fromStdString(hex(d));
}

int file_mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

void write_raw(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

// A token file as a careful user makes it: mode 0600.
void write_private(const std::string& path, const std::string& content) {
  write_raw(path, content);
  QVERIFY(::chmod(path.c_str(), 0600) == 0);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A token long enough to be accepted (32 characters is the minimum).
const std::string kGoodToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// What a call run in a child process did.
struct Outcome {
  enum Kind : char { returned = 'R', refused = 'E', other = 'O', timed_out = 'T', died = 'D' };
  Kind kind = died;
  std::string text;  // the returned string, or the exception's message
  double seconds = 0;
};

// Runs fn() in a forked child with `deadline_s` and a cap on memory (512 MiB more than now), so a
// call that hangs (a FIFO) or reads forever (/dev/zero) fails the test instead of hanging it or
// exhausting the machine. fn returns a string; a shardlab::Error counts as refused.
template <typename Fn>
Outcome run_in_child(Fn&& fn, double deadline_s = 3.0) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return {};
  if (pid == 0) {
    ::close(fds[0]);
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) +
                       (rlim_t{512} << 20);
    const rlimit lim{cap, cap};
    ::setrlimit(RLIMIT_AS, &lim);
    std::string out;
    try {
      out = std::string(1, Outcome::returned) + fn();
    } catch (const Error& e) {
      out = std::string(1, Outcome::refused) + e.what();
    } catch (const std::exception& e) {
      out = std::string(1, Outcome::other) + e.what();
    }
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  bool eof = false;
  while (!eof) {
    const double left =
        deadline_s -
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) {
      eof = true;
    } else {
      got.append(buf, static_cast<size_t>(n));
    }
  }
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fds[0]);
  if (!eof) {
    ::kill(pid, SIGKILL);
    o.kind = Outcome::timed_out;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (eof && !got.empty()) {
    o.kind = static_cast<Outcome::Kind>(got[0]);
    o.text = got.substr(1);
  } else if (eof) {
    o.kind = Outcome::died;
  }
  return o;
}

QString describe(const Outcome& o) {
  const char* kind = o.kind == Outcome::returned    ? "returned"
                     : o.kind == Outcome::refused   ? "refused"
                     : o.kind == Outcome::other     ? "threw a non-shardlab exception"
                     : o.kind == Outcome::timed_out ? "did not finish before the deadline"
                                                    : "died";
  return QString("%1 after %2 s: %3")
      .arg(kind)
      .arg(o.seconds, 0, 'f', 3)
      .arg(QString::fromStdString(o.text).left(200));
}

// The entries of a directory (to check that no temporary file is left behind).
QStringList entries(const QTemporaryDir& dir) {
  return QDir(dir.path())
      .entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot, QDir::Name);
}

// lstat: the path itself, not what a link at it points to.
bool is_private_regular_file(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600;
}

template <typename Fn>
QString message_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return QString::fromUtf8(e.what());
  }
  return {};
}

}  // namespace

class TestAuth : public QObject {
  Q_OBJECT
 private slots:
  void init() { ::unsetenv(kTokenEnv); }
  void cleanup() { ::unsetenv(kTokenEnv); }

  void sha256FipsVectors() {
    QCOMPARE(qhex(sha256(bytes_of(""))),
             QString("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    QCOMPARE(qhex(sha256(bytes_of("abc"))),
             QString("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    // The two-block 448-bit message of FIPS 180-2 appendix B.2.
    QCOMPARE(qhex(sha256(bytes_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
             QString("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    // The 896-bit message (the SHA-384/512 example, used by NIST's SHA-256 examples too).
    QCOMPARE(qhex(sha256(bytes_of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmn"
                                  "oijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"))),
             QString("cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"));
    const std::string million(1000000, 'a');
    QCOMPARE(qhex(sha256(bytes_of(million))),
             QString("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  }

  void sha256PaddingBoundaries() {
    // Lengths where the length field just fits, just misses, or fills a block (references from
    // Python's hashlib).
    const std::vector<std::pair<size_t, const char*>> cases = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {57, "f13b2d724659eb3bf47f2dd6af1accc87b81f09f59f2b75e5c0bed6589dfe8c6"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        {1000, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"},
    };
    for (const auto& [n, expected] : cases) {
      const std::string msg(n, 'a');
      QCOMPARE(qhex(sha256(bytes_of(msg))), QString(expected));
    }
  }

  void hmacRfc4231() {
    struct Case {
      int number;
      std::string key, data;
      const char* mac;
    };
    std::string key4;
    for (int i = 1; i <= 25; ++i) key4.push_back(static_cast<char>(i));
    const std::string long_key(131, '\xaa');
    const std::vector<Case> cases = {
        {1, std::string(20, '\x0b'), "Hi There",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {2, "Jefe", "what do ya want for nothing?",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {3, std::string(20, '\xaa'), std::string(50, '\xdd'),
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {4, key4, std::string(50, '\xcd'),
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {6, long_key, "Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {7, long_key,
         "This is a test using a larger than block-size key and a larger than block-size data. "
         "The key needs to be hashed before being used by the HMAC algorithm.",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
        // A key of exactly one block is used as is, not hashed (Python's hmac as reference).
        {0, std::string(64, 'k'), "x",
         "f91c4c403625fb06910ef93999265bbd2d62baeaec6ff36455498cc124fe3e66"},
        // Empty key and message (Python's hmac as reference).
        {0, "", "", "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"},
    };
    for (const auto& c : cases) {
      QVERIFY2(hex(hmac_sha256(bytes_of(c.key), bytes_of(c.data))) == c.mac,
               qPrintable(QString("RFC 4231 test case %1").arg(c.number)));
    }
  }

  void digestEqualComparesEveryByte() {
    const Digest a = sha256(bytes_of("abc"));
    Digest b = a;
    QVERIFY(digest_equal(a, b));
    b[0] ^= 1;
    QVERIFY(!digest_equal(a, b));
    b = a;
    b[31] ^= 0x80;
    QVERIFY(!digest_equal(a, b));
    QVERIFY(digest_equal(Digest{}, Digest{}));
  }

  void tokensAndNoncesAreFreshHex() {
    std::set<std::string> seen;
    for (int i = 0; i < 8; ++i) {
      const std::string t = make_token();
      QCOMPARE(t.size(), size_t{64});
      for (char ch : t) QVERIFY((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'));
      seen.insert(t);
    }
    QCOMPARE(seen.size(), size_t{8});
    QVERIFY(random_nonce() != random_nonce());
  }

  void tokenFileRoundTripWith0600() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("token").toStdString();
    const std::string token = make_token();
    write_token_file(path, token);
    QCOMPARE(file_mode(path), 0600);
    QCOMPARE(read_token_file(path), token);

    // Replacing an existing, looser file tightens it and drops the old content.
    const std::string loose = dir.filePath("loose").toStdString();
    write_raw(loose, std::string(200, 'x') + "\n");
    QVERIFY(::chmod(loose.c_str(), 0644) == 0);
    write_token_file(loose, kGoodToken);
    QCOMPARE(file_mode(loose), 0600);
    QCOMPARE(read_token_file(loose), kGoodToken);

    // Only the first line counts, trimmed (files edited by hand, CRLF).
    const std::string edited = dir.filePath("edited").toStdString();
    write_private(edited, "  \t" + kGoodToken + " \r\nsecond line\n");
    QCOMPARE(read_token_file(edited), kGoodToken);
  }

  void tokenFileErrors() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string missing = dir.filePath("missing").toStdString();
    QVERIFY_THROWS_EXCEPTION(IoError, read_token_file(missing));
    QVERIFY(
        message_of([&] { read_token_file(missing); }).contains(QString::fromStdString(missing)));

    const std::string empty = dir.filePath("empty").toStdString();
    write_private(empty, "");
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, read_token_file(empty));
    QVERIFY(message_of([&] { read_token_file(empty); }).contains("empty"));
    write_private(empty, "   \r\n");
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, read_token_file(empty));

    const std::string nodir = dir.filePath("no/such/dir/token").toStdString();
    QVERIFY_THROWS_EXCEPTION(IoError, write_token_file(nodir, kGoodToken));
    QVERIFY(message_of([&] {
              write_token_file(nodir, kGoodToken);
            }).contains(QString::fromStdString(nodir)));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, write_token_file(empty, ""));
  }

  void findTokenPrefersTheEnvironment() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("token").toStdString();
    const std::string from_file = "from-file-" + std::string(32, 'f');
    const std::string from_env = "from-env-" + std::string(32, 'e');
    write_token_file(path, from_file);

    QCOMPARE(find_token(path), from_file);
    QVERIFY(::setenv(kTokenEnv, from_env.c_str(), 1) == 0);
    // An explicit file wins over the variable; without one the variable is used.
    QCOMPARE(find_token(path), from_file);
    QCOMPARE(find_token(""), from_env);
    QVERIFY_THROWS_EXCEPTION(IoError, find_token(dir.filePath("missing").toStdString()));
    // Set but empty counts as unset.
    QVERIFY(::setenv(kTokenEnv, "", 1) == 0);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, find_token(""));

    ::unsetenv(kTokenEnv);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, find_token(""));
    const QString msg = message_of([] { find_token(""); });
    QVERIFY2(msg.contains("--token-file") && msg.contains(kTokenEnv), qPrintable(msg));
    QVERIFY_THROWS_EXCEPTION(IoError, find_token(dir.filePath("missing").toStdString()));
  }

  // --- Token files under hostile input ------------------------------------------------------

  // A FIFO at the token path: opening it for reading blocks until a writer comes, and a writer
  // can feed it forever. Refused at once, in one line naming the path and what it is.
  void fifoTokenFileIsRefusedAtOnce() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string fifo = dir.filePath("token").toStdString();
    QVERIFY(::mkfifo(fifo.c_str(), 0600) == 0);
    const Outcome o = run_in_child([&] { return read_token_file(fifo); });
    QVERIFY2(o.kind == Outcome::refused && o.seconds < 1.0, qPrintable(describe(o)));
    const QString msg = QString::fromStdString(o.text);
    QVERIFY2(
        msg.contains(QString::fromStdString(fifo)) && msg.contains("FIFO") && !msg.contains('\n'),
        qPrintable(msg));
    // Through find_token too (the worker's path).
    const Outcome f = run_in_child([&] { return find_token(fifo); });
    QVERIFY2(f.kind == Outcome::refused && f.seconds < 1.0, qPrintable(describe(f)));
  }

  // /dev/zero never ends and has no newline: reading its "first line" exhausts memory.
  void devZeroIsRefusedAtOnce() {
    const Outcome o = run_in_child([] { return read_token_file("/dev/zero"); });
    QVERIFY2(o.kind == Outcome::refused && o.seconds < 1.0, qPrintable(describe(o)));
    const QString msg = QString::fromStdString(o.text);
    QVERIFY2(msg.contains("/dev/zero") && msg.contains("character device") && !msg.contains('\n'),
             qPrintable(msg));
  }

  // A directory or a socket at the path is no token file either.
  void directoryAndSocketAreRefused() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string sub = dir.filePath("token.d").toStdString();
    QVERIFY(::mkdir(sub.c_str(), 0700) == 0);
    const QString dmsg = message_of([&] { read_token_file(sub); });
    QVERIFY2(dmsg.contains(QString::fromStdString(sub)) && dmsg.contains("directory"),
             qPrintable(dmsg));

    const std::string sock = dir.filePath("token.sock").toStdString();
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    QVERIFY(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    QVERIFY(sock.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
    QVERIFY(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    const Outcome o = run_in_child([&] { return read_token_file(sock); });
    ::close(fd);
    QVERIFY2(o.kind == Outcome::refused && o.seconds < 1.0, qPrintable(describe(o)));
    QVERIFY2(QString::fromStdString(o.text).contains("socket"), qPrintable(describe(o)));
  }

  // A symlink planted at the token path (by someone who can write the directory) must not make
  // write_token_file write through it: the other file stays as it was, and the path becomes the
  // token file itself.
  void writeDoesNotFollowAPlantedSymlink() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string victim = dir.filePath("victim").toStdString();
    write_raw(victim, "precious\n");
    QVERIFY(::chmod(victim.c_str(), 0644) == 0);
    const std::string path = dir.filePath("token").toStdString();
    QVERIFY(::symlink(victim.c_str(), path.c_str()) == 0);

    try {
      write_token_file(path, kGoodToken);
    } catch (const Error& e) {
      QFAIL(e.what());
    }
    QCOMPARE(read_all(victim), std::string("precious\n"));
    QCOMPARE(file_mode(victim), 0644);
    QVERIFY(is_private_regular_file(path));
    QCOMPARE(read_all(path), kGoodToken + "\n");
  }

  // Reading does not follow a link at the path either: the token must be the file named.
  void readDoesNotFollowASymlink() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string real = dir.filePath("real").toStdString();
    write_private(real, kGoodToken + "\n");
    const std::string link = dir.filePath("token").toStdString();
    QVERIFY(::symlink(real.c_str(), link.c_str()) == 0);
    QVERIFY_THROWS_EXCEPTION(IoError, read_token_file(link));
    const QString msg = message_of([&] { read_token_file(link); });
    QVERIFY2(msg.contains(QString::fromStdString(link)) && msg.contains("symbolic link"),
             qPrintable(msg));
  }

  // The token proves a worker: a file others can read gives away the run. Refused, saying to
  // chmod 600.
  void groupOrWorldAccessibleFileIsRefused() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("token").toStdString();
    write_private(path, kGoodToken + "\n");
    QCOMPARE(read_token_file(path), kGoodToken);
    for (const mode_t mode : {0644, 0640, 0604, 0620, 0602, 0660}) {
      QVERIFY(::chmod(path.c_str(), mode) == 0);
      const QString msg = message_of([&] { read_token_file(path); });
      QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains("chmod 600"),
               qPrintable(QString("mode %1: %2").arg(mode, 0, 8).arg(msg)));
      QVERIFY_THROWS_EXCEPTION(IoError, read_token_file(path));
      QVERIFY_THROWS_EXCEPTION(IoError, find_token(path));
    }
    QVERIFY(::chmod(path.c_str(), 0400) == 0);  // read-only for the owner is fine
    QCOMPARE(read_token_file(path), kGoodToken);
  }

  // A token file owned by another user is not ours to trust (it could have been planted).
  void fileOwnedByAnotherUserIsRefused() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("token").toStdString();
    write_private(path, kGoodToken + "\n");
    const uid_t other = ::geteuid() == 65534 ? 65533 : 65534;
    if (::chown(path.c_str(), other, static_cast<gid_t>(-1)) != 0)
      QSKIP("cannot give a file to another user here (not root)");
    const QString msg = message_of([&] { read_token_file(path); });
    QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains("owned by"),
             qPrintable(msg));
    QVERIFY_THROWS_EXCEPTION(IoError, read_token_file(path));
  }

  // A short token can be brute-forced offline from one captured handshake (an HMAC over nonces
  // the attacker saw): refused from a file, from the variable, and when writing.
  void shortTokenIsRefused() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("token").toStdString();
    const std::string short_token(31, 'a'), just_enough(32, 'a');
    write_private(path, short_token + "\n");
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, read_token_file(path));
    const QString msg = message_of([&] { read_token_file(path); });
    QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains("32"), qPrintable(msg));
    QVERIFY2(!msg.contains(QString::fromStdString(short_token)), "the message shows the token");
    write_private(path, just_enough + "\n");
    QCOMPARE(read_token_file(path), just_enough);

    QVERIFY(::setenv(kTokenEnv, "abc", 1) == 0);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, find_token(""));
    const QString emsg = message_of([] { find_token(""); });
    QVERIFY2(emsg.contains(kTokenEnv) && emsg.contains("32"), qPrintable(emsg));
    QVERIFY(::setenv(kTokenEnv, short_token.c_str(), 1) == 0);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, find_token(""));
    QVERIFY(::setenv(kTokenEnv, just_enough.c_str(), 1) == 0);
    QCOMPARE(find_token(""), just_enough);

    const std::string fresh = dir.filePath("fresh").toStdString();
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, write_token_file(fresh, short_token));
    QVERIFY(!QFile::exists(QString::fromStdString(fresh)));
  }

  // A token is 64 hex characters: a file over 4 KiB is not one, whatever its first line.
  void hugeFileIsRefused() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("token").toStdString();
    write_private(path, kGoodToken + "\n" + std::string(4096, 'x'));
    QVERIFY_THROWS_EXCEPTION(IoError, read_token_file(path));
    const QString msg = message_of([&] { read_token_file(path); });
    QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains("4 KiB"), qPrintable(msg));

    // A sparse 1 GiB file, read in a child so a regression cannot eat the machine.
    write_private(path, kGoodToken + "\n");
    QVERIFY(::truncate(path.c_str(), off_t{1} << 30) == 0);
    const Outcome o = run_in_child([&] { return read_token_file(path); });
    QVERIFY2(o.kind == Outcome::refused && o.seconds < 1.0, qPrintable(describe(o)));

    // Exactly 4 KiB is still accepted.
    std::string padded = kGoodToken + "\n";
    padded += std::string(4096 - padded.size(), '#');
    write_private(path, padded);
    QCOMPARE(read_token_file(path), kGoodToken);
  }

  // What write_token_file leaves: a regular file (not a link), mode 0600, holding exactly the
  // token and a newline, whatever was at the path before (nothing, a dangling symlink, a FIFO, a
  // file with another hard link), and no temporary file beside it.
  void writtenFileIsAPrivateRegularFileWithTheToken() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string token = make_token();

    const std::string fresh = dir.filePath("fresh").toStdString();
    write_token_file(fresh, token);
    QVERIFY(is_private_regular_file(fresh));
    QCOMPARE(read_all(fresh), token + "\n");

    // A dangling link: its target must not be created.
    const std::string target = dir.filePath("elsewhere").toStdString();
    const std::string dangling = dir.filePath("dangling").toStdString();
    QVERIFY(::symlink(target.c_str(), dangling.c_str()) == 0);
    try {
      write_token_file(dangling, token);
    } catch (const Error& e) {
      QFAIL(e.what());
    }
    QVERIFY2(!QFile::exists(QString::fromStdString(target)), "wrote through a dangling link");
    QVERIFY(is_private_regular_file(dangling));
    QCOMPARE(read_all(dangling), token + "\n");

    // A FIFO: opening it for writing would block until a reader comes.
    const std::string fifo = dir.filePath("fifo").toStdString();
    QVERIFY(::mkfifo(fifo.c_str(), 0600) == 0);
    const Outcome o = run_in_child([&] {
      write_token_file(fifo, token);
      return std::string();
    });
    QVERIFY2(o.kind == Outcome::returned && o.seconds < 1.0, qPrintable(describe(o)));
    QVERIFY(is_private_regular_file(fifo));
    QCOMPARE(read_all(fifo), token + "\n");

    // A hard link: the other name keeps the old content (a new file replaces the name).
    const std::string old_file = dir.filePath("old").toStdString();
    const std::string other_name = dir.filePath("other-name").toStdString();
    write_raw(old_file, "old content\n");
    QVERIFY(::link(old_file.c_str(), other_name.c_str()) == 0);
    write_token_file(old_file, token);
    QCOMPARE(read_all(other_name), std::string("old content\n"));
    QVERIFY(is_private_regular_file(old_file));
    QCOMPARE(read_all(old_file), token + "\n");
    QCOMPARE(read_token_file(old_file), token);

    QCOMPARE(entries(dir), QStringList({"dangling", "fifo", "fresh", "old", "other-name"}));
  }
};

QTEST_GUILESS_MAIN(TestAuth)
#include "tst_auth.moc"
