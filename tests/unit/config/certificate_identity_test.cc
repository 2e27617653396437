// The name a daemon's certificate gives it in the cluster directory
// (daemon/config/certificate_identity.h). The certificates are self-signed
// throwaways made with `openssl req -x509` for these tests only (nothing
// verifies them here): which name is taken is all that is checked.
#include "daemon/config/certificate_identity.h"

#include <fstream>
#include <string>

#include "daemon/config/config_file.h"
#include "daemon/config/resolved_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/v1/config.pb.h"

namespace rdmad::config {
namespace {

using ::testing::HasSubstr;

// CN=node-a, subjectAltName DNS:a.example
constexpr char kCommonName[] = R"pem(
-----BEGIN CERTIFICATE-----
MIIBjzCCATWgAwIBAgIUN0HIRr49HPa2rr4wmL2TMgjIJaowCgYIKoZIzj0EAwIw
ETEPMA0GA1UEAwwGbm9kZS1hMCAXDTI2MTEyODIxMDg1OVoYDzIxMjYxMTA0MjEw
ODU5WjARMQ8wDQYDVQQDDAZub2RlLWEwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AAQBWf6n4XACmZQK8z1c5EqVPcWLtsHwGfS48rGU7uUzkVW+TrH9ZMBXAhv6n9MH
ps3GvFmHeSMseYX3fjVL6G9Oo2kwZzAdBgNVHQ4EFgQUWt0X2RBNCwLa8UiFBvSc
6wkedB0wHwYDVR0jBBgwFoAUWt0X2RBNCwLa8UiFBvSc6wkedB0wDwYDVR0TAQH/
BAUwAwEB/zAUBgNVHREEDTALgglhLmV4YW1wbGUwCgYIKoZIzj0EAwIDSAAwRQIg
A+WL3ZLnhs5Xpqma0aRTScU+1rHsoHjoDoL/oHWhizQCIQCs/ZwQdAwvWRSnnG+Y
AkglGuf117EHN9FdCND4s5EBpQ==
-----END CERTIFICATE-----
)pem";

// No CN; subjectAltName DNS:b.example, URI:spiffe://c/b
constexpr char kDnsName[] = R"pem(
-----BEGIN CERTIFICATE-----
MIIBpTCCAUugAwIBAgIUCE11ZaMux/bSzhb71PnaSsEmDTMwCgYIKoZIzj0EAwIw
FTETMBEGA1UECgwKcmRtYWQgdGVzdDAgFw0yNjExMjgyMTA4NTlaGA8yMTI2MTEw
NDIxMDg1OVowFTETMBEGA1UECgwKcmRtYWQgdGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABCzIZV79RucvwcCOJ6TXTuxJeDs/l0szIRr+olJMbAofZ/JYQ3I7
HPgaI47wlSzgGszDWGko2zsrFzY9RryWRUWjdzB1MB0GA1UdDgQWBBQE+C49OgQU
TOf5jvTvL9A0WKarPzAfBgNVHSMEGDAWgBQE+C49OgQUTOf5jvTvL9A0WKarPzAP
BgNVHRMBAf8EBTADAQH/MCIGA1UdEQQbMBmCCWIuZXhhbXBsZYYMc3BpZmZlOi8v
Yy9iMAoGCCqGSM49BAMCA0gAMEUCIQCGHBTeR3p1eqhhgAeXNK1GTXC4wB73AuBh
sV0DX0cOzQIgJ2nXB42i7IoQWyViW7ERN1l5OE4GlNxaTw4dbPAkOZo=
-----END CERTIFICATE-----
)pem";

// No CN; subjectAltName URI:spiffe://cluster/node-c
constexpr char kUriName[] = R"pem(
-----BEGIN CERTIFICATE-----
MIIBpDCCAUugAwIBAgIUb180CFzAj0HjzqPpUf0oq+O5UocwCgYIKoZIzj0EAwIw
FTETMBEGA1UECgwKcmRtYWQgdGVzdDAgFw0yNjExMjgyMTA4NTlaGA8yMTI2MTEw
NDIxMDg1OVowFTETMBEGA1UECgwKcmRtYWQgdGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABLVXnLpU//4ipI4jR1nAYcEsFiYRXOdr09+W9A2XQggarKygn4uA
pvn7hAw5Apl0SoRqpNw0k2Fi1z1eUSvAeTujdzB1MB0GA1UdDgQWBBSy5WKItao6
m9gX76ESWCZWPKj2fDAfBgNVHSMEGDAWgBSy5WKItao6m9gX76ESWCZWPKj2fDAP
BgNVHRMBAf8EBTADAQH/MCIGA1UdEQQbMBmGF3NwaWZmZTovL2NsdXN0ZXIvbm9k
ZS1jMAoGCCqGSM49BAMCA0cAMEQCIAsm6IDCxQUj0NzAVb9i63Y6UUBWS0uFyI5M
PFMAQIOQAiBvPd5fwpXP8HS3no89hiU9qHZ5XooMshhaadDqoorJdQ==
-----END CERTIFICATE-----
)pem";

// No CN; subjectAltName IP:127.0.0.1 only
constexpr char kNoName[] = R"pem(
-----BEGIN CERTIFICATE-----
MIIBkjCCATigAwIBAgIUMQPA5c/2wA+5THnJ85fS8ZTxXU4wCgYIKoZIzj0EAwIw
FTETMBEGA1UECgwKcmRtYWQgdGVzdDAgFw0yNjExMjgyMTA4NTlaGA8yMTI2MTEw
NDIxMDg1OVowFTETMBEGA1UECgwKcmRtYWQgdGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABC2/hL42EQutIOQFwCCntWi66JEX3maoknLKfNFIXuenyq5qzhiG
ESvcczo+e9fWwnyvrOU+dXxNZJfPz10LWnSjZDBiMB0GA1UdDgQWBBRUklU5RAfR
Qdp6y0JTHjBEClPn8DAfBgNVHSMEGDAWgBRUklU5RAfRQdp6y0JTHjBEClPn8DAP
BgNVHRMBAf8EBTADAQH/MA8GA1UdEQQIMAaHBH8AAAEwCgYIKoZIzj0EAwIDSAAw
RQIhAPB+rkhPq5viDp10/27OZakm7iCt24HrrXctQfiPm9heAiBXAV9A8pJ+kpta
XWKqOQC7ZHSRLfu5xYoZKLAuXERhRg==
-----END CERTIFICATE-----
)pem";

TEST(CertificateIdentityTest, TheCommonNameFirst) {
  auto identity = CertificateIdentity(kCommonName);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(*identity, "node-a");
}

TEST(CertificateIdentityTest, ThenTheFirstDnsThenTheFirstUriName) {
  auto dns = CertificateIdentity(kDnsName);
  ASSERT_TRUE(dns.ok()) << dns.status();
  EXPECT_EQ(*dns, "b.example");
  auto uri = CertificateIdentity(kUriName);
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ(*uri, "spiffe://cluster/node-c");
}

TEST(CertificateIdentityTest, NoNameOrNoCertificateIsRefused) {
  auto none = CertificateIdentity(kNoName);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("no common name"));
  auto garbage = CertificateIdentity("-----BEGIN CERTIFICATE-----\nxx\n");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CertificateIdentity("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// What the daemon makes of its tls_* files: the identity its directory
// records name, required only where there is a directory.
TEST(CertificateIdentityTest, TheDaemonsIdentityIsNeededOnlyWithADirectory) {
  const std::string dir = ::testing::TempDir();
  const auto config = [&](const char* pem, bool directory) {
    const std::string cert = dir + "/identity-cert.pem";
    std::ofstream(cert) << pem;
    std::ofstream(dir + "/identity-key.pem")
        << "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
    v1::DaemonConfig c;
    c.set_tls_ca_file(cert);
    c.set_tls_cert_file(cert);
    c.set_tls_key_file(dir + "/identity-key.pem");
    if (directory) c.set_directory("etcd://127.0.0.1:2379");
    ApplyDefaults(c);
    return c;
  };
  auto named = ResolveConfig(config(kCommonName, true));
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_TRUE(named->tls.has_value());
  EXPECT_EQ(named->tls->identity, "node-a");

  auto nameless = ResolveConfig(config(kNoName, true));
  EXPECT_EQ(nameless.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(nameless.status().message()),
              HasSubstr("tls_cert_file"));
  auto alone = ResolveConfig(config(kNoName, false));
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->tls->identity, "");
}

}  // namespace
}  // namespace rdmad::config
