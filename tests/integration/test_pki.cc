#include "tests/integration/test_pki.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

// RunProcess execs a path; find openssl on $PATH.
std::string OpensslPath() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/openssl");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "/usr/bin/openssl";
}

}  // namespace

TestPki::TestPki(std::string dir) : dir_(std::move(dir)) {
  EXPECT_EQ(::mkdir(dir_.c_str(), 0700), 0) << dir_;
}

bool TestPki::Openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {OpensslPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, "", absl::Seconds(60));
  if (r.exit_code != 0) {
    ADD_FAILURE() << "openssl failed (is the openssl package installed?): "
                  << r.err;
  }
  return r.exit_code == 0;
}

bool TestPki::MakeCa(const std::string& ca) {
  return Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                  "-subj", "/CN=rdmad test " + ca, "-keyout", Path(ca + ".key"),
                  "-out", Path(ca + ".pem")});
}

bool TestPki::MakeCert(const std::string& ca, const std::string& name) {
  std::ofstream(Path(name + ".ext"))
      << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
         "extendedKeyUsage=serverAuth,clientAuth\n";
  return Openssl({"req", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
                  "/CN=" + name, "-keyout", Path(name + ".key"), "-out",
                  Path(name + ".csr")}) &&
         Openssl({"x509", "-req", "-in", Path(name + ".csr"), "-CA",
                  Path(ca + ".pem"), "-CAkey", Path(ca + ".key"),
                  "-CAcreateserial", "-days", "2", "-extfile",
                  Path(name + ".ext"), "-out", Path(name + ".pem")});
}

std::string TestPki::TlsConfig(const std::string& ca,
                               const std::string& name) const {
  return absl::StrCat("tls_ca_file: \"", Path(ca + ".pem"), "\"\n",
                      "tls_cert_file: \"", Path(name + ".pem"), "\"\n",
                      "tls_key_file: \"", Path(name + ".key"), "\"\n");
}

}  // namespace rdmad::testing
