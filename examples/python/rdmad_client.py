#!/usr/bin/env python3
"""A small Python client of rdmad's Local gRPC service.

It shows that any language with gRPC can drive rdmad: the stubs are
generated from proto/rdmad/v1/*.proto at run time into a temporary
directory (no generated code is checked in), then it

  1. opens a session on the session socket (<socket>.session, a
     SOCK_SEQPACKET Unix socket): the daemon learns our uid/gid/pid from the
     kernel there and hands back a session token;
  2. calls Local.GetStatus and Local.ListRegions;
  3. allocates a buffer (Local.AllocateBuffer), exports it for remote
     read/write (Local.ExportRegion), fetches its descriptor
     (Local.GetDescriptor), sees it in ListRegions, and frees it
     (Local.FreeRegion).

Every call carries the token in the `rdmad-session` metadata and a deadline.

    examples/python/rdmad_client.py [--socket /run/rdmad/rdmad.sock]
                                    [--name py-demo] [--size 1048576] [--json]

Needs python3-grpcio and python3-protobuf, and to generate the stubs either
protoc with grpc_python_plugin (Debian: protobuf-compiler,
protobuf-compiler-grpc) or python3-grpc-tools.
"""

import argparse
import importlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
PROTOS = ["rdmad/v1/rdmad.proto", "rdmad/v1/config.proto"]

# Session socket wire format (common/session_wire.h): a 32-byte
# little-endian header, then `text_length` bytes of text.
HEADER = struct.Struct("<IHHQQiI")
MAGIC = 0x52445343  # "RDSC"
VERSION = 1
HELLO = 1
ERROR = 6
MAX_TEXT = 4096
DEADLINE_S = 10.0


def generate_stubs(proto_dir, out_dir):
    """Writes rdmad/v1/*_pb2.py and *_pb2_grpc.py into out_dir."""
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc and plugin:
        # The system protoc understands proto3 `optional`, which the protoc
        # bundled in older grpc_tools releases (Debian 12's) rejects.
        cmd = [protoc, "-I" + proto_dir, "--python_out=" + out_dir,
               "--grpc_python_out=" + out_dir,
               "--plugin=protoc-gen-grpc_python=" + plugin] + PROTOS
        result = subprocess.run(cmd, capture_output=True, text=True,
                                timeout=60)
        if result.returncode != 0:
            sys.exit("protoc failed: " + result.stderr)
    else:
        from grpc_tools import protoc as grpc_protoc
        if grpc_protoc.main(["protoc", "-I" + proto_dir,
                             "--python_out=" + out_dir,
                             "--grpc_python_out=" + out_dir] + PROTOS) != 0:
            sys.exit("grpc_tools.protoc failed on " + proto_dir)
    # Packages for `import rdmad.v1.rdmad_pb2`.
    for pkg in ("rdmad", os.path.join("rdmad", "v1")):
        open(os.path.join(out_dir, pkg, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)
    return (importlib.import_module("rdmad.v1.rdmad_pb2"),
            importlib.import_module("rdmad.v1.rdmad_pb2_grpc"))


def open_session(local_socket):
    """Connects to the session socket; returns (socket, token).

    The session lives as long as this socket stays open: the daemon frees
    the session's buffers when it closes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(DEADLINE_S)
    sock.connect(local_socket + ".session")
    data = sock.recv(HEADER.size + MAX_TEXT)
    if len(data) < HEADER.size:
        raise RuntimeError("short hello from the session socket")
    magic, version, kind, a, _b, code, length = HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise RuntimeError("not an rdmad session socket")
    text = data[HEADER.size:HEADER.size + length].decode()
    if kind == ERROR:
        raise RuntimeError("session refused (code %d): %s" % (code, text))
    if kind != HELLO:
        raise RuntimeError("unexpected session message type %d" % kind)
    return sock, a, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", default="/run/rdmad/rdmad.sock")
    parser.add_argument("--proto-dir", default=DEFAULT_PROTO_DIR)
    parser.add_argument("--name", default="py-demo")
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of text")
    args = parser.parse_args()

    import grpc  # after argparse, so --help works without grpcio
    from google.protobuf import json_format

    out = {}
    with tempfile.TemporaryDirectory(prefix="rdmad-py-") as tmp:
        pb, pb_grpc = generate_stubs(args.proto_dir, tmp)
        session, session_id, token = open_session(args.socket)
        metadata = [("rdmad-session", token)]
        with grpc.insecure_channel("unix:" + args.socket) as channel:
            local = pb_grpc.LocalStub(channel)

            def call(method, request):
                return method(request, metadata=metadata, timeout=DEADLINE_S)

            status = call(local.GetStatus, pb.GetStatusRequest())
            out["session_id"] = session_id
            out["status"] = json_format.MessageToDict(
                status, preserving_proto_field_name=True)

            regions = call(local.ListRegions, pb.ListRegionsRequest())
            out["regions_before"] = len(regions.regions)

            allocated = call(local.AllocateBuffer, pb.AllocateBufferRequest(
                size=args.size, name=args.name)).region
            exported = call(local.ExportRegion, pb.ExportRegionRequest(
                region=pb.RegionRef(name=args.name),
                access=pb.ACCESS_READ_WRITE)).region
            descriptor = call(local.GetDescriptor, pb.GetDescriptorRequest(
                region=pb.RegionRef(name=args.name)))
            listed = [r for r in call(local.ListRegions,
                                      pb.ListRegionsRequest()).regions
                      if r.id == allocated.id]
            out["allocated"] = {
                "id": allocated.id,
                "name": allocated.name,
                "size": allocated.size,
                "export_access": pb.Access.Name(exported.export_access),
                "descriptor": descriptor.encoded,
                "listed": len(listed) == 1,
            }
            call(local.FreeRegion, pb.FreeRegionRequest(
                region=pb.RegionRef(id=allocated.id)))
            out["freed"] = True
        session.close()

    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        s = out["status"]
        print("rdmad %s (pid %s), transport %s, peer %s" % (
            s.get("version"), s.get("pid"), s.get("transport"),
            s.get("peer_listen")))
        a = out["allocated"]
        print("allocated '%s' (%d bytes, id %d), exported %s" % (
            a["name"], a["size"], a["id"], a["export_access"]))
        print("descriptor %s" % a["descriptor"])
        print("freed it; %d region(s) were there before" %
              out["regions_before"])


if __name__ == "__main__":
    main()
