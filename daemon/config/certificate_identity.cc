#include "daemon/config/certificate_identity.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace rdmad::config {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* names) const { GENERAL_NAMES_free(names); }
};

std::string CommonName(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0) return "";
  ASN1_STRING* data =
      X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                     static_cast<size_t>(ASN1_STRING_length(data)));
}

// The first subjectAltName of `type` (GEN_DNS, GEN_URI).
std::string AltName(X509* cert, int type) {
  std::unique_ptr<GENERAL_NAMES, NamesFree> names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (names == nullptr) return "";
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type != type) continue;
    const ASN1_IA5STRING* text =
        type == GEN_DNS ? name->d.dNSName : name->d.uniformResourceIdentifier;
    return std::string(
        reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
        static_cast<size_t>(ASN1_STRING_length(text)));
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> CertificateIdentity(const std::string& pem) {
  std::unique_ptr<BIO, BioFree> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return absl::ResourceExhaustedError("BIO_new_mem_buf");
  std::unique_ptr<X509, X509Free> cert(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("it holds no PEM certificate");
  }
  std::string identity = CommonName(cert.get());
  if (identity.empty()) identity = AltName(cert.get(), GEN_DNS);
  if (identity.empty()) identity = AltName(cert.get(), GEN_URI);
  if (identity.empty()) {
    return absl::InvalidArgumentError(
        "its certificate has no common name and no DNS or URI "
        "subjectAltName to be known by");
  }
  return identity;
}

}  // namespace rdmad::config
