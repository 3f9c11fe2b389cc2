// core/digest.h
//
// Owns: SHA-256 digests as lowercase hex, of one string or of bytes fed in pieces (OpenSSL's EVP),
// for the identities bakeoff records: a study file's, a catalog's, a load's schedule.
//
// Thread-safety: a Sha256 is used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace bakeoff {

std::string Sha256Hex(std::string_view bytes);

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // The digest of everything fed; the object is then spent.
  std::string FinishHex();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

}  // namespace bakeoff
