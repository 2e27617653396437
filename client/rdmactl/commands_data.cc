// rdmactl put, get, copy: moving bytes between files and regions.
//
// A region of this daemon named without a peer is mapped into rdmactl
// (Client::MapRegion) and read or written in place, after checking that the
// range fits, so a failed check changes nothing. A remote region is reached
// with one-sided transfers through a session staging buffer of at most
// kStagingChunk bytes, so a large file never needs a buffer of its size;
// its size is asked first (Client::StatRegion), so that data that does not
// fit is refused before anything is written, and `get` knows how much to
// read without --length. So is a region named without a peer that this
// daemon does not have, when it has a cluster directory: the daemon finds
// it.
//
// With an explicit --timeout every call's deadline is the command's (see
// CommandContext::client), so a failure at the deadline says how far the
// command got.
#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/rdmactl/commands.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/io.h"
#include "client/rdmactl/progress.h"
#include "common/size.h"

namespace rdmad::rdmactl {
namespace {

constexpr uint64_t kStagingChunk = uint64_t{64} << 20;

std::string Bytes(uint64_t n) { return ByteCount(n); }

// What a command that failed its range check did not do, for the end of
// its message: a get reads, a put writes, a copy copies.
enum class Untouched { kWritten, kRead, kCopied };

absl::string_view NothingWas(Untouched what) {
  switch (what) {
    case Untouched::kWritten:
      return "nothing was written";
    case Untouched::kRead:
      return "nothing was read";
    case Untouched::kCopied:
      return "nothing was copied";
  }
  return "";
}

// OUT_OF_RANGE for an offset past the end of `region` of `size` bytes.
absl::Status PastEndError(absl::string_view region, uint64_t size,
                          uint64_t offset) {
  return absl::OutOfRangeError(absl::StrCat(
      "offset ", offset, " is past the end of region '", region, "' (",
      Bytes(size), ")"));
}

// OUT_OF_RANGE for `data` (e.g. "in.bin: 300 KiB", "--length 10 B") that
// does not fit in `region` of `size` bytes at `offset`,
// naming every size involved and what was not done.
absl::Status RangeError(absl::string_view data, absl::string_view region,
                        uint64_t size, uint64_t offset, Untouched untouched) {
  if (offset > size) return PastEndError(region, size, offset);
  return absl::OutOfRangeError(absl::StrCat(
      data, " does not fit in region '", region, "' at offset ", offset,
      ": the region has ", Bytes(size), ", ", Bytes(size - offset),
      " from that offset to its end; ", NothingWas(untouched)));
}

// "kv" for a named region, "the region of the descriptor" otherwise.
std::string RegionLabel(const RegionOperand& operand) {
  return operand.region.name.empty() ? std::string("of the descriptor")
                                     : operand.region.name;
}

// A failure part-way: says what was moved before it, and, at the deadline,
// that --timeout ended it.
absl::Status PartlyDone(const CommandContext& context, absl::string_view what,
                        const absl::Status& status, absl::string_view verb,
                        uint64_t done, std::optional<uint64_t> total) {
  std::string progress = absl::StrCat(verb, " ", Bytes(done));
  if (total.has_value()) absl::StrAppend(&progress, " of ", Bytes(*total));
  std::string message(status.message());
  if (absl::IsDeadlineExceeded(status) && context.global().timeout) {
    message = absl::StrCat("--timeout ",
                           absl::FormatDuration(*context.global().timeout),
                           " passed: ", message);
  }
  return Failed(absl::StrCat(what, " (", progress, " before this)"),
                absl::Status(status.code(), message));
}

absl::StatusOr<Buffer> Map(Client& client, const RegionOperand& operand) {
  auto mapped = client.MapRegion(operand.region.name);
  if (!mapped.ok()) {
    return Failed(absl::StrCat("map region ", operand.region.name),
                  mapped.status());
  }
  return mapped;
}

// Size and access of a remote (or descriptor-named) region.
absl::StatusOr<RemoteRegionInfo> Stat(Client& client,
                                      const RegionOperand& operand) {
  auto info = client.StatRegion(operand.region);
  if (!info.ok()) {
    return Failed(absl::StrCat("find the size of ", operand.text),
                  info.status());
  }
  return info;
}

// The JSON report of a data command.
Json Report(absl::string_view command, const std::string& src,
            const std::string& dest, uint64_t bytes, absl::Duration elapsed) {
  Json json = Json::Object();
  json.Set("command", command)
      .Set("src", src)
      .Set("dest", dest)
      .Set("bytes", bytes)
      .Set("seconds", absl::ToDoubleSeconds(elapsed));
  return json;
}

absl::Status PutLocal(CommandContext& context, Client& client, File& in) {
  const absl::Time start = absl::Now();
  const RegionOperand& dest = context.invocation().dest;
  const std::string what = absl::StrCat("put ", dest.text);
  auto mapped = Map(client, dest);
  if (!mapped.ok()) return mapped.status();
  if (!mapped->writable()) {
    return Failed(what, absl::PermissionDeniedError(absl::StrCat(
                            "region '", dest.region.name,
                            "' is read-only for you (see its mode in "
                            "'rdmactl regions'): ask its owner for write "
                            "access (rdmactl chmod/chgrp)")));
  }
  const uint64_t size = mapped->size();
  const uint64_t offset = dest.region.offset;
  if (offset > size) {
    return Failed(what, PastEndError(dest.region.name, size, offset));
  }
  const uint64_t room = size - offset;
  char* target = mapped->data() + offset;
  uint64_t written = 0;
  if (const std::optional<uint64_t> file_size = in.RegularSize()) {
    if (*file_size > room) {
      return Failed(what, RangeError(absl::StrCat(in.name(), ": ",
                                                  Bytes(*file_size)),
                                     dest.region.name, size, offset,
                                     Untouched::kWritten));
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
                                     dest.region.name, size, offset,
                                     Untouched::kWritten));
    }
    std::memcpy(target, data->data(), data->size());
    written = data->size();
  }
  return context.Answer(
      Report("put", in.name(), dest.text, written, absl::Now() - start),
      absl::StrCat("wrote ", Bytes(written), " to ", dest.text, "\n"));
}

absl::Status PutRemote(CommandContext& context, Client& client, File& in) {
  const absl::Time start = absl::Now();
  const RegionOperand& dest = context.invocation().dest;
  const std::string what = absl::StrCat("put ", dest.text);
  auto info = Stat(client, dest);
  if (!info.ok()) return info.status();
  const uint64_t offset = dest.region.offset;
  const std::string label = RegionLabel(dest);
  if (offset > info->size) {
    return Failed(what, PastEndError(label, info->size, offset));
  }
  const uint64_t room = info->size - offset;
  // What goes first into the staging buffer when the input is a pipe.
  std::optional<std::string> first;
  std::optional<uint64_t> total;  // known up front for files
  if (const std::optional<uint64_t> file_size = in.RegularSize()) {
    if (*file_size > room) {
      return Failed(what, RangeError(absl::StrCat(in.name(), ": ",
                                                  Bytes(*file_size)),
                                     label, info->size, offset,
                                     Untouched::kWritten));
    }
    total = *file_size;
  } else if (room < kStagingChunk) {
    // A pipe into less than a chunk of room: read it whole (one byte more
    // than fits tells it is too large) before writing anything.
    auto data = ReadAtMost(in, room);
    if (!data.ok()) return Failed(what, data.status());
    if (data->size() > room) {
      return Failed(what, RangeError(absl::StrCat(in.name(), ": more than ",
                                                  Bytes(room)),
                                     label, info->size, offset,
                                     Untouched::kWritten));
    }
    total = data->size();
    first = *std::move(data);
  } else {
    // A pipe into a large region: its first chunk tells whether it is
    // small; a longer one is checked chunk by chunk as it comes.
    std::string data(kStagingChunk, '\0');
    auto n = in.ReadFull(data.data(), data.size());
    if (!n.ok()) return Failed(what, n.status());
    data.resize(*n);
    if (*n < kStagingChunk) total = *n;
    first = std::move(data);
  }
  const uint64_t chunk =
      total.has_value() ? std::min(*total, kStagingChunk) : kStagingChunk;
  ProgressLine progress(ProgressLine::StderrIsTerminal());
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
        if (!got.ok()) return PartlyDone(context, what, got.status(), "wrote", done, total);
        n = *got;
      }
      if (n == 0) break;
      if (n > room - done) {
        // Only a pipe of more than one chunk gets here: its size showed
        // only now.
        return PartlyDone(
            context, what,
            absl::OutOfRangeError(absl::StrCat(
                in.name(), " has more than the ", Bytes(room),
                " that fit in region '", label, "' from offset ", offset,
                "; the first ", Bytes(done), " were written")),
            "wrote", done, total);
      }
      auto result = client.Write(*staging, 0, dest.region, done, n);
      if (!result.ok()) {
        return PartlyDone(context, what, result.status(), "wrote", done,
                          total);
      }
      done += n;
      progress.Show(TransferProgressText(what, done, total,
                                         absl::Now() - start));
      if (n < chunk) break;
    }
  }
  progress.Clear();
  return context.Answer(
      Report("put", in.name(), dest.text, done, absl::Now() - start),
      absl::StrCat("wrote ", Bytes(done), " to ", dest.text, "\n"));
}

absl::Status GetLocal(CommandContext& context, Client& client) {
  const absl::Time start = absl::Now();
  const Invocation& inv = context.invocation();
  const std::string what = absl::StrCat("get ", inv.src.text);
  auto mapped = Map(client, inv.src);
  if (!mapped.ok()) return mapped.status();
  const uint64_t size = mapped->size();
  const uint64_t offset = inv.src.region.offset;
  if (offset > size) {
    return Failed(what, PastEndError(inv.src.region.name, size, offset));
  }
  const uint64_t length = inv.length.value_or(size - offset);
  if (length > size - offset) {
    return Failed(what, RangeError(absl::StrCat("--length ", Bytes(length)),
                                   inv.src.region.name, size, offset,
                                   Untouched::kRead));
  }
  // Opened only now: a failed check leaves an existing output file alone.
  auto out = File::OpenForWrite(inv.file);
  if (!out.ok()) return Failed(what, out.status());
  if (absl::Status s = out->WriteAll(mapped->data() + offset, length);
      !s.ok()) {
    return Failed(what, s);
  }
  if (absl::Status s = out->Close(); !s.ok()) return Failed(what, s);
  const Json report =
      Report("get", inv.src.text, inv.file, length, absl::Now() - start);
  if (inv.file == "-") return absl::OkStatus();
  return context.Answer(report,
                        absl::StrCat("read ", Bytes(length), " from ",
                                     inv.src.text, " to ", inv.file, "\n"));
}

absl::Status GetRemote(CommandContext& context, Client& client) {
  const absl::Time start = absl::Now();
  const Invocation& inv = context.invocation();
  const std::string what = absl::StrCat("get ", inv.src.text);
  uint64_t length = 0;
  if (inv.length.has_value()) {
    length = *inv.length;
  } else {
    // The rest of the region from the offset, as its daemon tells its size:
    // none at its very end, as for a local region.
    auto info = Stat(client, inv.src);
    if (!info.ok()) return info.status();
    const uint64_t offset = inv.src.region.offset;
    if (offset > info->size) {
      return Failed(what, PastEndError(RegionLabel(inv.src), info->size,
                                       offset));
    }
    length = info->size - offset;
  }
  std::optional<File> out;
  if (length == 0) {
    // Nothing to transfer (and a staging buffer cannot be empty): the
    // output is made, empty, as a local get makes it.
    auto opened = File::OpenForWrite(inv.file);
    if (!opened.ok()) return Failed(what, opened.status());
    out.emplace(*std::move(opened));
  }
  const uint64_t chunk = std::min(length, kStagingChunk);
  std::optional<Buffer> staging;
  if (chunk > 0) {
    auto allocated = client.Allocate(chunk);
    if (!allocated.ok()) {
      return Failed(
          absl::StrCat("allocate a staging buffer of ", Bytes(chunk)),
          allocated.status());
    }
    staging.emplace(*std::move(allocated));
  }
  ProgressLine progress(ProgressLine::StderrIsTerminal() && inv.file != "-");
  for (uint64_t done = 0; done < length;) {
    const uint64_t n = std::min(chunk, length - done);
    auto result = client.Read(*staging, 0, inv.src.region, done, n);
    if (!result.ok()) {
      return PartlyDone(context, what, result.status(), "read", done, length);
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
    progress.Show(
        TransferProgressText(what, done, length, absl::Now() - start));
  }
  progress.Clear();
  if (absl::Status s = out->Close(); !s.ok()) return Failed(what, s);
  const Json report =
      Report("get", inv.src.text, inv.file, length, absl::Now() - start);
  if (inv.file == "-") return absl::OkStatus();
  return context.Answer(report,
                        absl::StrCat("read ", Bytes(length), " from ",
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
  return status.ok() && status->directory.has_value();
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
  // A region elsewhere in the cluster is sized as a remote one: the
  // daemon's StatRegion asks the directory.
  if (src.is_local() && !ElsewhereInCluster(**client, src)) {
    return GetLocal(context, **client);
  }
  return GetRemote(context, **client);
}

absl::Status RunCopy(CommandContext& context) {
  const absl::Time start = absl::Now();
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
    return Failed(what, PastEndError(local.region.name, size, offset));
  }
  uint64_t length = 0;
  if (inv.length.has_value()) {
    length = *inv.length;
  } else if (write) {
    length = size - offset;  // the rest of SRC
  } else {
    // SRC is remote: the rest of it, as its daemon tells its size.
    auto info = Stat(**client, inv.src);
    if (!info.ok()) return info.status();
    const uint64_t src_offset = inv.src.region.offset;
    if (src_offset > info->size) {
      return Failed(what, PastEndError(RegionLabel(inv.src), info->size,
                                       src_offset));
    }
    length = info->size - src_offset;
  }
  if (length == 0) {
    return Failed(what, absl::OutOfRangeError(
                            inv.length.has_value()
                                ? std::string("nothing to copy: --length is 0")
                                : absl::StrCat("nothing to copy: offset ",
                                               inv.src.region.offset,
                                               " is the end of region '",
                                               RegionLabel(inv.src), "'")));
  }
  if (!RangeInside(size, offset, length)) {
    return Failed(what, RangeError(Bytes(length), local.region.name, size,
                                   offset, Untouched::kCopied));
  }
  auto result = write ? (*client)->Write(*mapped, offset, other.region, 0,
                                         length)
                      : (*client)->Read(*mapped, offset, other.region, 0,
                                        length);
  if (!result.ok()) return Failed(what, result.status());
  Json report = Report("copy", inv.src.text, inv.dest.text, result->bytes,
                       absl::Now() - start);
  report.Set("transport", result->transport == Transport::kNone
                              ? absl::string_view("local")
                              : TransportName(result->transport));
  return context.Answer(report,
                        absl::StrCat("copied ", Bytes(result->bytes), " from ",
                                     inv.src.text, " to ", inv.dest.text,
                                     "\n"));
}

}  // namespace rdmad::rdmactl
