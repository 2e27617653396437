// The command-specific half of parsing an rdmactl command line: turns a
// command's positional arguments and options, already checked against its
// CommandSpec (how many, which names), into the fields of an Invocation,
// checking each value. One function per command; ParseArgs (args.h) calls
// FillCommand after the generic checks.
//
// Thread-compatible: plain functions.
#ifndef RDMAD_CLIENT_RDMACTL_COMMAND_FILL_H_
#define RDMAD_CLIENT_RDMACTL_COMMAND_FILL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/rdmactl/args.h"
#include "client/rdmactl/command_specs.h"

namespace rdmad::rdmactl {

// Fills the fields of `inv` that `spec`'s command takes from `positional`
// (as many as the spec allows) and `options` (long name -> value; "" for a
// flag). INVALID_ARGUMENT saying what is wrong with a value; the caller
// adds the command's name and usage hint.
absl::Status FillCommand(const CommandSpec& spec,
                         const std::vector<std::string>& positional,
                         const std::map<std::string, std::string>& options,
                         Invocation& inv);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_COMMAND_FILL_H_
