// core/digest.cc: SHA-256 through OpenSSL's EVP (contract in digest.h).
#include "core/digest.h"

#include <openssl/evp.h>

#include "core/check.h"

namespace bakeoff {
namespace {

std::string Hex(const unsigned char* digest, unsigned int length) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kDigits[digest[i] >> 4]);
    hex.push_back(kDigits[digest[i] & 15]);
  }
  return hex;
}

}  // namespace

struct Sha256::Context {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Context() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  BAKEOFF_CHECK(context_->md != nullptr && EVP_DigestInit_ex(context_->md, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() = default;

void Sha256::Update(std::string_view bytes) {
  BAKEOFF_CHECK(EVP_DigestUpdate(context_->md, bytes.data(), bytes.size()) == 1);
}

std::string Sha256::FinishHex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  BAKEOFF_CHECK(EVP_DigestFinal_ex(context_->md, digest, &length) == 1);
  return Hex(digest, length);
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  BAKEOFF_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) == 1);
  return Hex(digest, length);
}

}  // namespace bakeoff
