// Authentication of telemetry connections: SHA-256 against the FIPS 180-4 example vectors (and
// lengths around the padding boundaries), HMAC-SHA256 against RFC 4231, the constant-time compare,
// tokens, token files (mode 0600) and where find_token looks first.
#include <QtTest>

#include <sys/stat.h>

#include <cstdlib>
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
    write_token_file(loose, "abc");
    QCOMPARE(file_mode(loose), 0600);
    QCOMPARE(read_token_file(loose), std::string("abc"));

    // Only the first line counts, trimmed (files edited by hand, CRLF).
    const std::string edited = dir.filePath("edited").toStdString();
    write_raw(edited, "  \tsecret-token \r\nsecond line\n");
    QCOMPARE(read_token_file(edited), std::string("secret-token"));
  }

  void tokenFileErrors() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string missing = dir.filePath("missing").toStdString();
    QVERIFY_THROWS_EXCEPTION(IoError, read_token_file(missing));
    QVERIFY(
        message_of([&] { read_token_file(missing); }).contains(QString::fromStdString(missing)));

    const std::string empty = dir.filePath("empty").toStdString();
    write_raw(empty, "");
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, read_token_file(empty));
    QVERIFY(message_of([&] { read_token_file(empty); }).contains("empty"));
    write_raw(empty, "   \r\n");
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, read_token_file(empty));

    const std::string nodir = dir.filePath("no/such/dir/token").toStdString();
    QVERIFY_THROWS_EXCEPTION(IoError, write_token_file(nodir, "abc"));
    QVERIFY(message_of([&] {
              write_token_file(nodir, "abc");
            }).contains(QString::fromStdString(nodir)));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, write_token_file(empty, ""));
  }

  void findTokenPrefersTheEnvironment() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("token").toStdString();
    write_token_file(path, "from-file");

    QCOMPARE(find_token(path), std::string("from-file"));
    QVERIFY(::setenv(kTokenEnv, "from-env", 1) == 0);
    // An explicit file wins over the variable; without one the variable is used.
    QCOMPARE(find_token(path), std::string("from-file"));
    QCOMPARE(find_token(""), std::string("from-env"));
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
};

QTEST_GUILESS_MAIN(TestAuth)
#include "tst_auth.moc"
