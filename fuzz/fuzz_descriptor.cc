// libFuzzer target: region descriptor parsing (daemon/peer/
// descriptor_codec.h). Descriptors arrive from clients and, out of band,
// from other nodes. Anything accepted must re-encode and decode to the same
// descriptor.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/peer/descriptor_codec.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/stubs/logging.h"

// Invalid UTF-8 in string fields is rejected by the parser, which also logs
// it; at fuzzing rates that log would be most of the run time.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const std::string& input : {text, "rdmad1:" + text}) {
    auto decoded = rdmad::peer::DecodeDescriptor(input);
    if (!decoded.ok()) continue;
    if (decoded->length() == 0 || decoded->incarnation() == 0) std::abort();
    auto again =
        rdmad::peer::DecodeDescriptor(rdmad::peer::EncodeDescriptor(*decoded));
    if (!again.ok() ||
        !google::protobuf::util::MessageDifferencer::Equals(*decoded, *again)) {
      std::abort();
    }
  }
  return 0;
}
