// Throwaway certificates for integration tests that run daemons (or etcd)
// with TLS: CAs, and certificates they sign, made with the openssl command
// line in a directory of the test's own.
//
// Example:
//   TestPki pki(dir.path() + "/pki");
//   ASSERT_TRUE(pki.MakeCa("ca"));
//   ASSERT_TRUE(pki.MakeCert("ca", "d1"));    // CN=d1, SAN 127.0.0.1
//   std::string config = pki.TlsConfig("ca", "d1");  // tls_* lines
#ifndef RDMAD_TESTS_INTEGRATION_TEST_PKI_H_
#define RDMAD_TESTS_INTEGRATION_TEST_PKI_H_

#include <string>
#include <vector>

namespace rdmad::testing {

class TestPki {
 public:
  // Creates `dir` (mode 0700); a test failure if it cannot.
  explicit TestPki(std::string dir);

  // A self-signed CA: CA.pem and CA.key. False (and a test failure saying
  // why) when openssl fails.
  bool MakeCa(const std::string& ca);
  // NAME.pem and NAME.key signed by `ca`: common name `name`,
  // subjectAltName IP:127.0.0.1 and DNS:localhost, usable by a server and
  // a client.
  bool MakeCert(const std::string& ca, const std::string& name);

  // DIR/FILE.
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  // The tls_ca_file, tls_cert_file and tls_key_file lines of a daemon's
  // config for certificate `name` of `ca`.
  std::string TlsConfig(const std::string& ca, const std::string& name) const;

 private:
  bool Openssl(const std::vector<std::string>& args);

  std::string dir_;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_TEST_PKI_H_
