// rdmactl put, get, copy: moving bytes between files and regions.
//
// A region of this daemon named without a peer is mapped into rdmactl
// (Client::MapRegion) and read or written in place, after checking that the
// range fits, so a failed check changes nothing. A remote region is reached
// with one-sided transfers through a session staging buffer of at most
// kStagingChunk bytes, so a large file never needs a buffer of its size.
// So is a region named without a peer that this daemon does not have, when
// it has a cluster directory: the daemon finds it.
#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/rdmactl/commands.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/io.h"
#include "common/size.h"

namespace rdmad::rdmactl {
namespace {

constexpr uint64_t kStagingChunk = uint64_t{64} << 20;

std::string Bytes(uint64_t n) {
  return n < 1024 ? absl::StrCat(n, " bytes")
                  : absl::StrCat(n, " bytes (", HumanSize(n), ")");
}

// OUT_OF_RANGE for `data` (e.g. "in.bin: 307200 bytes") that does not fit
// in `region` of `size` bytes at `offset`, naming every size involved.
absl::Status RangeError(absl::string_view data, absl::string_view region,
                        uint64_t size, uint64_t offset) {
  if (offset > size) {
    return absl::OutOfRangeError(absl::StrCat(
        "offset ", offset, " is past the end of region '", region, "' (",
        Bytes(size), ")"));
  }
  return absl::OutOfRangeError(absl::StrCat(
      data, " do not fit in region '", region, "' at offset ", offset,
      ": the region has ", Bytes(size), ", ", Bytes(size - offset),
      " from that offset to its end"));
}

absl::StatusOr<Buffer> Map(Client& client, const RegionOperand& operand) {
  auto mapped = client.MapRegion(operand.region.name);
  if (!mapped.ok()) {
    return Failed(absl::StrCat("map region ", operand.region.name),
                  mapped.status());
  }
  return mapped;
}

absl::Status PutLocal(CommandContext& context, Client& client, File& in) {
  const RegionOperand& dest = context.invocation().dest;
  const std::string what = absl::StrCat("put ", dest.text);
  auto mapped = Map(client, dest);
  if (!mapped.ok()) return mapped.status();
  const uint64_t size = mapped->size();
  const uint64_t offset = dest.region.offset;
  if (offset > size) {
    return Failed(what, RangeError("", dest.region.name, size, offset));
  }
  const uint64_t room = size - offset;
  char* target = mapped->data() + offset;
  uint64_t written = 0;
  if (const std::optional<uint64_t> file_size = in.RegularSize()) {
    if (*file_size > room) {
      return Failed(what, RangeError(absl::StrCat(in.name(), ": ",
                                                  Bytes(*file_size)),
                                     dest.region.name, size, offset));
    }
    auto n = in.ReadFull(target, *file_size);
    if (!n.ok()) return Failed(what, n.status());
    written = *n;
  } else {
    // A pipe: its length shows only at its end, so hold it before touching
    // the region.
    auto data = ReadAtMost(in, room);
    if (!data.ok()) return Failed(what, data.status());
    if (data->size() > room) {
      return Failed(what, RangeError(absl::StrCat(in.name(), ": more than ",
                                                  Bytes(room)),
                                     dest.region.name, size, offset));
    }
    std::memcpy(target, data->data(), data->size());
    written = data->size();
  }
  return context.Print(
      absl::StrCat("wrote ", Bytes(written), " to ", dest.text, "\n"));
}

absl::Status PutRemote(CommandContext& context, Client& client, File& in) {
  const RegionOperand& dest = context.invocation().dest;
  const std::string what = absl::StrCat("put ", dest.text);
  // Size the staging buffer by the data: a file's size, or what a pipe
  // gives before the first chunk is full.
  std::optional<std::string> first;
  uint64_t chunk = 0;
  if (const std::optional<uint64_t> file_size = in.RegularSize()) {
    chunk = std::min(*file_size, kStagingChunk);
  } else {
    auto data = ReadAtMost(in, kStagingChunk - 1);
    if (!data.ok()) return Failed(what, data.status());
    chunk = data->size();
    first = *std::move(data);
  }
  uint64_t done = 0;
  if (chunk > 0) {
    auto staging = client.Allocate(chunk);
    if (!staging.ok()) {
      return Failed(absl::StrCat("allocate a staging buffer of ", Bytes(chunk)),
                    staging.status());
    }
    for (;;) {
      size_t n = 0;
      if (first.has_value()) {
        std::memcpy(staging->data(), first->data(), first->size());
        n = first->size();
        first.reset();
      } else {
        auto got = in.ReadFull(staging->data(), chunk);
        if (!got.ok()) return Failed(what, got.status());
        n = *got;
      }
      if (n == 0) break;
      auto result = client.Write(*staging, 0, dest.region, done, n);
      if (!result.ok()) {
        return Failed(absl::StrCat(what, " (", Bytes(n), " at +", done, ")"),
                      result.status());
      }
      done += n;
      if (n < chunk) break;
    }
  }
  return context.Print(
      absl::StrCat("wrote ", Bytes(done), " to ", dest.text, "\n"));
}

absl::Status GetLocal(CommandContext& context, Client& client) {
  const Invocation& inv = context.invocation();
  const std::string what = absl::StrCat("get ", inv.src.text);
  auto mapped = Map(client, inv.src);
  if (!mapped.ok()) return mapped.status();
  const uint64_t size = mapped->size();
  const uint64_t offset = inv.src.region.offset;
  if (offset > size) {
    return Failed(what, RangeError("", inv.src.region.name, size, offset));
  }
  const uint64_t length = inv.length.value_or(size - offset);
  if (length > size - offset) {
    return Failed(what, RangeError(absl::StrCat("--length ", Bytes(length)),
                                   inv.src.region.name, size, offset));
  }
  // Opened only now: a failed check leaves an existing output file alone.
  auto out = File::OpenForWrite(inv.file);
  if (!out.ok()) return Failed(what, out.status());
  if (absl::Status s = out->WriteAll(mapped->data() + offset, length);
      !s.ok()) {
    return Failed(what, s);
  }
  if (absl::Status s = out->Close(); !s.ok()) return Failed(what, s);
  if (inv.file == "-") return absl::OkStatus();
  return context.Print(absl::StrCat("read ", Bytes(length), " from ",
                                    inv.src.text, " to ", inv.file, "\n"));
}

absl::Status GetRemote(CommandContext& context, Client& client) {
  const Invocation& inv = context.invocation();
  const std::string what = absl::StrCat("get ", inv.src.text);
  const uint64_t length = *inv.length;  // the parser insists on it
  const uint64_t chunk = std::min(length, kStagingChunk);
  auto staging = client.Allocate(chunk);
  if (!staging.ok()) {
    return Failed(absl::StrCat("allocate a staging buffer of ", Bytes(chunk)),
                  staging.status());
  }
  std::optional<File> out;
  for (uint64_t done = 0; done < length;) {
    const uint64_t n = std::min(chunk, length - done);
    auto result = client.Read(*staging, 0, inv.src.region, done, n);
    if (!result.ok()) {
      return Failed(absl::StrCat(what, " (", Bytes(n), " at +", done, ")"),
                    result.status());
    }
    // Opened after the first successful read, so that an unreachable or
    // too small region leaves an existing output file alone.
    if (!out.has_value()) {
      auto opened = File::OpenForWrite(inv.file);
      if (!opened.ok()) return Failed(what, opened.status());
      out.emplace(*std::move(opened));
    }
    if (absl::Status s = out->WriteAll(staging->data(), n); !s.ok()) {
      return Failed(what, s);
    }
    done += n;
  }
  if (absl::Status s = out->Close(); !s.ok()) return Failed(what, s);
  if (inv.file == "-") return absl::OkStatus();
  return context.Print(absl::StrCat("read ", Bytes(length), " from ",
                                    inv.src.text, " to ", inv.file, "\n"));
}

// A region named without a peer is mapped in place when this daemon has
// it; otherwise, if the daemon has a cluster directory, it may be on
// another daemon: move the bytes with transfers, which the daemon routes.
bool ElsewhereInCluster(Client& client, const RegionOperand& operand) {
  auto mapped = client.MapRegion(operand.region.name);
  if (mapped.ok() || mapped.status().code() != absl::StatusCode::kNotFound) {
    return false;
  }
  auto status = client.GetStatus();
  return status.ok() && status->has_directory();
}

}  // namespace

absl::Status RunPut(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto in = File::OpenForRead(inv.file);
  if (!in.ok()) return Failed(absl::StrCat("put ", inv.dest.text), in.status());
  auto client = context.client();
  if (!client.ok()) return client.status();
  return inv.dest.is_local() && !ElsewhereInCluster(**client, inv.dest)
             ? PutLocal(context, **client, *in)
             : PutRemote(context, **client, *in);
}

absl::Status RunGet(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  const RegionOperand& src = context.invocation().src;
  if (src.is_local() && !ElsewhereInCluster(**client, src)) {
    return GetLocal(context, **client);
  }
  if (!context.invocation().length.has_value()) {
    return Failed(absl::StrCat("get ", src.text),
                  absl::InvalidArgumentError(
                      "the region is not on this daemon: give --length N "
                      "(rdmactl ls shows its size)"));
  }
  return GetRemote(context, **client);
}

absl::Status RunCopy(CommandContext& context) {
  const Invocation& inv = context.invocation();
  const std::string what =
      absl::StrCat("copy ", inv.src.text, " to ", inv.dest.text);
  auto client = context.client();
  if (!client.ok()) return client.status();
  // The local side is mapped so that rdmactl can name it in the transfer
  // and check its range here; the daemon checks the other side.
  const bool write = inv.src.is_local();
  const RegionOperand& local = write ? inv.src : inv.dest;
  const RegionOperand& other = write ? inv.dest : inv.src;
  auto mapped = Map(**client, local);
  if (!mapped.ok()) return mapped.status();
  const uint64_t size = mapped->size();
  const uint64_t offset = local.region.offset;
  if (offset > size) {
    return Failed(what, RangeError("", local.region.name, size, offset));
  }
  // Without --length: the rest of SRC (the parser made sure SRC is local).
  const uint64_t length = inv.length.value_or(size - offset);
  if (length == 0) {
    return Failed(what, absl::OutOfRangeError(absl::StrCat(
                            "nothing to copy: offset ", offset,
                            " is the end of region '", local.region.name,
                            "'")));
  }
  if (!RangeInside(size, offset, length)) {
    return Failed(what, RangeError(Bytes(length), local.region.name, size,
                                   offset));
  }
  auto result = write ? (*client)->Write(*mapped, offset, other.region, 0,
                                         length)
                      : (*client)->Read(*mapped, offset, other.region, 0,
                                        length);
  if (!result.ok()) return Failed(what, result.status());
  return context.Print(absl::StrCat("copied ", Bytes(result->bytes), " from ",
                                    inv.src.text, " to ", inv.dest.text,
                                    "\n"));
}

}  // namespace rdmad::rdmactl
